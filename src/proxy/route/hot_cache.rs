//! The local cache of hot GETs (`[hot_keys] cache_ttl_ms`, off by default).
//!
//! Routing asks it, for a plain `GET key` whose key the hot-key sketch counts
//! as hot, whether a reply younger than the TTL is held; a miss reserves a
//! slot (a fill token) and forwards as usual, and the node's reply fills the
//! slot only if nothing removed it meanwhile. It holds only the bulk payload
//! (or nil), so one entry serves RESP2 and RESP3 clients alike.
//!
//! Invalidation: routing calls [`HotCache::invalidate`] for every key a
//! write touches before the write is forwarded (which also cancels a fill in
//! flight for that key), and every entry carries the ring epoch it was read
//! under: the first request that sees another epoch clears the whole cache,
//! so no key is served across a cutover from where it used to live.
//!
//! Bounded in bytes (keys, payloads and a fixed per-entry overhead); the
//! oldest entries leave first. Never holds its lock across an `.await`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::resp::encode;

/// What an entry costs beyond its key and payload (map slot, queue slot,
/// bookkeeping): counted so that many tiny entries are bounded too.
pub(crate) const ENTRY_OVERHEAD_BYTES: usize = 96;

/// The answer to [`HotCache::lookup`].
#[derive(Debug, PartialEq)]
pub(crate) enum Lookup {
    /// A fresh reply: the payload, `None` for nil.
    Hit(Option<Bytes>),
    /// Not held: forward, then [`HotCache::fill`] with this token.
    Miss(u64),
}

enum Value {
    /// A miss was forwarded; its reply may fill the slot.
    Filling,
    Ready {
        payload: Option<Bytes>,
        at: Instant,
    },
}

struct Entry {
    value: Value,
    token: u64,
    cost: usize,
}

struct Inner {
    map: HashMap<Bytes, Entry>,
    /// Insertion order for eviction: (key, token); stale pairs (the key was
    /// removed or refilled since) are skipped.
    order: VecDeque<(Bytes, u64)>,
    bytes: usize,
    epoch: u64,
    next_token: u64,
}

/// The cache; `proxy.ops.hot_cache` is `None` when it is off.
pub(crate) struct HotCache {
    ttl: Duration,
    max_bytes: usize,
    /// A plain mutex: every operation is a few map steps and never awaits.
    inner: Mutex<Inner>,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    /// Mirrors `inner.bytes` for the metrics scrape without the lock.
    pub(crate) bytes: AtomicU64,
}

impl HotCache {
    pub(crate) fn new(ttl: Duration, max_bytes: u64) -> HotCache {
        HotCache {
            ttl,
            max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                order: VecDeque::new(),
                bytes: 0,
                epoch: 0,
                next_token: 1,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// A fresh reply for `key` read under `epoch`, or a fill token.
    pub(crate) fn lookup(&self, key: &Bytes, epoch: u64, now: Instant) -> Lookup {
        let Ok(mut g) = self.inner.lock() else {
            return Lookup::Miss(0);
        };
        g.enter_epoch(epoch);
        if let Some(Entry {
            value: Value::Ready { payload, at },
            ..
        }) = g.map.get(key)
        {
            if now.saturating_duration_since(*at) < self.ttl {
                let p = payload.clone();
                drop(g);
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Lookup::Hit(p);
            }
        }
        g.remove(key);
        let token = g.next_token;
        g.next_token += 1;
        let cost = key.len() + ENTRY_OVERHEAD_BYTES;
        self.insert(&mut g, key.clone(), Value::Filling, token, cost);
        self.bytes.store(g.bytes as u64, Ordering::Relaxed);
        drop(g);
        self.misses.fetch_add(1, Ordering::Relaxed);
        Lookup::Miss(token)
    }

    /// Stores the reply of the miss that got `token`, unless a write to the
    /// key, another miss or an epoch change came in between.
    pub(crate) fn fill(
        &self,
        key: &Bytes,
        token: u64,
        epoch: u64,
        payload: Option<Bytes>,
        now: Instant,
    ) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        if g.epoch != epoch {
            return;
        }
        match g.map.get(key) {
            Some(e) if e.token == token && matches!(e.value, Value::Filling) => {}
            _ => return,
        }
        g.remove(key);
        let cost = key.len() + payload.as_ref().map_or(0, |p| p.len()) + ENTRY_OVERHEAD_BYTES;
        let value = Value::Ready { payload, at: now };
        self.insert(&mut g, key.clone(), value, token, cost);
        self.bytes.store(g.bytes as u64, Ordering::Relaxed);
    }

    /// Forgets `key` (called before a write to it is forwarded).
    pub(crate) fn invalidate(&self, key: &[u8]) {
        if let Ok(mut g) = self.inner.lock() {
            if g.map.contains_key(key) {
                g.remove(key);
                self.bytes.store(g.bytes as u64, Ordering::Relaxed);
            }
        }
    }

    /// Forgets everything (FLUSHALL, FLUSHDB, …).
    pub(crate) fn clear(&self) {
        if let Ok(mut g) = self.inner.lock() {
            g.clear();
            self.bytes.store(0, Ordering::Relaxed);
        }
    }

    /// Inserts an entry, evicting the oldest until it fits; an entry larger
    /// than the whole bound is not kept.
    fn insert(&self, g: &mut Inner, key: Bytes, value: Value, token: u64, cost: usize) {
        if cost > self.max_bytes {
            return;
        }
        while g.bytes + cost > self.max_bytes {
            let Some((k, t)) = g.order.pop_front() else {
                break;
            };
            if g.map.get(&k).is_some_and(|e| e.token == t) {
                g.remove(&k);
            }
        }
        g.bytes += cost;
        g.order.push_back((key.clone(), token));
        g.map.insert(key, Entry { value, token, cost });
        // Stale queue pairs are bounded by compacting when they dominate.
        if g.order.len() > 2 * g.map.len() + 64 {
            let map = &g.map;
            let kept: VecDeque<(Bytes, u64)> = g
                .order
                .iter()
                .filter(|(k, t)| map.get(k).is_some_and(|e| e.token == *t))
                .cloned()
                .collect();
            g.order = kept;
        }
    }
}

impl Inner {
    fn enter_epoch(&mut self, epoch: u64) {
        if self.epoch != epoch {
            self.clear();
            self.epoch = epoch;
        }
    }

    fn remove(&mut self, key: &[u8]) {
        if let Some(e) = self.map.remove(key) {
            self.bytes -= e.cost;
        }
    }

    fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.bytes = 0;
    }
}

/// The payload of a GET reply worth keeping: `Some(Some(p))` for a bulk
/// string, `Some(None)` for nil, `None` for anything else (errors above all).
pub(crate) fn cacheable(reply: &[u8]) -> Option<Option<Bytes>> {
    if reply == b"$-1\r\n" || reply == b"_\r\n" {
        return Some(None);
    }
    let rest = reply.strip_prefix(b"$")?;
    let nl = rest.iter().position(|&b| b == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..nl]).ok()?.parse().ok()?;
    let body = rest.get(nl + 2..)?;
    (body.len() == len + 2 && body.ends_with(b"\r\n"))
        .then(|| Some(Bytes::copy_from_slice(&body[..len])))
}

/// A cached payload as the client's protocol spells it.
pub(crate) fn reply(payload: &Option<Bytes>, proto: u8) -> Bytes {
    let mut out = BytesMut::new();
    match payload {
        Some(p) => encode::bulk(&mut out, p),
        None => encode::null(&mut out, proto),
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::config::ops::DEFAULT_HOT_CACHE_MAX_BYTES as DEFAULT_MAX_BYTES;
    use crate::test_util::b as key;

    fn filled(c: &HotCache, k: &str, v: &str, now: Instant) {
        let Lookup::Miss(t) = c.lookup(&key(k), 1, now) else {
            panic!("expected a miss for {k}");
        };
        c.fill(&key(k), t, 1, Some(key(v)), now);
    }

    #[test]
    fn entries_serve_until_the_ttl_then_miss() {
        let c = HotCache::new(Duration::from_millis(100), DEFAULT_MAX_BYTES);
        let t0 = Instant::now();
        filled(&c, "k", "v", t0);
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(c.lookup(&key("k"), 1, at(99)), Lookup::Hit(Some(key("v"))));
        assert!(matches!(c.lookup(&key("k"), 1, at(100)), Lookup::Miss(_)));
        assert_eq!(c.hits.load(Ordering::Relaxed), 1);
        assert_eq!(c.misses.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn nil_is_cached_and_encoded_per_protocol() {
        let c = HotCache::new(Duration::from_secs(5), DEFAULT_MAX_BYTES);
        let now = Instant::now();
        let Lookup::Miss(t) = c.lookup(&key("n"), 1, now) else {
            panic!()
        };
        c.fill(&key("n"), t, 1, None, now);
        assert_eq!(c.lookup(&key("n"), 1, now), Lookup::Hit(None));
        assert_eq!(&reply(&None, 2)[..], b"$-1\r\n");
        assert_eq!(&reply(&None, 3)[..], b"_\r\n");
        assert_eq!(&reply(&Some(key("ab")), 3)[..], b"$2\r\nab\r\n");
    }

    #[test]
    fn invalidation_removes_an_entry_and_cancels_a_fill_in_flight() {
        let c = HotCache::new(Duration::from_secs(5), DEFAULT_MAX_BYTES);
        let now = Instant::now();
        filled(&c, "k", "old", now);
        c.invalidate(b"k");
        let Lookup::Miss(t) = c.lookup(&key("k"), 1, now) else {
            panic!("invalidated entry served")
        };
        // A write arrives while the miss is forwarded: its reply is not kept.
        c.invalidate(b"k");
        c.fill(&key("k"), t, 1, Some(key("old")), now);
        assert!(matches!(c.lookup(&key("k"), 1, now), Lookup::Miss(_)));
        assert_eq!(
            c.bytes.load(Ordering::Relaxed) as usize,
            1 + ENTRY_OVERHEAD_BYTES
        );
        c.clear();
        assert_eq!(c.bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_epoch_change_clears_everything_and_refuses_old_fills() {
        let c = HotCache::new(Duration::from_secs(5), DEFAULT_MAX_BYTES);
        let now = Instant::now();
        filled(&c, "a", "1", now);
        let Lookup::Miss(t) = c.lookup(&key("b"), 1, now) else {
            panic!()
        };
        assert!(matches!(c.lookup(&key("a"), 2, now), Lookup::Miss(_)));
        c.fill(&key("b"), t, 1, Some(key("2")), now);
        assert!(matches!(c.lookup(&key("b"), 2, now), Lookup::Miss(_)));
    }

    #[test]
    fn bytes_never_exceed_the_bound_and_the_oldest_leave_first() {
        let max = 10 * (ENTRY_OVERHEAD_BYTES + 1 + 100);
        let c = HotCache::new(Duration::from_secs(5), max as u64);
        let now = Instant::now();
        let v = "x".repeat(100);
        for i in 0..50 {
            // Rewrites of the same keys leave stale queue pairs behind.
            let k = format!("r{}", i % 10);
            c.invalidate(k.as_bytes());
            filled(&c, &k, &v, now);
            assert!(c.bytes.load(Ordering::Relaxed) as usize <= max);
        }
        for i in 0..200 {
            filled(&c, &format!("key{i:03}"), &v, now);
            assert!(c.bytes.load(Ordering::Relaxed) as usize <= max);
        }
        assert!(matches!(c.lookup(&key("key000"), 1, now), Lookup::Miss(_)));
        assert_eq!(c.lookup(&key("key199"), 1, now), Lookup::Hit(Some(key(&v))));
        // An entry bigger than the bound is never kept.
        filled(&c, "huge", &"y".repeat(max), now);
        assert!(matches!(c.lookup(&key("huge"), 1, now), Lookup::Miss(_)));
        assert!(c.inner.lock().unwrap().order.len() <= 2 * 10 + 64 + 1);
    }

    #[test]
    fn only_bulk_and_nil_replies_are_cacheable() {
        assert_eq!(cacheable(b"$3\r\nabc\r\n"), Some(Some(key("abc"))));
        assert_eq!(cacheable(b"$0\r\n\r\n"), Some(Some(key(""))));
        assert_eq!(cacheable(b"$-1\r\n"), Some(None));
        assert_eq!(cacheable(b"_\r\n"), Some(None));
        for bad in [
            &b"-ERR x\r\n"[..],
            b"-WRONGTYPE y\r\n",
            b":1\r\n",
            b"$3\r\nab\r\n",
            b"$x\r\n",
        ] {
            assert_eq!(cacheable(bad), None, "{bad:?}");
        }
    }
}
