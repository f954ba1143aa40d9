//! The dirty set: moving keys that clients wrote during a change's copy phase,
//! so catch-up and cutover re-sync them. Marked by `route.rs` (through
//! [`track_write`]) when a write's reply arrives; read and cleared by the
//! phases. Never does I/O.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use dashmap::DashMap;
use tokio::sync::{oneshot, Notify};

/// Moving keys written during the copy phase. A key's generation changes on
/// every mark, so a catch-up round only forgets a key if no write to it was
/// answered while the round copied it.
#[derive(Default)]
pub(crate) struct Dirty {
    keys: DashMap<Bytes, u64>,
    generation: AtomicU64,
    /// Tracked writes sent but not yet answered.
    in_flight: AtomicUsize,
    /// Woken when `in_flight` drops to zero (the cutover waits on it).
    idle: Notify,
}

impl Dirty {
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Forgets every key (the cutover has re-synced them all).
    pub(crate) fn clear(&self) {
        self.keys.clear();
    }

    /// Every dirty key with its generation, as of now.
    pub(crate) fn snapshot(&self) -> Vec<(Bytes, u64)> {
        self.keys
            .iter()
            .map(|e| (e.key().clone(), *e.value()))
            .collect()
    }

    /// Forgets `key` once re-synced: only if it is still at generation
    /// `unless_rewritten` when one is given (no write was answered meanwhile).
    pub(crate) fn forget(&self, key: &Bytes, unless_rewritten: Option<u64>) {
        match unless_rewritten {
            Some(g) => {
                self.keys.remove_if(key, |_, now| *now == g);
            }
            None => {
                self.keys.remove(key);
            }
        }
    }

    pub(crate) fn mark(&self, key: Bytes) {
        let g = self.generation.fetch_add(1, Ordering::AcqRel);
        self.keys.insert(key, g);
    }

    /// Waits until every tracked write has been answered (and marked).
    pub(crate) async fn settled(&self) {
        loop {
            let woken = self.idle.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                return;
            }
            woken.await;
        }
    }
}

/// Wraps the reply of a write on moving `keys`: once the reply arrives (the
/// write has executed at the old owner) the keys are marked dirty. Runs in its
/// own task so a slow client cannot delay the mark.
pub(crate) fn track_write(
    dirty: &Arc<Dirty>,
    keys: Vec<Bytes>,
    rx: oneshot::Receiver<Bytes>,
) -> oneshot::Receiver<Bytes> {
    dirty.in_flight.fetch_add(1, Ordering::SeqCst);
    let dirty = dirty.clone();
    let (tx, out) = oneshot::channel();
    tokio::spawn(async move {
        let r = rx.await;
        for k in keys {
            dirty.mark(k);
        }
        if dirty.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            dirty.idle.notify_waiters();
        }
        if let Ok(r) = r {
            let _ = tx.send(r);
        }
    });
    out
}
