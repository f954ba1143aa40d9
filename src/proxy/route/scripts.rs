//! Scripts on every node, as on one Redis: the bodies this proxy has seen
//! cached on a node (`SCRIPT LOAD`, and each `EVAL`'s body, which the node
//! that runs it caches), so that each one is on every node.
//!
//! - The first time the proxy sees an `EVAL` body, it loads it on the other
//!   nodes too (`SCRIPT LOAD` on the client's own connections, ahead of its
//!   next requests), so `EVALSHA` and `SCRIPT EXISTS` find it whichever
//!   node a key lives on.
//! - `SCRIPT EXISTS` is then answered 1 only for a script every node has
//!   (what Redis Cluster clients do), so a client that sees 0 loads it.
//! - A node that joins the ring is given every body kept here, and the
//!   libraries of `FUNCTION DUMP`, before it serves (`admin`).
//! - `SCRIPT FLUSH` forgets them.
//!
//! Bounded in bytes ([`MAX_SCRIPT_BYTES`]); past it the oldest are
//! forgotten: an `EVAL` of one loads it everywhere again, and a node that
//! joins does not get it until then.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};

use crate::proxy::conn::client::ClientState;
use crate::proxy::upstream::topology::{all_nodes, Node, Routing};
use crate::resp::encode;

/// Script bytes kept for nodes that join.
pub(crate) const MAX_SCRIPT_BYTES: usize = 64 << 20;

/// The script bodies loaded on every node, oldest first.
#[derive(Default)]
pub(crate) struct ScriptCache {
    /// A std mutex: taken once per EVAL, SCRIPT LOAD or join, never
    /// across `.await`.
    inner: Mutex<Inner>,
    /// The literal keys of functions loaded through this proxy, by name
    /// (where a keyless `FCALL` runs: `script_keys`).
    pub(crate) functions: crate::proxy::route::script_keys::FunctionKeys,
}

#[derive(Default)]
struct Inner {
    bodies: HashMap<u64, Bytes>,
    order: VecDeque<u64>,
    bytes: usize,
    /// By a body's digest: its SHA-1 (lower-case hex), for a body whose
    /// code names literal keys (`script_keys`).
    sha_of: HashMap<u64, String>,
    /// By SHA-1: the literal keys of that body, so a keyless `EVALSHA`
    /// runs where the same `EVAL` would.
    literal: HashMap<String, Vec<Bytes>>,
}

impl ScriptCache {
    /// Remembers `body`; true when it was not known (so it is not yet on
    /// every node).
    pub(crate) fn add(&self, body: &Bytes) -> bool {
        let id = digest(body);
        let mut inner = lock(&self.inner);
        if inner.bodies.contains_key(&id) {
            return false;
        }
        inner.bytes += body.len();
        inner.bodies.insert(id, body.clone());
        inner.order.push_back(id);
        let keys = crate::proxy::route::script_keys::literal_keys(body);
        if !keys.is_empty() {
            let sha = crate::sha1::hex(body);
            inner.sha_of.insert(id, sha.clone());
            inner.literal.insert(sha, keys);
        }
        while inner.bytes > MAX_SCRIPT_BYTES {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some(b) = inner.bodies.remove(&old) {
                inner.bytes -= b.len();
            }
            if let Some(sha) = inner.sha_of.remove(&old) {
                inner.literal.remove(&sha);
            }
        }
        true
    }

    /// The literal keys of the body whose SHA-1 is `sha` (any case), if
    /// this proxy has seen it (`EVAL` or `SCRIPT LOAD`).
    pub(crate) fn literal_keys_of(&self, sha: &[u8]) -> Vec<Bytes> {
        if sha.len() != 40 {
            return Vec::new();
        }
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        let inner = lock(&self.inner);
        inner.literal.get(&sha).cloned().unwrap_or_default()
    }

    /// SCRIPT FLUSH.
    pub(crate) fn clear(&self) {
        *lock(&self.inner) = Inner::default();
    }

    /// Every body kept, oldest first.
    pub(crate) fn bodies(&self) -> Vec<Bytes> {
        let inner = lock(&self.inner);
        inner
            .order
            .iter()
            .filter_map(|id| inner.bodies.get(id).cloned())
            .collect()
    }
}

/// A 64-bit digest to tell bodies apart: a collision only means a body is
/// not loaded everywhere ahead of time.
fn digest(body: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    h.finish()
}

/// `SCRIPT LOAD body`.
pub(crate) fn load_request(body: &[u8]) -> Bytes {
    let mut raw = BytesMut::new();
    encode::command(&mut raw, &[b"SCRIPT", b"LOAD", body]);
    raw.freeze()
}

/// Before an `EVAL` / `EVAL_RO` goes to `to`: the first time its body is
/// seen, it is loaded on every other node, on this client's connections so
/// its later `EVALSHA`s there come after. Their replies are not awaited.
pub(crate) async fn spread_eval(
    cache: &ScriptCache,
    client: &ClientState,
    routing: &Routing,
    body: &Bytes,
    to: &Arc<Node>,
) {
    if !cache.add(body) {
        return;
    }
    let raw = load_request(body);
    for n in all_nodes(routing) {
        if !Arc::ptr_eq(&n, to) {
            drop(client.upstream_to(&n).send(raw.clone()).await);
        }
    }
}

/// SCRIPT EXISTS over every node's reply: 1 where every node has the
/// script; a node's error is the answer.
pub(crate) fn exists_on_all(replies: &[Bytes]) -> Bytes {
    let mut all: Option<Vec<bool>> = None;
    for r in replies {
        if crate::resp::reply::is_error(r) {
            return r.clone();
        }
        let Some(items) = crate::resp::reply::elements(r) else {
            return r.clone();
        };
        let has: Vec<bool> = items.iter().map(|i| &r[i.clone()] == b":1\r\n").collect();
        all = Some(match all {
            None => has,
            Some(a) => a.iter().zip(has).map(|(x, y)| *x && y).collect(),
        });
    }
    let all = all.unwrap_or_default();
    let mut out = BytesMut::new();
    encode::array_len(&mut out, all.len());
    for x in all {
        encode::integer(&mut out, x as i64);
    }
    out.freeze()
}

/// A poisoned lock still holds a consistent cache.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_new_once_and_the_oldest_go_past_the_bound() {
        let c = ScriptCache::default();
        let a = Bytes::from_static(b"return 1");
        assert!(c.add(&a));
        assert!(!c.add(&a));
        let big = Bytes::from(vec![b'x'; MAX_SCRIPT_BYTES / 2 + 1]);
        let big2 = Bytes::from(vec![b'y'; MAX_SCRIPT_BYTES / 2 + 1]);
        assert!(c.add(&big));
        assert!(c.add(&big2));
        assert_eq!(c.bodies(), vec![big2]);
        assert!(c.add(&a), "forgotten, so loaded everywhere again");
        c.clear();
        assert!(c.bodies().is_empty());
    }

    #[test]
    fn a_bodys_literal_keys_are_found_by_its_sha_until_it_is_forgotten() {
        let c = ScriptCache::default();
        let body = Bytes::from_static(b"return redis.call('GET', 'user:1')");
        let sha = crate::sha1::hex(&body);
        assert!(c.literal_keys_of(sha.as_bytes()).is_empty());
        c.add(&body);
        let want = vec![Bytes::from_static(b"user:1")];
        assert_eq!(c.literal_keys_of(sha.as_bytes()), want);
        assert_eq!(c.literal_keys_of(sha.to_uppercase().as_bytes()), want);
        assert!(c.literal_keys_of(b"short").is_empty());
        // Pushed out by the byte bound: forgotten with its body.
        c.add(&Bytes::from(vec![b'x'; MAX_SCRIPT_BYTES]));
        assert!(c.literal_keys_of(sha.as_bytes()).is_empty());
        c.add(&body);
        c.clear();
        assert!(c.literal_keys_of(sha.as_bytes()).is_empty());
    }

    #[test]
    fn exists_is_one_only_where_every_node_has_it() {
        let r = |s: &'static [u8]| Bytes::from_static(s);
        let replies = [r(b"*2\r\n:1\r\n:1\r\n"), r(b"*2\r\n:1\r\n:0\r\n")];
        assert_eq!(&exists_on_all(&replies)[..], b"*2\r\n:1\r\n:0\r\n");
        let err = r(b"-ERR boom\r\n");
        assert_eq!(exists_on_all(&[replies[0].clone(), err.clone()]), err);
    }
}
