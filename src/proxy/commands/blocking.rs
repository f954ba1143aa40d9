//! Blocking commands (BLPOP, BRPOP, BLMOVE, BLMPOP, BRPOPLPUSH, BZPOPMIN,
//! BZPOPMAX, BZMPOP, XREAD/XREADGROUP with BLOCK, WAIT): each blocked
//! client holds its own pinned connection to its keys' node for as long as
//! it blocks, so a blocked client never stalls the shared pipelined
//! connections other clients use.
//!
//! The node honours the timeout (0 = forever); the proxy adds none. When the
//! client leaves, its session drops the pending reply, which drops the
//! [`Pinned`] and closes that connection: the node unblocks the client and
//! pops nothing for it. When a topology change moves the keys while the
//! command blocks, the command is aborted with an error (after a short grace
//! for a reply already on its way), since pushes now go to the new owner.
//! `CLIENT ID` goes just before the command on its connection, so CLIENT
//! UNBLOCK through the proxy can name that connection to the node.
//! A pop whose keys live on several nodes is waited for by the proxy
//! itself (`blocking_multi`); BLMOVE and BRPOPLPUSH between two nodes, and
//! XREAD over streams on several, are refused with -CROSSSLOT.
//! Called by `dispatch` (and for XREAD/XREADGROUP with BLOCK).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::catalogue::Id;
use crate::proxy::commands::blocked::{AtNode, BlockedGuard};
use crate::proxy::commands::clients::entry::{BlockedOn, ClientEntry};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::policy::CommandSpec;
use crate::proxy::upstream::pinned::Pinned;
use crate::proxy::upstream::topology::{self, Node};
use crate::proxy::Proxy;
use crate::resp::reply::integer;
use crate::resp::Request;

/// How often a blocked command checks that its keys still live where it blocks.
const OWNER_CHECK_MS: u64 = 100;
/// After the keys moved: how long a reply already sent by the old owner may
/// take to arrive before the command is aborted.
const MOVED_GRACE_MS: u64 = 200;

/// Routes a blocking command to a pinned connection of its keys' node.
pub(crate) async fn handle(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: &'static CommandSpec,
    req: Request,
) -> Pending {
    if spec.id == Id::Wait {
        return wait(proxy, client, req).await;
    }
    let numkeys = matches!(spec.keys, crate::catalogue::KeySpec::NumKeys { .. });
    let keys: Vec<Bytes> = match spec.key_positions(&req.args) {
        Ok(ps) => ps.iter().map(|&p| req.args[p].clone()).collect(),
        // A key count Redis refuses (BLMPOP 0 -1 …, 0 0 …): the node
        // answers with Redis's error, its timeout checked first, and cannot
        // block on it, so the shared upstream may carry it.
        Err(_) if numkeys => return refused(proxy, client, req).await,
        Err(e) => return Pending::error(&e.to_string()),
    };
    if keys.is_empty() {
        if numkeys {
            return refused(proxy, client, req).await;
        }
        return Pending::error(&crate::catalogue::arity_error(spec));
    }
    if crate::proxy::commands::blocking_multi::is_pop(spec.id)
        && crate::proxy::commands::blocking_multi::is_cross(proxy, &keys)
    {
        return crate::proxy::commands::blocking_multi::handle(proxy, client, spec.id, req, keys)
            .await;
    }
    let timed = has_timeout(spec.id, &req.args);
    blocked(proxy, client, keys, req.raw, spec.is_write(), timed).await
}

/// Whether a blocking command waits with a timeout (not 0, "block
/// forever"): its timeout argument, where each command has it.
fn has_timeout(id: Id, args: &[Bytes]) -> bool {
    let at = match id {
        Id::Blmpop | Id::Bzmpop => args.get(1),
        Id::Wait => args.get(2),
        Id::Xread | Id::Xreadgroup => args
            .iter()
            .position(|a| a.eq_ignore_ascii_case(b"block"))
            .and_then(|i| args.get(i + 1)),
        _ => args.last(),
    };
    at.and_then(|t| std::str::from_utf8(t).ok()?.parse::<f64>().ok())
        .is_some_and(|t| t > 0.0)
}

/// A blocking command whose key count Redis refuses, sent to the node that
/// owns its name for Redis's error.
async fn refused(proxy: &Arc<Proxy>, client: &ClientState, req: Request) -> Pending {
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    let rx = routing
        .owner(&req.args[0])
        .upstream(client.proto, client.id)
        .send(req.raw)
        .await;
    Pending::One(rx)
}

/// Sends `raw` (blocking on `keys`) on a new pinned connection and waits.
pub(crate) async fn blocked(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    keys: Vec<Bytes>,
    raw: Bytes,
    write: bool,
    timed: bool,
) -> Pending {
    let routing = match client.enter_for(&proxy.routing, || keys.iter()).await {
        Ok(g) => g,
        Err(p) => return p,
    };
    let node = routing.owner(&keys[0]).clone();
    if keys.iter().any(|k| !Arc::ptr_eq(routing.owner(k), &node)) {
        return Pending::error(crate::proxy::conn::error::CROSSSLOT);
    }
    client.served.on(routing.ring.locate(&keys[0]));
    let pin = match node.pin(client.proto) {
        Ok(p) => p,
        Err(e) => return Pending::error(&e.to_string()),
    };
    invalidate(proxy, &keys, write);
    // The node's id for this connection first, for CLIENT UNBLOCK.
    let id_rx = pin.send(Bytes::from_static(CLIENT_ID)).await;
    let rx = pin.send_for(raw, &client.budget).await;
    drop(routing);
    let guard = BlockedGuard::new(proxy, client, timed);
    let on = OnNode::register(&client.entry, &node, id_rx, guard.at_node.clone());
    let proxy = proxy.clone();
    Pending::Later(Box::pin(async move {
        let _guard = guard;
        let _on = on;
        let reply = wait_reply(&proxy, &pin, &keys, rx).await;
        if write {
            mark_moving(&proxy, &keys);
        }
        // A pop may write long after it was sent: forget again once it did.
        invalidate(&proxy, &keys, write);
        reply
    }))
}

const CLIENT_ID: &[u8] = b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n";

/// Tells apart a client's successive blocking commands.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Publishes where a client's blocking command waits (its entry's
/// `blocked_on`) for as long as it waits.
struct OnNode {
    entry: Arc<ClientEntry>,
    token: u64,
}

impl OnNode {
    /// `id_rx`: the node's answer to the `CLIENT ID` sent just before the
    /// command on its connection, which also tells that the node has the
    /// command (it reads them together) and so arms `at_node`.
    fn register(
        entry: &Arc<ClientEntry>,
        node: &Arc<Node>,
        id_rx: tokio::sync::oneshot::Receiver<Bytes>,
        at_node: Arc<AtNode>,
    ) -> OnNode {
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let (tx, node_id) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            if let Ok(r) = id_rx.await {
                at_node.arm();
                let _ = tx.send(integer(&r).and_then(|n| u64::try_from(n).ok()));
            }
        });
        *lock(&entry.blocked_on) = Some(BlockedOn {
            token,
            node: node.clone(),
            node_id,
        });
        OnNode {
            entry: entry.clone(),
            token,
        }
    }
}

impl Drop for OnNode {
    fn drop(&mut self) {
        let mut on = lock(&self.entry.blocked_on);
        if on.as_ref().is_some_and(|b| b.token == self.token) {
            *on = None;
        }
    }
}

/// A poisoned lock still holds a consistent `Option`.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The blocked command's reply, or an error once its keys moved away.
async fn wait_reply(
    proxy: &Proxy,
    pin: &Pinned,
    keys: &[Bytes],
    mut rx: tokio::sync::oneshot::Receiver<Bytes>,
) -> Bytes {
    let mut tick = tokio::time::interval(Duration::from_millis(OWNER_CHECK_MS));
    loop {
        tokio::select! {
            r = &mut rx => return r.unwrap_or_else(|_| crate::proxy::conn::error::lost()),
            _ = tick.tick() => {
                let routing = proxy.routing.load();
                if keys.iter().all(|k| pin.is_to(routing.owner(k))) {
                    continue;
                }
                let grace = Duration::from_millis(MOVED_GRACE_MS);
                if let Ok(Ok(r)) = tokio::time::timeout(grace, &mut rx).await {
                    return r;
                }
                return Bytes::from_static(b"-ERR the blocking command was aborted: a topology change moved its keys to another node while it blocked; retry it\r\n");
            }
        }
    }
}

/// A pop or move on keys being migrated changed them at their old owner:
/// mark them for the migration's re-sync, as `route` does for writes.
/// Forgets cached GETs of the keys a blocking write changes.
fn invalidate(proxy: &Proxy, keys: &[Bytes], write: bool) {
    if let (Some(cache), true) = (&proxy.ops.hot_cache, write) {
        for k in keys {
            cache.invalidate(k);
        }
    }
}

fn mark_moving(proxy: &Proxy, keys: &[Bytes]) {
    let routing = proxy.routing.load();
    if let Some(m) = &routing.migration {
        for k in keys.iter().filter(|k| routing.is_moving(k)) {
            m.dirty.mark(k.clone());
        }
    }
}

/// WAIT numreplicas timeout: asked of every node on a pinned connection of
/// its own (WAIT blocks its connection); the reply is the smallest count,
/// since the client's writes went to any of them.
async fn wait(proxy: &Arc<Proxy>, client: &mut ClientState, req: Request) -> Pending {
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    let mut pins = Vec::with_capacity(routing.shards.len());
    for node in routing.primaries() {
        match node.pin(client.proto) {
            Ok(p) => pins.push(p),
            Err(e) => return Pending::error(&e.to_string()),
        }
    }
    let mut waits = Vec::with_capacity(pins.len());
    for p in &pins {
        waits.push(p.send(req.raw.clone()).await);
    }
    client.served.on_many(pins.len());
    drop(routing);
    let guard = BlockedGuard::new(proxy, client, has_timeout(Id::Wait, &req.args));
    guard.at_node.arm();
    Pending::Later(Box::pin(async move {
        let _guard = guard;
        let _pins = pins;
        let mut least: Option<(i64, Bytes)> = None;
        for w in waits {
            let r = w
                .await
                .unwrap_or_else(|_| crate::proxy::conn::error::lost());
            match integer(&r) {
                Some(n) if least.as_ref().is_none_or(|(m, _)| n < *m) => least = Some((n, r)),
                Some(_) => {}
                None => return r,
            }
        }
        least
            .map(|(_, r)| r)
            .unwrap_or_else(|| Bytes::from_static(b":0\r\n"))
    }))
}
