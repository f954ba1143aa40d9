//! WATCH's bookkeeping: which clients watch which keys, and the flag that
//! tells a client one of them was modified.
//!
//! Each store shard keeps a [`Watched`] map (key → the clients watching it),
//! guarded by the shard's own lock, so a modification and the registration
//! of a watch on the same key are ordered by that lock. A key is *touched*
//! (every watcher's flag raised) by the store itself whenever an entry
//! leaves or enters the table (DEL, overwrite, expiry, eviction, FLUSHALL,
//! RESTORE, MIGRATE's delete, RENAME…), and by the dispatcher after every
//! write command for the keys it names (in-place changes: INCR, LPUSH…).
//! Each client owns a [`ClientWatch`]: its flag and the keys it watches, so
//! UNWATCH, EXEC, DISCARD, RESET and disconnect can remove exactly its
//! records. Never allocates for a client that watches nothing, and never
//! holds a shard lock longer than one key's lookup.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use super::store::Store;
use super::watched::Watcher;
use crate::backend::error::CmdError;

/// Bytes of watched keys (plus [`KEY_OVERHEAD`] each) one client may hold.
/// One WATCH is already bounded by the query buffer; this bounds a client
/// that keeps adding keys with more WATCH calls.
pub(crate) const MAX_WATCHED_BYTES: usize = 64 * 1024 * 1024;
/// What one watched key costs beyond its bytes: the two records and the
/// map slot.
pub(crate) const KEY_OVERHEAD: usize = 96;

/// The keys one client watches and the flag raised when one changes.
#[derive(Debug, Default)]
pub(crate) struct ClientWatch {
    flag: Arc<AtomicBool>,
    keys: Vec<(u64, Arc<[u8]>)>,
    bytes: usize,
}

impl ClientWatch {
    /// Watches `key` (once, however often it is named).
    pub(crate) fn watch(&mut self, store: &Store, key: &[u8], now: u64) -> Result<(), CmdError> {
        let h = store.hash(key);
        let mut s = store.lock(h, now);
        let expired = s.is_expired_in_table(h, key);
        let shard = &mut s.shard;
        if let Some(ws) = shard.watched.0.get(key) {
            if ws.iter().any(|w| Arc::ptr_eq(&w.flag, &self.flag)) {
                return Ok(());
            }
        }
        let cost = key.len() + KEY_OVERHEAD;
        if self.bytes + cost > MAX_WATCHED_BYTES {
            return Err(CmdError::err(format!(
                "too many watched keys: a client may watch at most {MAX_WATCHED_BYTES} bytes of keys; UNWATCH first"
            )));
        }
        let key: Arc<[u8]> = match shard.watched.0.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Arc::from(key),
        };
        shard
            .watched
            .0
            .entry(key.clone())
            .or_default()
            .push(Watcher {
                flag: self.flag.clone(),
                expired,
            });
        // Raised under the shard lock: a writer that takes this lock after
        // us sees a non-zero count (see `Store::touch`).
        s.counters.watching.fetch_add(1, Relaxed);
        self.bytes += cost;
        self.keys.push((h, key));
        Ok(())
    }

    /// Whether EXEC must fail: a watched key was modified, or one that was
    /// alive at WATCH has expired since (even if not yet removed).
    pub(crate) fn is_dirty(&self, store: &Store, now: u64) -> bool {
        if self.flag.load(Relaxed) {
            return true;
        }
        self.keys.iter().any(|(h, key)| {
            let s = store.lock(*h, now);
            let was_expired = s
                .shard
                .watched
                .0
                .get(&key[..])
                .and_then(|ws| ws.iter().find(|w| Arc::ptr_eq(&w.flag, &self.flag)))
                .is_some_and(|w| w.expired);
            !was_expired && s.is_expired_in_table(*h, key)
        })
    }

    /// Forgets every watched key (UNWATCH, EXEC, DISCARD, RESET, disconnect).
    pub(crate) fn unwatch_all(&mut self, store: &Store) {
        for (h, key) in self.keys.drain(..) {
            let mut s = store.lock(h, 0);
            let map = &mut s.shard.watched.0;
            if let Some(ws) = map.get_mut(&key[..]) {
                ws.retain(|w| !Arc::ptr_eq(&w.flag, &self.flag));
                if ws.is_empty() {
                    map.remove(&key[..]);
                }
            }
            s.counters.watching.fetch_sub(1, Relaxed);
        }
        self.bytes = 0;
        // No record is left, so no writer can raise the flag again.
        self.flag.store(false, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(store: &Store, key: &[u8], expire_at: u64, now: u64) {
        let h = store.hash(key);
        store.lock(h, now).put(h, key, b"v", expire_at);
    }

    #[test]
    fn removal_insertion_and_flush_raise_the_flag_and_unwatch_forgets() {
        let store = Store::new();
        let mut w = ClientWatch::default();
        put(&store, b"k", 0, 1000);
        w.watch(&store, b"k", 1000).unwrap();
        w.watch(&store, b"k", 1000).unwrap();
        assert_eq!(store.counters.watching.load(Relaxed), 1, "watched once");
        assert!(!w.is_dirty(&store, 1000));
        put(&store, b"other", 0, 1000);
        assert!(!w.is_dirty(&store, 1000), "another key");
        let h = store.hash(b"k");
        store.lock(h, 1000).remove(h, b"k");
        assert!(w.is_dirty(&store, 1000), "removed");
        w.unwatch_all(&store);
        assert_eq!(store.counters.watching.load(Relaxed), 0);
        assert!(!w.is_dirty(&store, 1000));
        w.watch(&store, b"k", 1000).unwrap();
        put(&store, b"k", 0, 1000);
        assert!(w.is_dirty(&store, 1000), "created");
        w.unwatch_all(&store);
        w.watch(&store, b"k", 1000).unwrap();
        drop(store.flush());
        assert!(w.is_dirty(&store, 1000), "flushed");
        w.unwatch_all(&store);
        w.watch(&store, b"absent", 1000).unwrap();
        drop(store.flush());
        assert!(
            !w.is_dirty(&store, 1000),
            "FLUSHALL of a missing key is no change"
        );
    }

    #[test]
    fn expiry_follows_redis_7_rules() {
        let store = Store::new();
        let mut w = ClientWatch::default();
        // Alive at WATCH, expired since: dirty even before it is reclaimed.
        put(&store, b"k", 2000, 1000);
        w.watch(&store, b"k", 1000).unwrap();
        assert!(!w.is_dirty(&store, 1500));
        assert!(w.is_dirty(&store, 2500));
        w.unwatch_all(&store);
        // Already expired at WATCH: its lazy removal is no change.
        w.watch(&store, b"k", 3000).unwrap();
        let h = store.hash(b"k");
        assert!(store.lock(h, 3000).get(h, b"k").is_none(), "reclaimed");
        assert!(!w.is_dirty(&store, 3000));
        // …but a new value afterwards is.
        put(&store, b"k", 0, 3000);
        assert!(w.is_dirty(&store, 3000));
    }
}
