//! The keyspace: 64 independently locked shards of entries (a string, or a
//! collection from `value/`), with lazy expiry, an LRU clock per entry and
//! memory accounting.
//!
//! Owns every key and value of the node. Command handlers lock one shard at a
//! time through [`Store::lock`] (or several, in shard order, through
//! [`Store::lock_many`]) and never hold a shard across an `.await`.
//! Sampling for eviction and active expiry lives in `evict.rs`, cursors in
//! `scan.rs`.

use super::clock::{lru_clock, now_ms};
use super::entry::Entry;
use super::ready::ReadyKeys;
use super::replicated::Hooks;
use super::watched::Watched;
use crate::backend::value::Kind;
use hashbrown::raw::RawTable;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// Number of shards; a power of two, the top bits of a key's hash pick one.
pub(crate) const SHARDS: usize = 64;
const SHARD_BITS: u32 = SHARDS.trailing_zeros();

/// Fixed bytes reported as used by an empty node (tables, buffers, runtime).
pub(crate) const BASE_MEMORY: usize = 1024 * 1024;

/// Counters shared by all shards (all `Relaxed`: they are statistics and a
/// memory estimate, never used to order other memory accesses).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Bytes of keys, values and per-entry overhead.
    pub(crate) used_memory: AtomicUsize,
    /// Keys removed because their TTL passed.
    pub(crate) expired_keys: AtomicU64,
    /// Keys removed to stay under `maxmemory`.
    pub(crate) evicted_keys: AtomicU64,
    /// Reads that found their key.
    pub(crate) keyspace_hits: AtomicU64,
    /// Reads that did not.
    pub(crate) keyspace_misses: AtomicU64,
    /// Whether accesses feed LFU counters instead of the LRU clock.
    pub(crate) lfu: super::lfu::Lfu,
    /// (key, client) WATCH records over all shards: zero lets a write skip
    /// looking for watchers. Changed only under the record's shard lock.
    pub(crate) watching: AtomicUsize,
}

/// One shard's table plus what the background sweeps need.
#[derive(Default)]
pub(crate) struct Shard {
    pub(crate) table: RawTable<Entry>,
    /// Entries with a TTL (for `INFO keyspace` and to skip the expiry sweep).
    pub(crate) expires: usize,
    /// Next bucket the active-expiry sweep looks at.
    pub(crate) sweep_at: usize,
    /// Clients watching keys of this shard (WATCH).
    pub(crate) watched: Watched,
}

/// The node's keyspace.
pub(crate) struct Store {
    /// `std::sync::Mutex` rather than an async mutex: critical sections are a
    /// hash lookup plus a copy, never span an `.await`, and the lock is
    /// uncontended on a current-thread runtime, where it costs one atomic.
    /// Sharding keeps contention low on a multi-threaded runtime too.
    shards: Vec<Mutex<Shard>>,
    seed: u64,
    /// Statistics and memory accounting.
    pub(crate) counters: Counters,
    /// Lists and sorted sets created while clients block (`ready.rs`, `backend::blocking`).
    pub(crate) ready: ReadyKeys,
    /// Replication's hooks: removals to propagate, hidden expiry, the
    /// snapshot of a full sync (`replicated.rs`).
    pub(crate) hooks: Hooks,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

/// A locked shard, with the time the current command runs at.
pub(crate) struct Locked<'a> {
    pub(crate) shard: MutexGuard<'a, Shard>,
    seed: u64,
    pub(crate) counters: &'a Counters,
    ready: &'a ReadyKeys,
    pub(crate) hooks: &'a Hooks,
    /// The command's time, ms since the epoch.
    pub(crate) now: u64,
}

impl Store {
    /// An empty store with a per-process random hash seed (keys come from the
    /// network, so the table layout must not be predictable).
    pub(crate) fn new() -> Store {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(now_ms());
        Store {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            seed: h.finish(),
            counters: Counters::default(),
            ready: ReadyKeys::default(),
            hooks: Hooks::new(SHARDS),
        }
    }

    /// The 64-bit hash of a key: top bits pick the shard, the top
    /// `scan::CURSOR_BITS` order keys for SCAN cursors.
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        hash_bytes(self.seed, key)
    }

    /// Which shard a hash lives in.
    pub(crate) fn shard_of(hash: u64) -> usize {
        (hash >> (64 - SHARD_BITS)) as usize
    }

    /// Locks the shard that holds `hash`.
    pub(crate) fn lock(&self, hash: u64, now: u64) -> Locked<'_> {
        self.lock_shard(Self::shard_of(hash), now)
    }

    /// Locks shard number `i`.
    pub(crate) fn lock_shard(&self, i: usize, now: u64) -> Locked<'_> {
        // A panic while holding a shard leaves the table consistent (every
        // mutation is a single table call), so poisoning is ignored.
        let shard = self.shards[i].lock().unwrap_or_else(|e| e.into_inner());
        if self.hooks.snapshot.wants(i) {
            // SAFETY: the shard's lock is held for the whole walk.
            let entries = unsafe { shard.table.iter() }.map(|b| unsafe { &*b.as_ptr() });
            self.hooks.snapshot.capture(entries);
        }
        Locked {
            shard,
            seed: self.seed,
            counters: &self.counters,
            ready: &self.ready,
            hooks: &self.hooks,
            now,
        }
    }

    /// Locks every shard the hashes touch, in shard order so two multi-key
    /// commands cannot deadlock. Returns the guards indexed by shard.
    pub(crate) fn lock_many(&self, hashes: &[u64], now: u64) -> Vec<Option<Locked<'_>>> {
        let mut wanted = [false; SHARDS];
        for &h in hashes {
            wanted[Self::shard_of(h)] = true;
        }
        wanted
            .iter()
            .enumerate()
            .map(|(i, &w)| w.then(|| self.lock_shard(i, now)))
            .collect()
    }

    /// Current memory estimate in bytes.
    pub(crate) fn used_memory(&self) -> usize {
        BASE_MEMORY + self.counters.used_memory.load(Relaxed)
    }

    /// Keys and keys-with-TTL over all shards (expired but unreclaimed keys
    /// included, as Redis counts them).
    pub(crate) fn counts(&self) -> (usize, usize) {
        // Read-only: no need to capture shards for a snapshot first.
        (0..SHARDS).fold((0, 0), |(k, e), i| {
            let s = self.shards[i].lock().unwrap_or_else(|e| e.into_inner());
            (k + s.table.len(), e + s.expires)
        })
    }

    /// Removes every key; returns the old tables so the caller chooses
    /// where to free them (FLUSHALL ASYNC frees on another thread). Watched
    /// keys that existed are touched; the watch records stay.
    pub(crate) fn flush(&self) -> Vec<Shard> {
        let mut old = Vec::with_capacity(SHARDS);
        for i in 0..SHARDS {
            let mut s = self.lock_shard(i, 0);
            // A flushed stream's group readers are told (see `forget`).
            let freed: usize = s
                .iter()
                .inspect(|e| {
                    if e.kind() == Kind::Stream {
                        self.ready.signal(e.key());
                    }
                })
                .map(|e| e.mem())
                .sum();
            let watched = std::mem::take(&mut s.shard.watched);
            let mut table = std::mem::take(&mut *s.shard);
            s.shard.watched = watched;
            s.counters.used_memory.fetch_sub(freed, Relaxed);
            if !s.shard.watched.is_empty() {
                let seed = self.seed;
                let had = |k: &[u8]| {
                    let h = table_hash(hash_bytes(seed, k));
                    table.table.get(h, same_key(k)).is_some()
                };
                s.shard.watched.touch_flushed(had);
            }
            table.watched = Watched::default();
            old.push(table);
        }
        old
    }

    /// Touches `key` for WATCH after a write command named it (a change in
    /// place, which the table does not see). Costs one atomic load while no
    /// client watches anything: a watch registered before this command's
    /// change took the same shard lock first, so its count is visible here.
    pub(crate) fn touch(&self, key: &[u8], now: u64) {
        if self.counters.watching.load(Relaxed) == 0 {
            return;
        }
        let h = self.hash(key);
        let mut s = self.lock(h, now);
        if !s.shard.watched.is_empty() {
            let present = s.shard.table.get(table_hash(h), same_key(key)).is_some();
            s.shard.watched.touch(key, present);
        }
    }
}

fn same_key(key: &[u8]) -> impl Fn(&Entry) -> bool + '_ {
    move |e: &Entry| e.key() == key
}

/// The hash hashbrown sees: rotated so its bucket bits and control byte come
/// from bits that vary within a shard (the top bits are the shard number).
#[inline]
fn table_hash(hash: u64) -> u64 {
    hash.rotate_left(32)
}

impl Locked<'_> {
    /// The live entry for `key`, updating its LRU clock. An expired entry is
    /// deleted here (lazy expiry) and reported absent.
    pub(crate) fn get(&mut self, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        let now = self.now;
        let bucket = self.shard.table.find(table_hash(hash), same_key(key))?;
        // SAFETY: `bucket` was just returned by `find` on this table and the
        // table is not modified before it is used.
        let expired = unsafe { bucket.as_ref() }.is_expired(now);
        if expired {
            if self.hooks.is_hiding() {
                // A replica: the primary's DEL removes it.
                return None;
            }
            // SAFETY: as above; the bucket is full.
            let (e, _) = unsafe { self.shard.table.remove(bucket) };
            self.forget(&e);
            self.hooks.expired(e.key());
            self.counters.expired_keys.fetch_add(1, Relaxed);
            return None;
        }
        // SAFETY: as above.
        let e = unsafe { bucket.as_mut() };
        let lfu = &self.counters.lfu;
        e.lru = if lfu.is_on() {
            lfu.touched(e.lru, now)
        } else {
            lru_clock(now)
        };
        Some(e)
    }

    /// The live entry for `key` without touching its LRU clock or deleting
    /// anything (OBJECT, MEMORY USAGE).
    pub(crate) fn peek(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        let e = self.shard.table.get(table_hash(hash), same_key(key))?;
        (!e.is_expired(self.now)).then_some(e)
    }

    /// Whether `key` is in the table but past its TTL (expired, not yet
    /// reclaimed).
    pub(crate) fn is_expired_in_table(&self, hash: u64, key: &[u8]) -> bool {
        self.shard
            .table
            .get(table_hash(hash), same_key(key))
            .is_some_and(|e| e.is_expired(self.now))
    }

    /// Like [`Locked::get`], and counts a keyspace hit or miss.
    pub(crate) fn read(&mut self, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        let counters = self.counters;
        let e = self.get(hash, key);
        let c = if e.is_some() {
            &counters.keyspace_hits
        } else {
            &counters.keyspace_misses
        };
        c.fetch_add(1, Relaxed);
        e
    }

    /// Whether `key` exists (and has not expired), without touching its LRU.
    /// An expired entry found here is removed.
    pub(crate) fn contains(&mut self, hash: u64, key: &[u8]) -> bool {
        match self.shard.table.get(table_hash(hash), same_key(key)) {
            None => false,
            Some(e) if !e.is_expired(self.now) => true,
            Some(_) => self.get(hash, key).is_some(),
        }
    }

    /// Runs `f` on the live entry, keeping memory and TTL accounting right
    /// whatever `f` changes.
    pub(crate) fn update<R>(
        &mut self,
        hash: u64,
        key: &[u8],
        f: impl FnOnce(&mut Entry) -> R,
    ) -> Option<R> {
        let counters = self.counters;
        let (r, before, after, ttl_before, ttl_after) = {
            let e = self.get(hash, key)?;
            let (before, ttl_before) = (e.mem(), e.expire_at != 0);
            let r = f(e);
            (r, before, e.mem(), ttl_before, e.expire_at != 0)
        };
        if after >= before {
            counters.used_memory.fetch_add(after - before, Relaxed);
        } else {
            counters.used_memory.fetch_sub(before - after, Relaxed);
        }
        match (ttl_before, ttl_after) {
            (false, true) => self.shard.expires += 1,
            (true, false) => self.shard.expires -= 1,
            _ => {}
        }
        Some(r)
    }

    /// Stores `entry` (whose key hashes to `hash`), replacing any entry
    /// with its key; returns the old one if it was live.
    pub(crate) fn insert(&mut self, hash: u64, entry: Entry) -> Option<Entry> {
        let old = self.remove(hash, entry.key());
        self.store_entry(hash, entry, old.is_none());
        old
    }

    /// Stores `entry`, whose key is known not to be in the table.
    pub(crate) fn insert_absent(&mut self, hash: u64, entry: Entry) {
        self.store_entry(hash, entry, true);
    }

    /// Stores `entry`, raising `new` when `is_new` (the key was not live).
    pub(crate) fn store_entry(&mut self, hash: u64, mut entry: Entry, is_new: bool) {
        if is_new {
            let n = &self.hooks.notices;
            n.raise(super::notices::NEW, "new", entry.key());
        }
        if self.counters.lfu.is_on() {
            entry.lru = self.counters.lfu.initial(self.now);
        }
        self.counters.used_memory.fetch_add(entry.mem(), Relaxed);
        if entry.expire_at != 0 {
            self.shard.expires += 1;
        }
        // Every new list or sorted set passes here (pushes, STORE variants,
        // RENAME, COPY, RESTORE): a client blocked on its key may go on.
        if matches!(entry.kind(), Kind::List | Kind::ZSet | Kind::Stream) {
            self.ready.signal(entry.key());
        }
        let seed = self.seed;
        let e = self.shard.table.insert(table_hash(hash), entry, |e| {
            table_hash(hash_bytes(seed, e.key()))
        });
        if !self.shard.watched.is_empty() {
            // SAFETY: the bucket was just returned by `insert` on this table.
            let key = unsafe { e.as_ref() }.key();
            self.shard.watched.touch(key, true);
        }
    }

    /// Stores a copy of `key` and `value` with an absolute expiry (0 = none),
    /// replacing any entry with its key. An existing entry keeps its
    /// allocation when it is large enough, so overwriting a value with one
    /// of the same size allocates and frees nothing (and looks the key up once).
    pub(crate) fn put(&mut self, hash: u64, key: &[u8], value: &[u8], expire_at: u64) {
        let now = self.now;
        let replaced = self.update(hash, key, |e| {
            let was_stream = e.kind() == Kind::Stream;
            e.replace_value(value, expire_at);
            was_stream
        });
        if replaced == Some(true) {
            // A stream overwritten: its group readers are told.
            self.ready.signal(key);
        }
        if replaced.is_none() {
            // `update` found no live entry, and removed an expired one.
            self.insert_absent(hash, Entry::new(key, value, expire_at, now));
        }
    }

    /// Removes `key`; returns it if it was live (an expired entry is removed
    /// too, but reported absent).
    pub(crate) fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Entry> {
        let e = self
            .shard
            .table
            .remove_entry(table_hash(hash), same_key(key))?;
        self.forget(&e);
        if e.is_expired(self.now) {
            let n = &self.hooks.notices;
            n.raise(super::notices::EXPIRED, "expired", e.key());
            self.counters.expired_keys.fetch_add(1, Relaxed);
            return None;
        }
        Some(e)
    }

    /// Accounting for an entry that left the table, and WATCH's touch:
    /// every removal (DEL, overwrite, expiry, eviction, MIGRATE) comes here.
    pub(crate) fn forget(&mut self, e: &Entry) {
        self.counters.used_memory.fetch_sub(e.mem(), Relaxed);
        if e.expire_at != 0 {
            self.shard.expires -= 1;
        }
        if !self.shard.watched.is_empty() {
            self.shard.watched.touch(e.key(), false);
        }
        // A stream's group readers are told when it goes away.
        if e.kind() == Kind::Stream {
            self.ready.signal(e.key());
        }
    }

    /// Every entry in the shard, expired or not.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> + '_ {
        // SAFETY: the iterator borrows `self`, so the table outlives it and
        // cannot be modified while it runs.
        unsafe { self.shard.table.iter() }.map(|b| unsafe { &*b.as_ptr() })
    }

    /// Number of entries in the shard, expired or not.
    pub(crate) fn len(&self) -> usize {
        self.shard.table.len()
    }
}

/// A seeded 64-bit hash, wyhash-style: 128-bit multiply-fold per 8 bytes.
/// Fast on short keys and well mixed in every bit, which both the shard
/// choice (top bits) and hashbrown (middle bits) rely on.
pub(crate) fn hash_bytes(seed: u64, key: &[u8]) -> u64 {
    const P0: u64 = 0xa076_1d64_78bd_642f;
    const P1: u64 = 0xe703_7ed1_a0b4_28db;
    const P2: u64 = 0x8ebc_6af0_9c88_c6e3;
    #[inline]
    fn mum(a: u64, b: u64) -> u64 {
        let r = (a as u128) * (b as u128);
        (r as u64) ^ ((r >> 64) as u64)
    }
    let mut h = seed ^ P0 ^ (key.len() as u64).wrapping_mul(P1);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        h = mum(h ^ v, P1);
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    h = mum(h ^ u64::from_le_bytes(tail) ^ P2, P1 ^ (rest.len() as u64));
    mum(h, P2)
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
