//! MULTI / EXEC / DISCARD / WATCH / UNWATCH through the proxy, on a pinned
//! connection to the one node that owns every key the transaction touches.
//!
//! ```text
//!  WATCH k ──► pin k's node, send WATCH on the pinned connection (now)
//!  MULTI   ──► +OK (the proxy starts queueing; after WATCH, MULTI goes to the pinned node now)
//!  SET k v ──► checked (arity, one node) ──► +QUEUED, kept by the proxy
//!  EXEC    ──► enter the epoch gate ──► owner still the pinned node?
//!                 yes: MULTI (unless sent already; await +OK), queued…, EXEC on the pinned connection ──► EXEC's reply, unchanged
//!                 no, no WATCH: re-pin to the new owner and run there
//!                 no, with WATCH: -EXECABORT (nothing was sent; the WATCH could not see the new owner)
//! ```
//!
//! Queued commands stay in the proxy until EXEC, so a transaction is never
//! half-applied by a topology change: it runs whole on the node that owns its
//! keys when EXEC enters the epoch gate (a cutover pausing those keys is
//! waited out first; writes to moving keys are tracked dirty like any write,
//! so the cutover's final re-sync waits for EXEC's reply), or not at all.
//! Queue-time errors (unknown command, arity, `CROSSSLOT`, a command the
//! proxy cannot queue) flag the transaction, and EXEC answers
//! `-EXECABORT`, as Redis does. Called by `dispatch` for the
//! transaction commands and for everything a client sends inside MULTI.

pub(crate) mod state;

use crate::proxy::conn::error::CROSSSLOT;
use state::Multi;

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::catalogue::Id;
use crate::catalogue::{arity_error, unknown_command_error};
use crate::proxy::admin::migration;
use crate::proxy::config::ha::WriteAck;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ha::reads::{acked_or_error, wait_request};
use crate::proxy::policy::Pinned as PinKind;
use crate::proxy::policy::{CommandSpec, Kind};
use crate::proxy::upstream::topology::{self, Node};
use crate::proxy::Proxy;
use crate::resp::{encode, Request};

/// Commands one transaction may queue, at most.
const MAX_QUEUED: usize = 100_000;
/// Bytes of queued requests one transaction may hold, at most.
const MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;
const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// Local commands that mean the same on a node, so they can be queued.
const QUEUEABLE_LOCAL: &[Id] = &[Id::Ping, Id::Echo, Id::Time];

/// Handles a transaction command, or any command sent inside MULTI.
pub(crate) async fn handle(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: Option<&'static CommandSpec>,
    req: Request,
) -> Pending {
    let queueing = client.tx.is_queueing();
    let name = spec.map(|s| s.name).unwrap_or("");
    if let Some(spec) = spec.filter(|s| !s.is_arity_ok(req.args.len())) {
        if name == "exec" {
            // Redis rejects a malformed EXEC by discarding the transaction,
            // in MULTI or not.
            client.tx.clear();
            return Pending::error(&format!(
                "EXECABORT Transaction discarded because of: {}",
                arity_error(spec).trim_start_matches("ERR ")
            ));
        }
        // Inside MULTI a malformed command flags the transaction.
        if let Some(m) = client.tx.multi.as_mut() {
            m.errored = true;
        }
        return Pending::error(&arity_error(spec));
    }
    match (name, queueing) {
        ("multi", false) => {
            let node = client.tx.watch.as_ref().map(|p| p.node.clone());
            // With a WATCH the node is known: MULTI goes there now, so that
            // EXEC leaves as soon as the client sends it (a write another
            // client sends right after EXEC must not overtake it).
            let started = match &client.tx.watch {
                Some(w) => Some(w.send(Bytes::from_static(MULTI)).await),
                None => None,
            };
            client.tx.multi = Some(Multi {
                node,
                started,
                ..Multi::default()
            });
            ok()
        }
        ("multi", true) => Pending::error("ERR MULTI calls can not be nested"),
        ("exec", false) => Pending::error("ERR EXEC without MULTI"),
        ("discard", false) => Pending::error("ERR DISCARD without MULTI"),
        ("watch", true) => Pending::error("ERR WATCH inside MULTI is not allowed"),
        ("discard", true) => {
            client.tx.clear();
            ok()
        }
        ("unwatch", false) => {
            client.tx.watch = None;
            ok()
        }
        ("watch", false) => watch(proxy, client, spec.expect("watch is in the table"), req).await,
        ("exec", true) => exec(proxy, client).await,
        _ => queue(proxy, client, spec, req),
    }
}

fn ok() -> Pending {
    Pending::Ready(Bytes::from_static(b"+OK\r\n"))
}

/// The node that owns every one of `keys` now, or `CROSSSLOT`.
fn one_owner(proxy: &Proxy, keys: &[Bytes]) -> Result<Option<Arc<Node>>, Pending> {
    let routing = proxy.routing.load();
    let mut node: Option<Arc<Node>> = None;
    for k in keys {
        let owner = routing.owner(k);
        match &node {
            Some(n) if !Arc::ptr_eq(n, owner) => return Err(Pending::error(CROSSSLOT)),
            Some(_) => {}
            None => node = Some(owner.clone()),
        }
    }
    Ok(node)
}

/// WATCH: pins the keys' node (all on one) and watches them there now.
async fn watch(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: &'static CommandSpec,
    req: Request,
) -> Pending {
    let keys: Vec<Bytes> = match spec.key_positions(&req.args) {
        Ok(ps) => ps.iter().map(|&p| req.args[p].clone()).collect(),
        Err(e) => return Pending::error(&e.to_string()),
    };
    let routing = topology::enter(&proxy.routing, || keys.iter()).await;
    let node = match one_owner(proxy, &keys) {
        Ok(Some(n)) => n,
        Ok(None) => return Pending::error(&arity_error(spec)),
        Err(p) => return p,
    };
    if let Some(w) = &client.tx.watch {
        if !w.is_to(&node) {
            return Pending::error(CROSSSLOT);
        }
    } else {
        match node.pin(client.proto) {
            Ok(p) => client.tx.watch = Some(p),
            Err(e) => return Pending::error(&e.to_string()),
        }
    }
    let pin = client.tx.watch.as_ref().expect("pinned above");
    let rx = pin.send_for(req.raw, &client.budget).await;
    drop(routing);
    Pending::One(rx)
}

/// Checks and keeps one command sent inside MULTI; answers `+QUEUED` or the
/// error that flags the transaction.
fn queue(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: Option<&'static CommandSpec>,
    req: Request,
) -> Pending {
    let proto = client.proto;
    let multi = client.tx.multi.as_mut().expect("queueing");
    let fail = |multi: &mut Multi, msg: &str| {
        multi.errored = true;
        Pending::error(msg)
    };
    let Some(spec) = spec else {
        return fail(multi, &unknown_command_error(&req.args));
    };
    if !spec.is_arity_ok(req.args.len()) {
        return fail(multi, &arity_error(spec));
    }
    let queueable = match spec.kind {
        Kind::Keyed | Kind::Split(_) | Kind::Pinned(PinKind::Blocking) => true,
        Kind::Pinned(PinKind::Transaction) => spec.id == Id::Unwatch,
        Kind::Local => QUEUEABLE_LOCAL.contains(&spec.id),
        _ => false,
    };
    if !queueable {
        return fail(
            multi,
            &format!(
                "ERR '{}' cannot be queued in a transaction through shardis: a transaction runs on one node",
                spec.name
            ),
        );
    }
    let keys: Vec<Bytes> = match spec.key_positions(&req.args) {
        Ok(ps) => ps.iter().map(|&p| req.args[p].clone()).collect(),
        Err(e) => return fail(multi, &e.to_string()),
    };
    let owner = match one_owner(proxy, &keys) {
        Ok(o) => o,
        Err(_) => return fail(multi, CROSSSLOT),
    };
    if let Some(owner) = owner {
        match &multi.node {
            Some(n) if !Arc::ptr_eq(n, &owner) => return fail(multi, CROSSSLOT),
            Some(_) => {}
            None => {
                // The first key pins the transaction to its node.
                match owner.pin(proto) {
                    Ok(p) => multi.pin = Some(p),
                    Err(e) => return fail(multi, &e.to_string()),
                }
                multi.node = Some(owner);
            }
        }
    }
    if multi.queued.len() >= MAX_QUEUED || multi.bytes + req.raw.len() > MAX_QUEUED_BYTES {
        return fail(
            multi,
            &format!("ERR transaction too large for shardis: at most {MAX_QUEUED} commands and {MAX_QUEUED_BYTES} bytes"),
        );
    }
    multi.writes |= spec.is_write();
    multi.keys.extend(keys);
    multi.bytes += req.raw.len();
    multi.queued.push(req.raw);
    Pending::Ready(Bytes::from_static(b"+QUEUED\r\n"))
}

/// EXEC: runs the queued commands whole on the node that owns their keys now.
async fn exec(proxy: &Arc<Proxy>, client: &mut ClientState) -> Pending {
    let multi = client.tx.multi.take().expect("queueing");
    let watch = client.tx.watch.take();
    if multi.errored {
        return Pending::error(EXECABORT);
    }
    let keys = multi.keys;
    let routing = match client.enter_for(&proxy.routing, || keys.iter()).await {
        Ok(g) => g,
        Err(p) => return p,
    };
    let mut target: Option<Arc<Node>> = None;
    for k in &keys {
        let owner = routing.owner(k);
        match &target {
            Some(t) if !Arc::ptr_eq(t, owner) => return Pending::error(SPLIT_ABORT),
            Some(_) => {}
            None => target = Some(owner.clone()),
        }
    }
    let target = match (target, &multi.node) {
        (Some(t), _) => t,
        // No key at all (PING, ECHO, or nothing): the WATCH's node, else any.
        (None, Some(n)) => n.clone(),
        (None, None) => routing.node(0).clone(),
    };
    let mut started = None;
    let pin = match (watch, multi.pin) {
        (Some(w), _) if w.is_to(&target) => {
            started = multi.started;
            w
        }
        // The WATCH is on the old owner, which no longer holds the keys: it
        // could not see a change at the new owner. Nothing was sent.
        (Some(_), _) => return Pending::error(MOVED_ABORT),
        (None, Some(p)) if p.is_to(&target) => p,
        // Nothing was sent yet: pin the current owner (re-established after
        // a cutover moved the keys).
        (None, _) => match target.pin(client.proto) {
            Ok(p) => p,
            Err(e) => return Pending::error(&e.to_string()),
        },
    };
    // MULTI's reply first: a node that cannot run a transaction must not run
    // its commands one by one.
    let wait = Duration::from_millis(proxy.config().request_timeout_ms);
    let started = match started {
        Some(s) => s,
        None => pin.send(Bytes::from_static(MULTI)).await,
    };
    match tokio::time::timeout(wait, started).await {
        Ok(Ok(r)) if r.as_ref() == b"+OK\r\n" => {}
        Ok(Ok(r)) => {
            return Pending::error(&format!(
                "ERR node {} cannot run transactions: MULTI answered {}",
                target.label(),
                String::from_utf8_lossy(&r).trim_end()
            ))
        }
        _ => {
            return Pending::error(&format!(
                "ERR node {} did not answer MULTI in time; the transaction was not run",
                target.label()
            ))
        }
    }
    // The queued writes are about to run: no cached GET of their keys may
    // be served from here on.
    if let (Some(cache), true) = (&proxy.ops.hot_cache, multi.writes) {
        for k in &keys {
            cache.invalidate(k);
        }
    }
    let mut replies = Vec::with_capacity(multi.queued.len());
    for raw in multi.queued {
        replies.push(pin.send(raw).await);
    }
    let exec_raw = Bytes::from_static(b"*1\r\n$4\r\nEXEC\r\n");
    // write_ack = "replica": WAIT 1 right behind EXEC on the same
    // connection; EXEC's reply stands only if WAIT counted a replica.
    let acked = multi.writes && proxy.ha.config.write_ack == WriteAck::Replica;
    let (mut rx, waited) = if acked {
        let ms = proxy.ha.config.wait_timeout_ms;
        let rx = pin.send(exec_raw).await;
        (rx, Some((pin.send(wait_request(ms)).await, ms)))
    } else {
        (pin.send_for(exec_raw, &client.budget).await, None)
    };
    let shard = target.spec.name.clone();
    if let (true, Some(m)) = (multi.writes, &routing.migration) {
        let moving: Vec<Bytes> = keys
            .iter()
            .filter(|k| routing.is_moving(k))
            .cloned()
            .collect();
        if !moving.is_empty() {
            rx = migration::track_write(&m.dirty, moving, rx);
        }
    }
    drop(routing);
    Pending::Later(Box::pin(async move {
        // Held until EXEC answers: dropping it would close the connection.
        let _pin = pin;
        for r in replies {
            let _ = r.await;
        }
        let reply = rx.await.unwrap_or_else(|_| {
            let mut b = BytesMut::new();
            encode::error(
                &mut b,
                "ERR the node's connection was lost before EXEC answered; the transaction may or may not have run",
            );
            b.freeze()
        });
        let Some((waited, ms)) = waited else {
            return reply;
        };
        // Not charged on arrival: the session charges a reply built here.
        acked_or_error(reply, waited.await.ok(), &shard, ms, "transaction")
    }))
}

const SPLIT_ABORT: &str = "EXECABORT Transaction discarded: a topology change put its keys on different nodes (nothing was applied); retry it";
const MOVED_ABORT: &str = "EXECABORT Transaction discarded: its keys moved to another node in a topology change since WATCH (nothing was applied); retry it";
