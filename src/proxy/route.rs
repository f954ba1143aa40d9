//! Routing one request: classify it with the command table, then forward it
//! to its key's owner, split it across owners, fan it out to every node, or
//! hand it to the local or admin handlers.
//!
//! Called by the client session for every request, in order. While a migration
//! runs, a key whose owner changed is first made to live at its new owner
//! (see `migration::ensure_moved`) before the request is forwarded there.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use super::budget::ReplyBudget;
use super::merge::{aggregate, bad_fragment, lost, merge_fragments, owned_only};
use super::migration;
use super::session::{ClientState, Pending};
use super::topology::{Node, Routing};
use super::Proxy;
use crate::resp::command::{arity_error, unknown_command_error, Aggregate, KeySpec, Merge};
use crate::resp::reply::{elements, is_error};
use crate::resp::{encode, lookup, parse_i64, CommandSpec, Kind, Request};

/// Node index bits in a proxy SCAN cursor: up to 1024 nodes.
const SCAN_NODE_BITS: u32 = 10;

/// Routes one request and returns the reply slot the client is owed for it.
pub async fn dispatch(proxy: &Arc<Proxy>, client: &mut ClientState, req: Request) -> Pending {
    let Some(spec) = lookup(req.name()) else {
        return Pending::error(&unknown_command_error(&req.args));
    };
    if !spec.is_arity_ok(req.args.len()) {
        return Pending::error(&arity_error(spec));
    }
    match spec.kind {
        Kind::Keyed => keyed(proxy, client, spec, req).await,
        Kind::Split(merge) => split(proxy, client, spec, req, merge).await,
        Kind::FanOut(agg) => fan_out(proxy, client, req, agg).await,
        Kind::Local => super::local::handle(proxy, client, spec, req).await,
        Kind::Admin => super::admin::handle(proxy, client, req).await,
        Kind::Refused(why) => Pending::error(&format!(
            "ERR '{}' is not supported by shardis: {why}",
            spec.name
        )),
    }
}

/// During a change's cutover, requests on moving keys wait for it to end;
/// true when this request had to wait (the caller then routes it afresh).
async fn wait_cutover(routing: &Routing, keys: impl Iterator<Item = &Bytes>) -> bool {
    let Some(m) = &routing.migration else {
        return false;
    };
    if !m.paused {
        return false;
    }
    let mut keys = keys;
    if !keys.any(|k| routing.is_moving(k)) {
        return false;
    }
    let mut rx = m.resume.subscribe();
    let _ = rx.wait_for(|done| *done).await;
    true
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

async fn keyed(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    spec: &'static CommandSpec,
    req: Request,
) -> Pending {
    if let KeySpec::Range {
        first: 1, last: 1, ..
    } = spec.keys
    {
        return single_key(proxy, client, spec, req).await;
    }
    let positions = match spec.key_positions(&req.args) {
        Ok(p) => p,
        Err(e) => return Pending::error(&e),
    };
    if positions.is_empty() {
        return Pending::error(&format!(
            "ERR '{}' without keys cannot be routed: declare at least one key so shardis can pick a node",
            spec.name
        ));
    }
    let routing = loop {
        let routing = proxy.routing.load_full();
        if !wait_cutover(&routing, positions.iter().map(|&p| &req.args[p])).await {
            break routing;
        }
    };
    let _gate = routing.enter();
    let node = routing.owner(&req.args[positions[0]]).clone();
    for &p in &positions[1..] {
        if !Arc::ptr_eq(routing.owner(&req.args[p]), &node) {
            return Pending::error("CROSSSLOT Keys in request don't hash to the same node (keep them together with a {hash tag})");
        }
    }
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
    let routing = loop {
        let routing = proxy.routing.load_full();
        if !wait_cutover(&routing, std::iter::once(key)).await {
            break routing;
        }
    };
    let _gate = routing.enter();
    let node = routing.owner(key);
    let track = moving_writes(&routing, spec, std::iter::once(key.clone()));
    let rx = send_tracked(client, &routing, node, raw, track).await;
    Pending::Charged(rx)
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
    let routing = loop {
        let routing = proxy.routing.load_full();
        if !wait_cutover(&routing, positions.iter().map(|&p| &req.args[p])).await {
            break routing;
        }
    };
    let _gate = routing.enter();
    // Group keys by owner node (not by ring point), keeping each key's position.
    let mut groups: Vec<(Arc<Node>, Vec<usize>)> = Vec::new();
    for &p in &positions {
        let node = routing.owner(&req.args[p]);
        match groups.iter_mut().find(|(n, _)| Arc::ptr_eq(n, node)) {
            Some((_, ps)) => ps.push(p),
            None => groups.push((node.clone(), vec![p])),
        }
    }
    if groups.len() == 1 {
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
    let routing = proxy.routing.load_full();
    let _gate = routing.enter();
    if agg == Aggregate::AllOk && (routing.migration.is_some() || routing.filter_keys) {
        return Pending::error("ERR FLUSHALL/FLUSHDB are refused while a topology change runs; retry when CLUSTER INFO shows state:ok");
    }
    let nodes = all_nodes(&routing);
    let (proto, id) = (client.proto, client.id);
    match agg {
        Aggregate::Scan => return scan(client, req, routing.clone()).await,
        Aggregate::AnyNonNil => {
            let start = (id as usize) % nodes.len();
            let raw = req.raw.clone();
            return Pending::Later(Box::pin(async move {
                let mut last = Bytes::new();
                for i in 0..nodes.len() {
                    let node = &nodes[(start + i) % nodes.len()];
                    let r = node.upstream(proto, id).call(raw.clone()).await;
                    if is_error(&r) || !(r.starts_with(b"$-1") || r.starts_with(b"_")) {
                        return r;
                    }
                    last = r;
                }
                last
            }));
        }
        _ => {}
    }
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

async fn scan(client: &ClientState, req: Request, routing: Arc<Routing>) -> Pending {
    let nodes = all_nodes(&routing);
    let cursor = std::str::from_utf8(&req.args[1])
        .ok()
        .and_then(|c| c.parse::<u64>().ok());
    let Some(cursor) = cursor else {
        return Pending::error("ERR invalid cursor");
    };
    let idx = (cursor & ((1 << SCAN_NODE_BITS) - 1)) as usize;
    let node_cursor = cursor >> SCAN_NODE_BITS;
    if idx >= nodes.len() {
        return Pending::error("ERR invalid cursor");
    }
    let mut parts: Vec<&[u8]> = vec![b"SCAN"];
    let nc = node_cursor.to_string();
    parts.push(nc.as_bytes());
    parts.extend(req.args[2..].iter().map(|a| a.as_ref()));
    let mut raw = BytesMut::new();
    encode::command(&mut raw, &parts);
    let rx = nodes[idx]
        .upstream(client.proto, client.id)
        .send(raw.freeze())
        .await;
    let n = nodes.len();
    Pending::Later(Box::pin(async move {
        let r = rx.await.unwrap_or_else(|_| lost());
        let r = scan_reply(&r, idx, n);
        if !routing.filter_keys {
            return r;
        }
        // Drop copies this node holds but does not own.
        match elements(&r) {
            Some(els) if els.len() == 2 => {
                let keys = Bytes::copy_from_slice(&r[els[1].clone()]);
                let mut out = BytesMut::from(&r[..els[1].start]);
                out.extend_from_slice(&owned_only(&keys, &routing, idx));
                out.freeze()
            }
            _ => r,
        }
    }))
}

/// Rewrites a node's SCAN reply: its cursor becomes a proxy cursor that
/// continues on the same node, or starts the next node when this one is done.
pub fn scan_reply(r: &Bytes, idx: usize, n: usize) -> Bytes {
    if is_error(r) {
        return r.clone();
    }
    let Some(els) = elements(r) else {
        return bad_fragment(r);
    };
    if els.len() != 2 {
        return bad_fragment(r);
    }
    let cur = &r[els[0].clone()];
    // `$len\r\ncursor\r\n`
    let digits = cur
        .split(|&b| b == b'\n')
        .nth(1)
        .map(|d| d.strip_suffix(b"\r").unwrap_or(d));
    let Some(node_cursor) = digits.and_then(parse_i64).map(|c| c as u64) else {
        return bad_fragment(r);
    };
    let next = if node_cursor != 0 {
        if node_cursor >> (64 - SCAN_NODE_BITS) != 0 {
            return bad_fragment(r);
        }
        (node_cursor << SCAN_NODE_BITS) | idx as u64
    } else if idx + 1 < n {
        (idx + 1) as u64
    } else {
        0
    };
    let mut out = BytesMut::new();
    encode::array_len(&mut out, 2);
    encode::bulk(&mut out, next.to_string().as_bytes());
    out.extend_from_slice(&r[els[1].clone()]);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn scan_cursor_walks_node_after_node() {
        let mid = b("*2\r\n$2\r\n17\r\n*1\r\n$1\r\nk\r\n");
        assert_eq!(
            &scan_reply(&mid, 3, 10)[..],
            format!("*2\r\n$5\r\n{}\r\n*1\r\n$1\r\nk\r\n", (17 << 10) | 3).as_bytes()
        );
        let done = b("*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(&scan_reply(&done, 3, 10)[..], b"*2\r\n$1\r\n4\r\n*0\r\n");
        assert_eq!(&scan_reply(&done, 9, 10)[..], b"*2\r\n$1\r\n0\r\n*0\r\n");
    }
}
