//! Routing one request: classify it with the command table, then forward it
//! to its key's owner, split it across owners, fan it out to every node, or
//! hand it to the local or admin handlers.
//!
//! Called by the client session for every request, in order. While a migration
//! runs, a key whose owner changed is first made to live at its new owner
//! (see `migration::ensure_moved`) before the request is forwarded there.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use super::budget::ReplyBudget;
use super::hot_cache::{self, Lookup};
use super::merge::{aggregate, lost, merge_fragments, owned_only};
use super::metrics::Served;
use super::migration;
use super::session::{ClientState, Pending};
use super::topology::{self, Node, Routing};
use super::Proxy;
use crate::resp::command::{arity_error, unknown_command_error, Aggregate, KeySpec, Merge, Pinned};
use crate::resp::{encode, lookup, CommandSpec, Kind, Request};

/// Routes one request and returns the reply slot the client is owed for it.
pub async fn dispatch(proxy: &Arc<Proxy>, client: &mut ClientState, req: Request) -> Pending {
    let spec = lookup(req.name());
    client.served.set(Served::of(spec));
    // Inside MULTI everything is queued (or refused) by the transaction,
    // except what ends the connection's state as a whole.
    if client.tx.is_queueing() && !spec.is_some_and(|s| matches!(s.name, "quit" | "reset")) {
        return super::transaction::handle(proxy, client, spec, req).await;
    }
    let Some(spec) = spec else {
        return Pending::error(&unknown_command_error(&req.args));
    };
    // The transaction commands check their own arity: a bad EXEC also
    // discards the transaction, as Redis does.
    if !spec.is_arity_ok(req.args.len()) && spec.kind != Kind::Pinned(Pinned::Transaction) {
        return Pending::error(&arity_error(spec));
    }
    if let Some(p) = super::pubsub::in_subscribe_mode(proxy, client, spec, &req).await {
        return p;
    }
    match spec.kind {
        Kind::Keyed
            if matches!(spec.name, "xread" | "xreadgroup")
                && crate::resp::keywords::is_blocking_stream_read(&req.args) =>
        {
            super::blocking::handle(proxy, client, spec, req).await
        }
        Kind::Keyed => keyed(proxy, client, spec, req).await,
        Kind::Split(merge) => split(proxy, client, spec, req, merge).await,
        Kind::FanOut(agg) => {
            // FLUSHALL / FLUSHDB: every cached GET may be gone.
            if let (Some(cache), true) = (&proxy.ops.hot_cache, spec.write) {
                cache.clear();
            }
            fan_out(proxy, client, req, agg).await
        }
        Kind::Local => super::local::handle(proxy, client, spec, req).await,
        Kind::Admin => super::admin::handle(proxy, client, req).await,
        Kind::Pinned(Pinned::Transaction) => {
            super::transaction::handle(proxy, client, Some(spec), req).await
        }
        Kind::Pinned(Pinned::Blocking) => super::blocking::handle(proxy, client, spec, req).await,
        Kind::PubSub(kind) => super::pubsub::handle(proxy, client, spec, req, kind).await,
        Kind::Refused(why) => Pending::error(&format!(
            "ERR '{}' is not supported by shardis: {why}",
            spec.name
        )),
    }
}

/// The moving keys a write touches, to be marked dirty when it is answered.
fn moving_writes(
    routing: &Routing,
    spec: &CommandSpec,
    keys: impl Iterator<Item = Bytes>,
) -> Option<Vec<Bytes>> {
    routing.migration.as_ref()?;
    if !spec.write {
        return None;
    }
    let moving: Vec<Bytes> = keys
        .filter(|k| routing.is_moving(k))
        .map(|k| Bytes::copy_from_slice(&k))
        .collect();
    (!moving.is_empty()).then_some(moving)
}

/// Sends a request, tracking it if it writes moving keys; its reply is
/// charged to the client's budget when it arrives.
async fn send_tracked(
    client: &ClientState,
    routing: &Routing,
    node: &Node,
    raw: Bytes,
    track: Option<Vec<Bytes>>,
) -> oneshot::Receiver<Bytes> {
    let rx = node
        .upstream(client.proto, client.id)
        .send_for(raw, Some(client.budget.clone()))
        .await;
    match (track, &routing.migration) {
        (Some(keys), Some(m)) => migration::track_write(&m.dirty, keys, rx),
        _ => rx,
    }
}

/// Routes by the keys `spec` declares (all on one node); also used by
/// `info::memory` for MEMORY USAGE.
pub(super) async fn keyed(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    spec: &'static CommandSpec,
    req: Request,
) -> Pending {
    if let KeySpec::Range {
        first: 1, last: 1, ..
    } = spec.keys
    {
        if req.args.len() > 1 {
            return single_key(proxy, client, spec, req).await;
        }
    }
    let positions = spec.key_positions(&req.args);
    let keyless = match &positions {
        Ok(p) => p.is_empty() && matches!(spec.keys, KeySpec::Range { .. }),
        // A malformed key count: Redis refuses the request before touching
        // data, with an error that depends on more than the count (EVALSHA
        // checks its digest first), so let a node say it. Any other error
        // is the proxy's own refusal and is answered here: it must never
        // reach a node (XREAD BLOCK would hold the shared upstream).
        Err(_) => matches!(spec.keys, KeySpec::NumKeys { .. }),
    };
    if keyless {
        // A form with no key at all (OBJECT HELP, OBJECT ENCODING without
        // its key) or one Redis refuses: it touches no data, so any node
        // answers it as Redis would.
        let routing = topology::enter(&proxy.routing, std::iter::empty).await;
        client.served.on(routing.ring.locate(&req.args[0]));
        let rx = routing
            .owner(&req.args[0])
            .upstream(client.proto, client.id)
            .send(req.raw)
            .await;
        return Pending::One(rx);
    }
    let positions = match positions {
        Ok(p) => p,
        Err(e) => return Pending::error(&e),
    };
    if positions.is_empty() {
        return Pending::error(&format!(
            "ERR '{}' without keys cannot be routed: declare at least one key so shardis can pick a node",
            spec.name
        ));
    }
    let routing = topology::enter(&proxy.routing, || positions.iter().map(|&p| &req.args[p])).await;
    let first = routing.ring.locate(&req.args[positions[0]]);
    let node = routing.nodes[first].clone();
    client.served.on(first);
    proxy.ops.hot_keys.sample(&req.args[positions[0]]);
    for &p in &positions[1..] {
        if !Arc::ptr_eq(routing.owner(&req.args[p]), &node) {
            return Pending::error(super::transaction::CROSSSLOT);
        }
    }
    invalidate_written(proxy, spec, &req.args, &positions);
    let track = moving_writes(
        &routing,
        spec,
        positions.iter().map(|&p| req.args[p].clone()),
    );
    let rx = send_tracked(client, &routing, &node, req.raw, track).await;
    Pending::Charged(rx)
}

/// The hot path: a command with one key at position 1 (GET, SET, INCR, …).
async fn single_key(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    spec: &'static CommandSpec,
    req: Request,
) -> Pending {
    let Request { raw, args } = req;
    let key = &args[1];
    let routing = topology::enter(&proxy.routing, || std::iter::once(key)).await;
    proxy.ops.hot_keys.sample(key);
    // One branch when the cache is off.
    let mut fill = None;
    if let Some(cache) = &proxy.ops.hot_cache {
        if spec.write {
            cache.invalidate(key);
        } else if spec.name == "get" && args.len() == 2 && proxy.ops.hot_keys.is_hot(key) {
            let epoch = routing.ring.epoch();
            match cache.lookup(key, epoch, Instant::now()) {
                Lookup::Hit(payload) => {
                    return Pending::Ready(hot_cache::reply(&payload, client.proto))
                }
                Lookup::Miss(token) => fill = Some((token, epoch)),
            }
        }
    }
    let idx = routing.ring.locate(key);
    let node = &routing.nodes[idx];
    client.served.on(idx);
    let track = moving_writes(&routing, spec, std::iter::once(key.clone()));
    let rx = send_tracked(client, &routing, node, raw, track).await;
    match fill {
        Some((token, epoch)) => fill_on_reply(proxy, client, key.clone(), token, epoch, rx),
        None if spec.write && proxy.ops.hot_cache.is_some() => {
            forget_on_reply(proxy, client, key.clone(), rx)
        }
        None => Pending::Charged(rx),
    }
}

/// A forwarded write whose key is forgotten again once the node answered: a
/// GET from another client, sent on another connection after the first
/// invalidation, may have read the old value just before the write landed.
fn forget_on_reply(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    key: Bytes,
    rx: oneshot::Receiver<Bytes>,
) -> Pending {
    let proxy = proxy.clone();
    let budget = client.budget.clone();
    Pending::Later(Box::pin(async move {
        let Ok(reply) = rx.await else {
            return lost();
        };
        budget.release(reply.len());
        if let Some(cache) = &proxy.ops.hot_cache {
            cache.invalidate(&key);
        }
        reply
    }))
}

/// A forwarded hot GET whose reply also fills the cache (bulk and nil only).
fn fill_on_reply(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    key: Bytes,
    token: u64,
    epoch: u64,
    rx: oneshot::Receiver<Bytes>,
) -> Pending {
    let proxy = proxy.clone();
    let budget = client.budget.clone();
    Pending::Later(Box::pin(async move {
        let Ok(reply) = rx.await else {
            return lost();
        };
        // Charged on arrival; the session charges it again when it takes it.
        budget.release(reply.len());
        if let (Some(cache), Some(payload)) = (&proxy.ops.hot_cache, hot_cache::cacheable(&reply)) {
            cache.fill(&key, token, epoch, payload, Instant::now());
        }
        reply
    }))
}

/// Forgets cached GETs of the keys a write is about to change.
fn invalidate_written(proxy: &Proxy, spec: &CommandSpec, args: &[Bytes], positions: &[usize]) {
    if let (Some(cache), true) = (&proxy.ops.hot_cache, spec.write) {
        for &p in positions {
            cache.invalidate(&args[p]);
        }
    }
}

async fn split(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    spec: &'static CommandSpec,
    req: Request,
    merge: Merge,
) -> Pending {
    let positions = match spec.key_positions(&req.args) {
        Ok(p) => p,
        Err(e) => return Pending::error(&e),
    };
    if merge == Merge::AllOk && req.args.len().is_multiple_of(2) {
        return Pending::error(&arity_error(spec));
    }
    let routing = topology::enter(&proxy.routing, || positions.iter().map(|&p| &req.args[p])).await;
    invalidate_written(proxy, spec, &req.args, &positions);
    // Group keys by owner node (not by ring point), keeping each key's position.
    let mut groups: Vec<(Arc<Node>, Vec<usize>)> = Vec::new();
    for &p in &positions {
        proxy.ops.hot_keys.sample(&req.args[p]);
        let node = routing.owner(&req.args[p]);
        match groups.iter_mut().find(|(n, _)| Arc::ptr_eq(n, node)) {
            Some((_, ps)) => ps.push(p),
            None => groups.push((node.clone(), vec![p])),
        }
    }
    client.served.on_many(groups.len());
    if groups.len() == 1 {
        client
            .served
            .on(routing.ring.locate(&req.args[positions[0]]));
        let track = moving_writes(
            &routing,
            spec,
            positions.iter().map(|&p| req.args[p].clone()),
        );
        let rx = send_tracked(client, &routing, &groups[0].0, req.raw, track).await;
        return Pending::Charged(rx);
    }
    // One fragment per node: the command name, then that node's keys (and values).
    let mut waits = Vec::with_capacity(groups.len());
    for (node, ps) in &groups {
        let mut parts: Vec<&[u8]> = vec![&req.args[0]];
        for &p in ps {
            parts.push(&req.args[p]);
            if merge == Merge::AllOk {
                parts.push(&req.args[p + 1]);
            }
        }
        let mut raw = BytesMut::new();
        encode::command(&mut raw, &parts);
        let track = moving_writes(&routing, spec, ps.iter().map(|&p| req.args[p].clone()));
        waits.push(send_tracked(client, &routing, node, raw.freeze(), track).await);
    }
    let order: Vec<Vec<usize>> = groups.into_iter().map(|(_, ps)| ps).collect();
    let total = positions.len();
    let first_key = positions[0];
    let budget = client.budget.clone();
    Pending::Later(Box::pin(async move {
        let replies = gather(waits, &budget).await;
        merge_fragments(merge, &replies, &order, total, first_key)
    }))
}

/// The nodes that own keys now (during a change, the current ring's: the
/// joining node only holds copies until the cutover).
pub fn all_nodes(routing: &Routing) -> Vec<Arc<Node>> {
    routing.nodes.clone()
}

async fn fan_out(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    req: Request,
    agg: Aggregate,
) -> Pending {
    // SCAN and RANDOMKEY visit nodes one at a time and enter the gate themselves.
    match agg {
        Aggregate::Scan => {
            return super::scan::scan(proxy, client.proto, client.id, &req.args).await
        }
        Aggregate::AnyNonNil => {
            return super::scan::random_key(proxy, client.proto, client.id, req.raw).await
        }
        _ => {}
    }
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    if agg == Aggregate::AllOk && (routing.migration.is_some() || routing.filter_keys) {
        return Pending::error("ERR FLUSHALL/FLUSHDB are refused while a topology change runs; retry when CLUSTER RINGINFO shows state:ok");
    }
    let nodes = all_nodes(&routing);
    client.served.on_many(nodes.len());
    let (proto, id) = (client.proto, client.id);
    let mut waits = Vec::with_capacity(nodes.len());
    for n in &nodes {
        let budget = Some(client.budget.clone());
        waits.push(
            n.upstream(proto, id)
                .send_for(req.raw.clone(), budget)
                .await,
        );
    }
    let filter = routing.filter_keys.then(|| routing.clone());
    let budget = client.budget.clone();
    Pending::Later(Box::pin(async move {
        let mut replies = gather(waits, &budget).await;
        if let (Some(routing), Aggregate::Concat) = (&filter, agg) {
            for (i, r) in replies.iter_mut().enumerate() {
                *r = owned_only(r, routing, i);
            }
        }
        aggregate(agg, &replies)
    }))
}

/// Waits for every fragment's reply (each charged to `budget` on arrival)
/// and releases their charge: the merged reply is charged instead when the
/// session takes it.
async fn gather(waits: Vec<oneshot::Receiver<Bytes>>, budget: &ReplyBudget) -> Vec<Bytes> {
    let mut replies = Vec::with_capacity(waits.len());
    for w in waits {
        replies.push(match w.await {
            Ok(r) => {
                budget.release(r.len());
                r
            }
            Err(_) => lost(),
        });
    }
    replies
}
