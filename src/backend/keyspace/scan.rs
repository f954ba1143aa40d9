//! Walking the keyspace: SCAN cursors, KEYS and RANDOMKEY.
//!
//! A SCAN cursor is a key-hash prefix: "continue with keys whose hash's top
//! [`CURSOR_BITS`] bits are at least this". Shards own contiguous hash ranges
//! (the top bits), so walking the cursor upwards visits shard after shard,
//! and within a shard keys are taken in prefix order, all keys of one prefix
//! in the same step. A key's hash never changes, so a key present for the
//! whole walk is returned exactly once however the tables grow or shrink —
//! the guarantee Redis's reverse-binary cursor gives, without depending on
//! the table's layout. 0 starts and ends a walk; a cursor past the last
//! prefix ends it too.

use super::entry::Entry;
use super::lfu::random;
use super::store::{Store, SHARDS};

/// Bits of a cursor: the proxy packs a node's cursor into this many bits of
/// its own (`proxy::cursor::NODE_CURSOR_BITS`). Prefixes of this width are
/// shared by two keys of a node only past ~10^10 keys, so a step rarely
/// takes more keys than asked.
pub(crate) const CURSOR_BITS: u32 = 35;
const PREFIX_SHIFT: u32 = 64 - CURSOR_BITS;
const PREFIXES: u64 = 1 << CURSOR_BITS;

/// Each call on a shard returns at least 1/this of it, so a full walk costs
/// at most this many passes over each shard whatever COUNT is.
const MIN_SHARD_FRACTION: usize = 16;

impl Store {
    /// One SCAN step: the next cursor (0 when done, always below 2^[`CURSOR_BITS`])
    /// and the keys of at least `count` entries in hash order (fewer at the
    /// end). `keep` filters what is returned without changing the walk
    /// (MATCH, TYPE).
    pub(crate) fn scan(
        &self,
        cursor: u64,
        count: usize,
        now: u64,
        keep: impl Fn(&Entry) -> bool,
    ) -> (u64, Vec<Vec<u8>>) {
        let mut out = Vec::new();
        let mut walked = 0;
        let mut cursor = cursor;
        if cursor >= PREFIXES {
            return (0, out);
        }
        loop {
            let shard = Store::shard_of(cursor << PREFIX_SHIFT);
            let s = self.lock_shard(shard, now);
            let want = count
                .saturating_sub(walked)
                .max(s.len() / MIN_SHARD_FRACTION)
                .max(1);
            let mut ahead: Vec<(u64, &Entry)> = s
                .iter()
                .map(|e| (self.hash(e.key()) >> PREFIX_SHIFT, e))
                .filter(|&(p, _)| p >= cursor)
                .collect();
            let next = if ahead.len() <= want {
                next_shard_start(shard)
            } else {
                ahead.select_nth_unstable_by_key(want, |&(p, _)| p);
                let bound = ahead[want].0;
                if bound == cursor {
                    // More than `want` keys share one prefix: take them all.
                    ahead.retain(|&(p, _)| p == bound);
                    if bound + 1 == PREFIXES {
                        0
                    } else {
                        bound + 1
                    }
                } else {
                    ahead.retain(|&(p, _)| p < bound);
                    bound
                }
            };
            walked += ahead.len();
            out.extend(
                ahead
                    .iter()
                    .filter(|(_, e)| !e.is_expired(now) && keep(e))
                    .map(|(_, e)| e.key().to_vec()),
            );
            drop(ahead);
            drop(s);
            cursor = next;
            if cursor == 0 || walked >= count {
                return (cursor, out);
            }
        }
    }

    /// Every live key that `keep` accepts (KEYS).
    pub(crate) fn keys(&self, now: u64, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for i in 0..SHARDS {
            let s = self.lock_shard(i, now);
            out.extend(
                s.iter()
                    .filter(|e| !e.is_expired(now) && keep(e.key()))
                    .map(|e| e.key().to_vec()),
            );
        }
        out
    }

    /// A random live key, if there is one (RANDOMKEY).
    pub(crate) fn random_key(&self, now: u64) -> Option<Vec<u8>> {
        let start = random() as usize;
        (0..SHARDS).find_map(|k| {
            let mut s = self.lock_shard((start + k) % SHARDS, now);
            s.random_entry().map(|e| e.key().to_vec())
        })
    }
}

/// The first prefix of the shard after `shard`, or 0 (walk done) after the last.
fn next_shard_start(shard: usize) -> u64 {
    let bits = CURSOR_BITS - SHARDS.trailing_zeros();
    if shard + 1 == SHARDS {
        0
    } else {
        ((shard + 1) as u64) << bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn put(store: &Store, key: &str) {
        let h = store.hash(key.as_bytes());
        store.lock(h, 1).put(h, key.as_bytes(), b"v", 0);
    }

    fn del(store: &Store, key: &str) {
        let h = store.hash(key.as_bytes());
        store.lock(h, 1).remove(h, key.as_bytes());
    }

    #[test]
    fn scan_returns_every_key_exactly_once_on_a_quiet_store() {
        for (n, count) in [(0, 10), (1, 10), (1000, 10), (1000, 1), (5000, 1000)] {
            let store = Store::new();
            (0..n).for_each(|i| put(&store, &format!("k{i}")));
            let mut seen = Vec::new();
            let mut cursor = 0;
            loop {
                let (next, keys) = store.scan(cursor, count, 1, |_| true);
                seen.extend(keys);
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
            let unique: HashSet<_> = seen.iter().cloned().collect();
            assert_eq!((seen.len(), unique.len()), (n, n), "n={n} count={count}");
        }
    }

    #[test]
    fn scan_returns_keys_present_throughout_while_others_come_and_go() {
        let store = Store::new();
        (0..2000).for_each(|i| put(&store, &format!("stay{i}")));
        let mut seen = HashSet::new();
        let (mut cursor, mut round) = (0, 0);
        loop {
            // Grow the tables (rehash) and delete between steps.
            (0..500).for_each(|j| put(&store, &format!("new{round}:{j}")));
            (0..200).for_each(|j| del(&store, &format!("new{}:{j}", round.max(1) - 1)));
            let (next, keys) = store.scan(cursor, 50, 1, |_| true);
            seen.extend(keys);
            round += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert!((0..2000).all(|i| seen.contains(format!("stay{i}").as_bytes())));
    }

    #[test]
    fn cursors_fit_the_bits_the_proxy_gives_them() {
        let store = Store::new();
        (0..20_000).for_each(|i| put(&store, &format!("k{i}")));
        let (mut cursor, mut seen, mut steps) = (0, HashSet::new(), 0);
        loop {
            let (next, keys) = store.scan(cursor, 10, 1, |_| true);
            assert!(
                next < 1 << CURSOR_BITS,
                "cursor {next} is wider than {CURSOR_BITS} bits"
            );
            seen.extend(keys);
            steps += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 20_000);
        assert!(steps > 100, "COUNT 10 takes many steps: {steps}");
        // A cursor past the last prefix ends the walk.
        assert_eq!(store.scan(u64::MAX, 10, 1, |_| true), (0, vec![]));
        assert_eq!(store.scan(PREFIXES, 10, 1, |_| true), (0, vec![]));
    }

    #[test]
    fn random_key_finds_the_only_key() {
        let store = Store::new();
        assert_eq!(store.random_key(1), None);
        put(&store, "only");
        assert_eq!(store.random_key(1), Some(b"only".to_vec()));
    }
}
