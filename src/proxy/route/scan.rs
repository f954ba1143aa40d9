//! Walking the keyspace through the proxy: SCAN, whose cursor walks node
//! after node (packed by [`crate::proxy::route::cursor`]), and RANDOMKEY, which asks nodes
//! in a random order.
//!
//! Called by `route::fan_out`. Sends one request per step to one node over
//! the shared upstreams; never holds a routing snapshot past the reply.
//!
//! # Why a walk returns every key present for all of it, across a change
//!
//! Redis's promise: a key present from the first SCAN call to the last is
//! returned at least once (duplicates allowed). The proxy's rule: a cursor
//! carries the tag of the ring it was issued under; a cursor whose tag is not
//! the current ring's starts over at the first node of the current ring, and
//! a reply that arrives after the ring changed never ends the walk (its
//! cursor carries the old tag, so the next call starts over).
//!
//! 1. *One ring.* Snapshots with the same ring (epoch) have the same nodes in
//!    the same order — the plain one, a change's copy and cutover-pause
//!    phases (still routed by the current ring), an aborted change, a sweep.
//!    Under ring R a key's home is `R.locate(key)`, and it stays there while
//!    R routes: the copy phase only adds copies at next owners (deleting
//!    them again on resync or abort, and those are keys the target does not
//!    own under R); old copies are swept only after R was replaced. So the
//!    walk visits each node of R once, in order, and each node's own walk
//!    returns every key present on it throughout (the built-in node and
//!    redis-server both promise that). Copies a node holds but does not own
//!    (`filter_keys`) are dropped by ring R itself, never the home's key.
//! 2. *A change.* Ring R is replaced by R' only at a cutover, after every
//!    moving key was copied to its R' owner; from then on the key lives at
//!    `R'.locate(key)`. The first call after the cutover carries R's tag, so
//!    the walk starts over and visits every node of R' — rule 1 for R' from
//!    there on. A step sent under R and answered after the cutover may have
//!    raced the sweep of R's old copies; its cursor still carries R's tag,
//!    so the walk starts over instead of trusting it to have been complete.
//!    Each change restarts the walk at most once, so a walk ends once the
//!    changes do.
//!
//! The tag is the epoch mod 255 (plus one): a cursor held across 255
//! changes could be mistaken for a current one; nothing else can.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::proxy::conn::error::lost;
use crate::proxy::conn::pending::Pending;
use crate::proxy::route::cursor::{self, CursorError};
use crate::proxy::route::merge::owned_only;
use crate::proxy::upstream::topology::all_nodes;
use crate::proxy::upstream::topology::{self, Routing};
use crate::proxy::Proxy;
use crate::resp::encode;
use crate::resp::reply::{elements, is_error};

/// Tries per node when, during a change, RANDOMKEY lands on a copy the node
/// does not own.
const RANDOMKEY_TRIES_PER_NODE: usize = 3;

/// SCAN cursor [MATCH p] [COUNT n] [TYPE t]: one step on one node.
pub(crate) async fn scan(proxy: &Arc<Proxy>, proto: u8, client: u64, args: &[Bytes]) -> Pending {
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    let nodes = all_nodes(&routing);
    let tag = cursor::tag_of(routing.ring.epoch());
    let (idx, node_cursor) =
        match cursor::decode(&args[1]).and_then(|c| cursor::resume(c, tag, nodes.len())) {
            Ok(s) => s,
            Err(e) => return ready_error(&e),
        };
    let nc = node_cursor.to_string();
    let mut parts: Vec<&[u8]> = vec![b"SCAN", nc.as_bytes()];
    parts.extend(args[2..].iter().map(|a| a.as_ref()));
    let mut raw = BytesMut::new();
    encode::command(&mut raw, &parts);
    let rx = nodes[idx].upstream(proto, client).send(raw.freeze()).await;
    let (proxy, routing) = (proxy.clone(), routing.clone());
    Pending::Later(Box::pin(async move {
        let r = rx.await.unwrap_or_else(|_| lost());
        let ring_changed = proxy.routing.load().ring.epoch() != routing.ring.epoch();
        scan_reply(&r, &routing, idx, ring_changed)
    }))
}

/// Rewrites node `idx`'s SCAN reply for the client: the proxy's cursor, and
/// only the keys the node owns while copies are around.
fn scan_reply(r: &Bytes, routing: &Routing, idx: usize, ring_changed: bool) -> Bytes {
    if is_error(r) {
        return r.clone();
    }
    let node = routing.node(idx);
    let bad = || {
        error_reply(&format!(
            "ERR node {} answered SCAN with something that is not a SCAN reply: {}",
            node.label(),
            String::from_utf8_lossy(&r[..r.len().min(64)])
        ))
    };
    let Some(els) = elements(r).filter(|e| e.len() == 2) else {
        return bad();
    };
    let Some(node_next) = bulk_u64(&r[els[0].clone()]) else {
        return bad();
    };
    let keys = Bytes::copy_from_slice(&r[els[1].clone()]);
    let keys = if routing.filter_keys {
        owned_only(&keys, routing, idx)
    } else {
        keys
    };
    let tag = cursor::tag_of(routing.ring.epoch());
    let n = routing.shards.len();
    let next = match cursor::next(tag, idx, n, node_next, ring_changed, node.label()) {
        Ok(c) => c,
        Err(e) => return error_reply(&e.message()),
    };
    let mut out = BytesMut::with_capacity(keys.len() + 32);
    encode::array_len(&mut out, 2);
    encode::bulk(&mut out, next.to_string().as_bytes());
    out.extend_from_slice(&keys);
    out.freeze()
}

/// The unsigned number in a `$n\r\n123\r\n` element.
fn bulk_u64(el: &[u8]) -> Option<u64> {
    let nl = el.iter().position(|&b| b == b'\n')?;
    let digits = el.get(nl + 1..)?.strip_suffix(b"\r\n")?;
    if el.first() != Some(&b'$') || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn error_reply(msg: &str) -> Bytes {
    let mut out = BytesMut::new();
    encode::error(&mut out, msg);
    out.freeze()
}

fn ready_error(e: &CursorError) -> Pending {
    Pending::Ready(error_reply(&e.message()))
}

/// RANDOMKEY: asks nodes one at a time in a random order until one has a
/// key. The order is a weighted shuffle by each node's share of the ring, so
/// a node is asked first about as often as it holds keys when keys spread by
/// hash. Biased where they do not: hash-tagged or unevenly written keys make
/// a node hold more or fewer keys than its share, and its keys come up
/// correspondingly less or more often than with Redis's uniform choice.
pub(crate) async fn random_key(proxy: &Arc<Proxy>, proto: u8, client: u64, raw: Bytes) -> Pending {
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    let nodes = all_nodes(&routing);
    let shares: Vec<f64> = (0..nodes.len()).map(|i| routing.ring.share_of(i)).collect();
    let order = weighted_order(&shares, random_unit);
    let routing = routing.clone();
    Pending::Later(Box::pin(async move {
        let mut first_error = None;
        let mut nil = None;
        for idx in order {
            for _ in 0..RANDOMKEY_TRIES_PER_NODE {
                let r = nodes[idx].upstream(proto, client).call(raw.clone()).await;
                if is_error(&r) {
                    first_error.get_or_insert(r);
                    break;
                }
                if r.starts_with(b"$-1") || r.starts_with(b"_") {
                    nil = Some(r);
                    break;
                }
                // During a change a node may hold copies it does not own: a
                // key that may already be gone. Ask again.
                let owned = !routing.filter_keys
                    || bulk_payload(&r).is_some_and(|k| routing.ring.locate(k) == idx);
                if owned {
                    return r;
                }
            }
        }
        first_error
            .or(nil)
            .unwrap_or_else(|| Bytes::from_static(b"$-1\r\n"))
    }))
}

/// The payload of a `$n\r\n…\r\n` reply.
fn bulk_payload(r: &[u8]) -> Option<&[u8]> {
    let nl = r.iter().position(|&b| b == b'\n')?;
    r.get(nl + 1..)?.strip_suffix(b"\r\n")
}

/// A uniform random number in (0, 1], fresh per call (std's per-thread
/// random keys, advanced on every `RandomState::new`).
fn random_unit() -> f64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    ((h.finish() >> 11) + 1) as f64 / (1u64 << 53) as f64
}

/// Indices of `weights` in a random order where each comes earlier the
/// heavier it is (Efraimidis–Spirakis: sort by `u^(1/w)`, largest first).
fn weighted_order(weights: &[f64], mut unit: impl FnMut() -> f64) -> Vec<usize> {
    let mut keyed: Vec<(f64, usize)> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| (unit().ln() / w.max(f64::MIN_POSITIVE), i))
        .collect();
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
    keyed.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_cursors_are_read_only_from_bulk_numbers() {
        assert_eq!(bulk_u64(b"$2\r\n17\r\n"), Some(17));
        assert_eq!(bulk_u64(b"$20\r\n18446744073709551615\r\n"), Some(u64::MAX));
        assert_eq!(bulk_u64(b"$2\r\n-1\r\n"), None);
        assert_eq!(bulk_u64(b":17\r\n"), None);
        assert_eq!(bulk_u64(b"$2\r\n17"), None);
    }

    #[test]
    fn weighted_order_is_a_permutation_favouring_heavy_nodes() {
        let weights = [0.1, 0.6, 0.3];
        let mut first = [0usize; 3];
        for _ in 0..3000 {
            let o = weighted_order(&weights, random_unit);
            let mut sorted = o.clone();
            sorted.sort();
            assert_eq!(sorted, vec![0, 1, 2]);
            first[o[0]] += 1;
        }
        // Expected 300 / 1800 / 900; wide margins, the draw is random.
        assert!((150..450).contains(&first[0]), "{first:?}");
        assert!((1500..2100).contains(&first[1]), "{first:?}");
        assert!((700..1100).contains(&first[2]), "{first:?}");
    }
}
