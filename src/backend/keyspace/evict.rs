//! Reclaiming memory: eviction under `maxmemory` by the configured
//! `maxmemory-policy` (LRU, LFU, random or TTL, over all keys or only those
//! with a TTL; or none), the active-expiry sweep, and random sampling of
//! buckets (the LFU counters are `lfu.rs`).
//!
//! Called through `Node::make_room` before commands that may grow memory,
//! and by the background task in `server/` every [`EXPIRE_TICK_MS`]. Never
//! holds more than one shard lock at a time.

use super::clock::lru_clock;
use super::entry::Entry;
use super::lfu::random;
use super::policy::Policy;
use super::store::{Locked, Store, SHARDS};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// How often the active-expiry sweep runs (Redis: `hz 10`).
pub(crate) const EXPIRE_TICK_MS: u64 = 100;
/// Buckets each shard's sweep inspects per tick before checking whether it
/// found enough expired keys to keep going.
const SWEEP_BUCKETS: usize = 64;
/// Time budget of one sweep tick (Redis: 25% of a 100 ms tick).
const SWEEP_BUDGET_MS: u128 = 25;

/// Why eviction could not get under the limit.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OutOfMemory;

impl Store {
    /// Evicts keys chosen by `policy` until memory is at or below
    /// `maxmemory` (0 = unlimited). Fails when the policy finds nothing
    /// to evict (`noeviction`, or a volatile policy with no TTL left).
    pub(crate) fn evict_to_fit(
        &self,
        maxmemory: u64,
        policy: Policy,
        samples: usize,
        now: u64,
    ) -> Result<(), OutOfMemory> {
        if maxmemory == 0 || self.used_memory() as u64 <= maxmemory {
            return Ok(());
        }
        if policy == Policy::NoEviction {
            return Err(OutOfMemory);
        }
        let samples = samples.max(1);
        let want = if policy.is_random() { 1 } else { samples };
        let mut misses = 0;
        while self.used_memory() as u64 > maxmemory {
            // Shards are added to the sample until it holds `want`
            // candidates: one shard when keys are many, several when a node
            // holds few (most shards then hold none or one, and sampling a
            // single shard would evict nearly at random, even the key being
            // written).
            let (mut best, mut seen) = (None::<(usize, u64)>, 0);
            for _ in 0..SHARDS {
                let shard = (random() as usize) % SHARDS;
                if let Some((_, score, n)) = self.lock_shard(shard, now).pick(policy, samples) {
                    seen += n;
                    if best.is_none_or(|(_, b)| score > b) {
                        best = Some((shard, score));
                    }
                }
                if seen >= want {
                    break;
                }
            }
            if let Some((shard, _)) = best {
                if self.lock_shard(shard, now).evict_one(policy, samples) {
                    misses = 0;
                    continue;
                }
            }
            misses += 1;
            if misses > 8 {
                // Few candidates left: walk every shard once before giving up.
                let found = (0..SHARDS).any(|i| self.lock_shard(i, now).evict_one(policy, samples));
                if !found {
                    return Err(OutOfMemory);
                }
                misses = 0;
            }
        }
        Ok(())
    }

    /// One active-expiry tick over all shards, within a time budget.
    /// Returns how many keys it removed.
    pub(crate) fn expire_tick(&self, now: u64) -> usize {
        if self.hooks.is_hiding() {
            // A replica removes only what its primary's stream says.
            return 0;
        }
        let start = Instant::now();
        let mut removed = 0;
        for i in 0..SHARDS {
            // A shard a full sync has yet to capture waits for the next
            // tick: sweeping it now would capture it here, and a tick that
            // captured every shard would stall the node for the whole snapshot.
            if self.hooks.snapshot.is_pending(i) {
                continue;
            }
            loop {
                let (found, inspected) = self.lock_shard(i, now).sweep(SWEEP_BUCKETS);
                removed += found;
                // Keep sweeping a shard while a quarter of what was looked at
                // had expired, as Redis does, unless the budget is spent.
                if inspected == 0
                    || found * 4 < inspected
                    || start.elapsed().as_millis() > SWEEP_BUDGET_MS
                {
                    break;
                }
            }
        }
        removed
    }
}

impl Locked<'_> {
    /// Up to `samples` eviction candidates (only keys with a TTL under a
    /// volatile policy) in consecutive buckets from a random position: the
    /// bucket and score (higher is evicted first) of the one the policy
    /// would evict, and how many candidates were looked at.
    fn pick(&self, policy: Policy, samples: usize) -> Option<(usize, u64, usize)> {
        let table = &self.shard.table;
        if table.is_empty() || (policy.is_volatile() && self.shard.expires == 0) {
            return None;
        }
        let lfu = &self.counters.lfu;
        let now_clock = lru_clock(self.now);
        // Higher is evicted first.
        let score = |e: &Entry| -> u64 {
            match policy {
                Policy::AllkeysLru | Policy::VolatileLru => now_clock.wrapping_sub(e.lru) as u64,
                Policy::AllkeysLfu | Policy::VolatileLfu => {
                    255 - lfu.decayed(e.lru, self.now) as u64
                }
                Policy::VolatileTtl => u64::MAX - e.expire_at,
                Policy::AllkeysRandom | Policy::VolatileRandom | Policy::NoEviction => 0,
            }
        };
        let want = if policy.is_random() { 1 } else { samples };
        let buckets = table.buckets();
        let start = (random() as usize) & (buckets - 1);
        let mut best: Option<(usize, u64)> = None;
        let mut seen = 0;
        for step in 0..buckets {
            let i = (start + step) & (buckets - 1);
            // SAFETY: `i < buckets()`, and a full bucket holds an initialised entry.
            if unsafe { table.is_bucket_full(i) } {
                let e: &Entry = unsafe { table.bucket(i).as_ref() };
                if policy.is_volatile() && e.expire_at == 0 {
                    continue;
                }
                let sc = score(e);
                if best.is_none_or(|(_, b)| sc > b) {
                    best = Some((i, sc));
                }
                seen += 1;
                if seen == want {
                    break;
                }
            }
        }
        best.map(|(i, score)| (i, score, seen))
    }

    /// Evicts the policy's choice from a fresh sample; false if there is none.
    fn evict_one(&mut self, policy: Policy, samples: usize) -> bool {
        let Some((i, _, _)) = self.pick(policy, samples) else {
            return false;
        };
        // SAFETY: `pick` returned a full bucket index of this table,
        // unchanged since (we hold the lock).
        let (e, _) = unsafe {
            let b = self.shard.table.bucket(i);
            self.shard.table.remove(b)
        };
        self.forget(&e);
        self.hooks.removed(e.key());
        let n = &self.hooks.notices;
        n.raise(super::notices::EVICTED, "evicted", e.key());
        let c = if e.is_expired(self.now) {
            &self.counters.expired_keys
        } else {
            &self.counters.evicted_keys
        };
        c.fetch_add(1, Relaxed);
        true
    }

    /// Inspects up to `budget` buckets from where the last sweep stopped and
    /// removes expired entries. Returns (removed, entries-with-TTL inspected).
    fn sweep(&mut self, budget: usize) -> (usize, usize) {
        if self.shard.expires == 0 {
            return (0, 0);
        }
        let buckets = self.shard.table.buckets();
        let (mut removed, mut inspected) = (0, 0);
        for _ in 0..budget.min(buckets) {
            let i = self.shard.sweep_at % buckets;
            self.shard.sweep_at = (i + 1) % buckets;
            // SAFETY: `i < buckets()`; a full bucket holds an initialised entry.
            if !unsafe { self.shard.table.is_bucket_full(i) } {
                continue;
            }
            let b = unsafe { self.shard.table.bucket(i) };
            let e = unsafe { b.as_ref() };
            if e.expire_at == 0 {
                continue;
            }
            inspected += 1;
            if e.is_expired(self.now) {
                // SAFETY: `b` is a full bucket of this table.
                let (e, _) = unsafe { self.shard.table.remove(b) };
                self.forget(&e);
                self.hooks.expired(e.key());
                self.counters.expired_keys.fetch_add(1, Relaxed);
                removed += 1;
            }
        }
        (removed, inspected)
    }

    /// A random live entry of this shard, if it has any (tries a few times
    /// when it lands on expired ones, removing them).
    pub(crate) fn random_entry(&mut self) -> Option<&Entry> {
        for _ in 0..8 {
            let i = self.random_full_bucket()?;
            // SAFETY: a full bucket index of this table, just found.
            let b = unsafe { self.shard.table.bucket(i) };
            if unsafe { b.as_ref() }.is_expired(self.now) {
                if self.hooks.is_hiding() {
                    continue;
                }
                let (e, _) = unsafe { self.shard.table.remove(b) };
                self.forget(&e);
                self.hooks.expired(e.key());
                self.counters.expired_keys.fetch_add(1, Relaxed);
                continue;
            }
            return Some(unsafe { b.as_ref() });
        }
        None
    }

    /// The first full bucket at or after a random position.
    fn random_full_bucket(&self) -> Option<usize> {
        let table = &self.shard.table;
        if table.is_empty() {
            return None;
        }
        let buckets = table.buckets();
        let start = (random() as usize) & (buckets - 1);
        (0..buckets)
            .map(|s| (start + s) & (buckets - 1))
            // SAFETY: every index is below `buckets()`.
            .find(|&i| unsafe { table.is_bucket_full(i) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::keyspace::entry::ENTRY_OVERHEAD;
    use crate::backend::keyspace::store::BASE_MEMORY;

    fn fill(store: &Store, n: usize, now: u64, ttl_at: u64) {
        for i in 0..n {
            let key = format!("key:{i}");
            let h = store.hash(key.as_bytes());
            store
                .lock(h, now)
                .put(h, key.as_bytes(), &[b'x'; 100], ttl_at);
        }
    }

    #[test]
    fn eviction_gets_under_maxmemory() {
        let store = Store::new();
        fill(&store, 10_000, 1_000, 0);
        let limit = (BASE_MEMORY + 5_000 * (100 + 8 + ENTRY_OVERHEAD)) as u64;
        store
            .evict_to_fit(limit, Policy::AllkeysLru, 16, 2_000)
            .unwrap();
        assert!(store.used_memory() as u64 <= limit);
        let left = store.counts().0;
        assert!((4_900..=5_300).contains(&left), "{left}");
        assert_eq!(
            store.counters.evicted_keys.load(Relaxed) as usize,
            10_000 - left
        );
    }

    #[test]
    fn eviction_prefers_least_recently_used_keys() {
        let store = Store::new();
        // 5 000 old keys, then 5 000 recent ones.
        fill(&store, 5_000, 1_000, 0);
        for i in 5_000..10_000 {
            let key = format!("key:{i}");
            let h = store.hash(key.as_bytes());
            store
                .lock(h, 900_000)
                .put(h, key.as_bytes(), &[b'x'; 100], 0);
        }
        let limit = (BASE_MEMORY + 7_000 * (100 + 9 + ENTRY_OVERHEAD)) as u64;
        store
            .evict_to_fit(limit, Policy::AllkeysLru, 16, 1_000_000)
            .unwrap();
        let recent_left = (5_000..10_000)
            .filter(|i| {
                let key = format!("key:{i}");
                let h = store.hash(key.as_bytes());
                store.lock(h, 1_000_000).contains(h, key.as_bytes())
            })
            .count();
        assert!(
            recent_left > 4_900,
            "recent keys evicted: {}",
            5_000 - recent_left
        );
    }

    #[test]
    fn eviction_of_an_empty_store_reports_out_of_memory() {
        let store = Store::new();
        assert_eq!(
            store.evict_to_fit(1, Policy::AllkeysLru, 16, 0),
            Err(OutOfMemory)
        );
        assert_eq!(store.evict_to_fit(0, Policy::AllkeysLru, 16, 0), Ok(()));
    }

    #[test]
    fn active_expiry_reclaims_unaccessed_keys() {
        let store = Store::new();
        fill(&store, 5_000, 1_000, 2_000);
        fill_other(&store);
        let mut removed = 0;
        for _ in 0..200 {
            removed += store.expire_tick(3_000);
        }
        assert_eq!(removed, 5_000);
        assert_eq!(store.counts(), (10, 0));
    }

    fn fill_other(store: &Store) {
        for i in 0..10 {
            let key = format!("other:{i}");
            let h = store.hash(key.as_bytes());
            store.lock(h, 1_000).put(h, key.as_bytes(), b"v", 0);
        }
    }
}
