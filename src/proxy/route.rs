//! Routing one request: classify it with the command table, then forward it
//! to its key's owner, split it across owners, fan it out to every node, or
//! hand it to the local or admin handlers.
//!
//! Called by [`ClientSession`] for every request, in order. While a migration
//! runs, a key whose owner changed is first made to live at its new owner
//! (see `migration::ensure_moved`) before the request is forwarded there.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use super::migration;
use super::session::{ClientSession, Pending};
use super::topology::{Node, Routing};
use crate::resp::command::{arity_error, unknown_command_error, Aggregate, KeySpec, Merge};
use crate::resp::reply::{elements, integer, is_error};
use crate::resp::{encode, lookup, parse_i64, CommandSpec, Kind, Request};

/// Node index bits in a proxy SCAN cursor: up to 1024 nodes.
const SCAN_NODE_BITS: u32 = 10;

pub async fn dispatch(s: &mut ClientSession, req: Request) {
    let Some(spec) = lookup(req.name()) else {
        return s.error(&unknown_command_error(&req.args)).await;
    };
    if !spec.is_arity_ok(req.args.len()) {
        return s.error(&arity_error(spec)).await;
    }
    match spec.kind {
        Kind::Keyed => keyed(s, spec, req).await,
        Kind::Split(merge) => split(s, spec, req, merge).await,
        Kind::FanOut(agg) => fan_out(s, req, agg).await,
        Kind::Local => super::local::handle(s, spec, req).await,
        Kind::Admin => super::admin::handle(s, req).await,
        Kind::Refused(why) => {
            s.error(&format!(
                "ERR '{}' is not supported by shardis: {why}",
                spec.name
            ))
            .await
        }
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

/// Sends a request, tracking it if it writes moving keys.
async fn send_tracked(
    s: &ClientSession,
    routing: &Routing,
    node: &Node,
    raw: Bytes,
    track: Option<Vec<Bytes>>,
) -> oneshot::Receiver<Bytes> {
    let rx = node.upstream(s.proto, s.id).send(raw).await;
    match (track, &routing.migration) {
        (Some(keys), Some(m)) => migration::track_write(&m.dirty, keys, rx),
        _ => rx,
    }
}

/// Routes by the keys `spec` declares (all on one node); also used by
/// `info::memory` for MEMORY USAGE.
pub(super) async fn keyed(s: &mut ClientSession, spec: &'static CommandSpec, req: Request) {
    if let KeySpec::Range {
        first: 1, last: 1, ..
    } = spec.keys
    {
        return single_key(s, spec, req).await;
    }
    let positions = match spec.key_positions(&req.args) {
        Ok(p) => p,
        Err(e) => return s.error(&e).await,
    };
    if positions.is_empty() {
        return s
            .error(&format!(
                "ERR '{}' without keys cannot be routed: declare at least one key so shardis can pick a node",
                spec.name
            ))
            .await;
    }
    let routing = loop {
        let routing = s.proxy.routing.load_full();
        if !wait_cutover(&routing, positions.iter().map(|&p| &req.args[p])).await {
            break routing;
        }
    };
    let _gate = routing.enter();
    let node = routing.owner(&req.args[positions[0]]).clone();
    for &p in &positions[1..] {
        if !Arc::ptr_eq(routing.owner(&req.args[p]), &node) {
            return s
                .error("CROSSSLOT Keys in request don't hash to the same node (keep them together with a {hash tag})")
                .await;
        }
    }
    let track = moving_writes(
        &routing,
        spec,
        positions.iter().map(|&p| req.args[p].clone()),
    );
    let rx = send_tracked(s, &routing, &node, req.raw, track).await;
    s.push(Pending::One(rx)).await;
}

/// The hot path: a command with one key at position 1 (GET, SET, INCR, …).
async fn single_key(s: &mut ClientSession, spec: &'static CommandSpec, req: Request) {
    let Request { raw, args } = req;
    let key = &args[1];
    let routing = loop {
        let routing = s.proxy.routing.load_full();
        if !wait_cutover(&routing, std::iter::once(key)).await {
            break routing;
        }
    };
    let _gate = routing.enter();
    let node = routing.owner(key);
    let track = moving_writes(&routing, spec, std::iter::once(key.clone()));
    let rx = send_tracked(s, &routing, node, raw, track).await;
    s.push(Pending::One(rx)).await;
}

async fn split(s: &mut ClientSession, spec: &'static CommandSpec, req: Request, merge: Merge) {
    let positions = match spec.key_positions(&req.args) {
        Ok(p) => p,
        Err(e) => return s.error(&e).await,
    };
    if merge == Merge::AllOk && req.args.len().is_multiple_of(2) {
        return s.error(&arity_error(spec)).await;
    }
    let routing = loop {
        let routing = s.proxy.routing.load_full();
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
        let rx = send_tracked(s, &routing, &groups[0].0, req.raw, track).await;
        return s.push(Pending::One(rx)).await;
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
        waits.push(send_tracked(s, &routing, node, raw.freeze(), track).await);
    }
    let order: Vec<Vec<usize>> = groups.into_iter().map(|(_, ps)| ps).collect();
    let total = positions.len();
    let first_key = positions[0];
    s.push(Pending::Later(Box::pin(async move {
        let mut replies = Vec::with_capacity(waits.len());
        for w in waits {
            replies.push(w.await.unwrap_or_else(|_| lost()));
        }
        merge_fragments(merge, &replies, &order, total, first_key)
    })))
    .await;
}

/// Merges per-node fragment replies back into one reply in the client's key order.
pub fn merge_fragments(
    merge: Merge,
    replies: &[Bytes],
    order: &[Vec<usize>],
    total: usize,
    first_key: usize,
) -> Bytes {
    if let Some(err) = replies.iter().find(|r| is_error(r)) {
        return err.clone();
    }
    let mut out = BytesMut::new();
    match merge {
        Merge::Values => {
            // MGET's keys are consecutive arguments: slot = position - first.
            let mut slots: Vec<Option<&[u8]>> = vec![None; total];
            for (r, ps) in replies.iter().zip(order) {
                let Some(els) = elements(r) else {
                    return bad_fragment(r);
                };
                if els.len() != ps.len() {
                    return bad_fragment(r);
                }
                for (e, &p) in els.into_iter().zip(ps) {
                    slots[p - first_key] = Some(&r[e]);
                }
            }
            encode::array_len(&mut out, total);
            for s in slots {
                out.extend_from_slice(s.unwrap_or(b"$-1\r\n"));
            }
        }
        Merge::AllOk => encode::simple(&mut out, "OK"),
        Merge::Sum => {
            let mut sum = 0i64;
            for r in replies {
                match integer(r) {
                    Some(n) => sum += n,
                    None => return bad_fragment(r),
                }
            }
            encode::integer(&mut out, sum);
        }
    }
    out.freeze()
}

fn bad_fragment(r: &Bytes) -> Bytes {
    let mut out = BytesMut::new();
    encode::error(
        &mut out,
        &format!(
            "ERR unexpected fragment reply from a node: {}",
            String::from_utf8_lossy(&r[..r.len().min(64)])
        ),
    );
    out.freeze()
}

fn lost() -> Bytes {
    Bytes::from_static(b"-ERR upstream connection lost before the reply arrived\r\n")
}

/// The nodes that own keys now (during a change, the current ring's: the
/// joining node only holds copies until the cutover).
pub fn all_nodes(routing: &Routing) -> Vec<Arc<Node>> {
    routing.nodes.clone()
}

async fn fan_out(s: &mut ClientSession, req: Request, agg: Aggregate) {
    let routing = s.proxy.routing.load_full();
    let _gate = routing.enter();
    if agg == Aggregate::AllOk && (routing.migration.is_some() || routing.filter_keys) {
        return s
            .error("ERR FLUSHALL/FLUSHDB are refused while a topology change runs; retry when CLUSTER INFO shows state:ok")
            .await;
    }
    let nodes = all_nodes(&routing);
    let (proto, id) = (s.proto, s.id);
    match agg {
        Aggregate::Scan => return scan(s, req, routing.clone()).await,
        Aggregate::AnyNonNil => {
            let start = (id as usize) % nodes.len();
            let raw = req.raw.clone();
            return s
                .push(Pending::Later(Box::pin(async move {
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
                })))
                .await;
        }
        _ => {}
    }
    let mut waits = Vec::with_capacity(nodes.len());
    for n in &nodes {
        waits.push(n.upstream(proto, id).send(req.raw.clone()).await);
    }
    let filter = routing.filter_keys.then(|| routing.clone());
    s.push(Pending::Later(Box::pin(async move {
        let mut replies = Vec::with_capacity(waits.len());
        for (i, w) in waits.into_iter().enumerate() {
            let r = w.await.unwrap_or_else(|_| lost());
            replies.push(match (&filter, agg) {
                (Some(routing), Aggregate::Concat) => owned_only(&r, routing, i),
                _ => r,
            });
        }
        aggregate(agg, &replies)
    })))
    .await;
}

/// Combines the replies of a fanned-out command.
pub fn aggregate(agg: Aggregate, replies: &[Bytes]) -> Bytes {
    if let Some(err) = replies.iter().find(|r| is_error(r)) {
        return err.clone();
    }
    let mut out = BytesMut::new();
    match agg {
        Aggregate::Sum => {
            let mut sum = 0;
            for r in replies {
                match integer(r) {
                    Some(n) => sum += n,
                    None => return bad_fragment(r),
                }
            }
            encode::integer(&mut out, sum);
        }
        Aggregate::AllOk => encode::simple(&mut out, "OK"),
        Aggregate::Concat => {
            let mut parts = Vec::new();
            for r in replies {
                let Some(els) = elements(r) else {
                    return bad_fragment(r);
                };
                parts.extend(els.into_iter().map(|e| &r[e]));
            }
            encode::array_len(&mut out, parts.len());
            for p in parts {
                out.extend_from_slice(p);
            }
        }
        Aggregate::First | Aggregate::Scan | Aggregate::AnyNonNil => return replies[0].clone(),
    }
    out.freeze()
}

/// Keeps, in an array of keys returned by node `idx`, only the keys it owns.
fn owned_only(r: &Bytes, routing: &Routing, idx: usize) -> Bytes {
    let Some(els) = elements(r) else {
        return r.clone();
    };
    let kept: Vec<&[u8]> = els
        .into_iter()
        .map(|e| &r[e])
        .filter(|el| match bulk_payload(el) {
            Some(k) => routing.ring.locate(k) == idx,
            None => true,
        })
        .collect();
    let mut out = BytesMut::new();
    encode::array_len(&mut out, kept.len());
    for k in kept {
        out.extend_from_slice(k);
    }
    out.freeze()
}

/// The payload of one `$n\r\n…\r\n` element.
fn bulk_payload(el: &[u8]) -> Option<&[u8]> {
    let nl = el.iter().position(|&b| b == b'\n')?;
    let n = parse_i64(el.get(1..nl.checked_sub(1)?)?)?;
    el.get(nl + 1..nl + 1 + usize::try_from(n).ok()?)
}

async fn scan(s: &mut ClientSession, req: Request, routing: Arc<Routing>) {
    let nodes = all_nodes(&routing);
    let cursor = std::str::from_utf8(&req.args[1])
        .ok()
        .and_then(|c| c.parse::<u64>().ok());
    let Some(cursor) = cursor else {
        return s.error("ERR invalid cursor").await;
    };
    let idx = (cursor & ((1 << SCAN_NODE_BITS) - 1)) as usize;
    let node_cursor = cursor >> SCAN_NODE_BITS;
    if idx >= nodes.len() {
        return s.error("ERR invalid cursor").await;
    }
    let mut parts: Vec<&[u8]> = vec![b"SCAN"];
    let nc = node_cursor.to_string();
    parts.push(nc.as_bytes());
    parts.extend(req.args[2..].iter().map(|a| a.as_ref()));
    let mut raw = BytesMut::new();
    encode::command(&mut raw, &parts);
    let rx = nodes[idx].upstream(s.proto, s.id).send(raw.freeze()).await;
    let n = nodes.len();
    s.push(Pending::Later(Box::pin(async move {
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
    })))
    .await;
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
    fn mget_fragments_merge_in_key_order() {
        // Keys at positions 1..=4; node A had 1 and 3, node B had 2 and 4.
        let replies = [
            b("*2\r\n$1\r\na\r\n$-1\r\n"),
            b("*2\r\n$1\r\nb\r\n$1\r\nd\r\n"),
        ];
        let order = vec![vec![1, 3], vec![2, 4]];
        let merged = merge_fragments(Merge::Values, &replies, &order, 4, 1);
        assert_eq!(
            &merged[..],
            b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$-1\r\n$1\r\nd\r\n"
        );
    }

    #[test]
    fn sums_and_errors_merge() {
        let order = vec![vec![1], vec![2]];
        assert_eq!(
            &merge_fragments(Merge::Sum, &[b(":1\r\n"), b(":2\r\n")], &order, 2, 1)[..],
            b":3\r\n"
        );
        assert_eq!(
            &merge_fragments(Merge::AllOk, &[b("+OK\r\n"), b("+OK\r\n")], &order, 2, 1)[..],
            b"+OK\r\n"
        );
        assert_eq!(
            &merge_fragments(Merge::Sum, &[b(":1\r\n"), b("-ERR x\r\n")], &order, 2, 1)[..],
            b"-ERR x\r\n"
        );
        assert!(
            merge_fragments(Merge::Sum, &[b(":1\r\n"), b("+OK\r\n")], &order, 2, 1)
                .starts_with(b"-ERR")
        );
    }

    #[test]
    fn aggregates_combine_node_replies() {
        assert_eq!(
            &aggregate(Aggregate::Sum, &[b(":5\r\n"), b(":7\r\n")])[..],
            b":12\r\n"
        );
        assert_eq!(
            &aggregate(
                Aggregate::Concat,
                &[b("*1\r\n$1\r\na\r\n"), b("*0\r\n"), b("*1\r\n$1\r\nb\r\n")]
            )[..],
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        assert_eq!(
            &aggregate(Aggregate::AllOk, &[b("+OK\r\n"), b("-ERR no\r\n")])[..],
            b"-ERR no\r\n"
        );
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
