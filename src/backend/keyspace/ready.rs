//! The keys made ready for blocked clients: a key created as a list or
//! sorted set while some client waits in BLPOP and friends is recorded
//! here by the store; the blocking registry (`backend::blocking`) serves
//! its waiters after the command that created it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};

/// Keys that became a list or sorted set while some client waited.
/// Written under a store shard lock, so it is a leaf lock of its own.
#[derive(Default)]
pub(crate) struct ReadyKeys {
    /// Clients registered or about to register. SeqCst pairs with the
    /// registering client: it counts itself before its last look at its
    /// keys, so a write after that look sees the count and records the key.
    pub(crate) waiting: AtomicUsize,
    /// Whether `keys` may be non-empty: the one load per command when
    /// nobody blocks.
    pending: AtomicBool,
    /// `std::sync::Mutex`: held for a push or a swap, never across `.await`.
    keys: Mutex<Vec<Box<[u8]>>>,
}

impl ReadyKeys {
    /// Called by the store when `key` was created as a list or sorted set.
    #[inline]
    pub(crate) fn signal(&self, key: &[u8]) {
        if self.waiting.load(SeqCst) != 0 {
            self.record(key);
        }
    }

    #[cold]
    fn record(&self, key: &[u8]) {
        lock(&self.keys).push(key.into());
        self.pending.store(true, SeqCst);
    }

    /// Whether some key may be ready: check after every command.
    #[inline]
    pub(crate) fn is_pending(&self) -> bool {
        self.pending.load(SeqCst)
    }

    /// Takes the keys recorded so far.
    pub(crate) fn take(&self) -> Vec<Box<[u8]>> {
        let mut keys = lock(&self.keys);
        self.pending.store(false, SeqCst);
        std::mem::take(&mut *keys)
    }
}

/// A panic while holding the lock leaves the list consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
