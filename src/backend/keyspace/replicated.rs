//! What the keyspace does for replication: it logs the keys it removes on
//! its own (lazy and active expiry, eviction) so the primary can send their
//! DELs, it hides instead of deleting expired keys on a replica, and it
//! takes a full sync's snapshot shard by shard without stopping clients.
//!
//! The snapshot is copy-before-touch at shard granularity: when a sync
//! starts (with the node's gate held exclusively, so no command is half
//! done) every shard is marked pending; the first lock of a pending shard,
//! by the sync's own walk or by any client, serializes it before anything
//! can change it. Each shard is therefore captured as it was when the sync
//! started, and the writes after that point reach the replica through the
//! write stream. A client that locks a pending shard pays for serializing
//! that one shard (1/64 of the keyspace), never for the whole snapshot.
//!
//! Used by `store.rs` (the hooks in `lock_shard` and the expiry paths) and
//! by `backend::replication`. Never does I/O.

use super::dump;
use super::entry::Entry;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Replication's hooks into the keyspace.
pub(crate) struct Hooks {
    /// Set while writes are fed to a replication stream: removals the
    /// keyspace makes on its own are then logged in `removed`.
    pub(crate) feeding: AtomicBool,
    /// Set on a replica: an expired key reads as absent but stays until
    /// the primary's DEL, and no sweep or eviction removes anything.
    pub(crate) hide_expired: AtomicBool,
    /// Keys removed by expiry or eviction, not yet in the stream.
    removed: Mutex<Vec<Box<[u8]>>>,
    /// The snapshot of a full sync in progress.
    pub(crate) snapshot: Snapshot,
    /// Keyspace notifications the keyspace raises itself.
    pub(crate) notices: super::notices::Notices,
}

/// A poisoned lock here only ever guards a plain list: carry on.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Hooks {
    /// Hooks for a keyspace of `shards` shards.
    pub(crate) fn new(shards: usize) -> Hooks {
        Hooks {
            feeding: AtomicBool::new(false),
            hide_expired: AtomicBool::new(false),
            removed: Mutex::default(),
            snapshot: Snapshot::new(shards),
            notices: Default::default(),
        }
    }

    /// Logs `key` as removed by the keyspace itself (while feeding).
    pub(crate) fn removed(&self, key: &[u8]) {
        if self.feeding.load(Ordering::Relaxed) {
            lock(&self.removed).push(key.into());
        }
    }

    /// A key removed because its TTL passed: logged, and `expired` raised.
    pub(crate) fn expired(&self, key: &[u8]) {
        self.removed(key);
        self.notices.raise(super::notices::EXPIRED, "expired", key);
    }

    /// Takes the removals logged so far, oldest first.
    pub(crate) fn take_removed(&self) -> Vec<Box<[u8]>> {
        std::mem::take(&mut *lock(&self.removed))
    }

    /// Whether expired keys are hidden rather than removed (a replica).
    pub(crate) fn is_hiding(&self) -> bool {
        self.hide_expired.load(Ordering::Relaxed)
    }
}

/// A full sync's snapshot: which shards are still to be captured, and the
/// captured shards waiting to be sent.
pub(crate) struct Snapshot {
    active: AtomicBool,
    pending: Box<[AtomicBool]>,
    /// Captured shards, each a run of RESTORE requests; `left` counts the
    /// shards not yet captured.
    captured: Mutex<Captured>,
}

impl Snapshot {
    fn new(shards: usize) -> Snapshot {
        Snapshot {
            active: AtomicBool::new(false),
            pending: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            captured: Mutex::default(),
        }
    }
}

#[derive(Default)]
struct Captured {
    chunks: VecDeque<Vec<u8>>,
    left: usize,
}

impl Snapshot {
    /// Marks every shard pending, dropping what an abandoned snapshot
    /// left. The caller holds the node's gate exclusively, so this is one
    /// instant of the keyspace, and takes one snapshot at a time.
    pub(crate) fn begin(&self) {
        let mut c = lock(&self.captured);
        c.chunks.clear();
        c.left = self.pending.len();
        for p in &self.pending {
            p.store(true, Ordering::Relaxed);
        }
        self.active.store(true, Ordering::Release);
    }

    /// Abandons the snapshot (its replica left): nothing more is captured.
    pub(crate) fn cancel(&self) {
        self.active.store(false, Ordering::Release);
        let mut c = lock(&self.captured);
        c.chunks.clear();
        c.left = 0;
    }

    /// Whether shard `i` must be captured now (the caller holds its lock
    /// and then calls [`Snapshot::capture`] with its entries).
    pub(crate) fn wants(&self, i: usize) -> bool {
        self.active.load(Ordering::Acquire) && self.pending[i].swap(false, Ordering::AcqRel)
    }

    /// Captures a shard [`Snapshot::wants`] asked for.
    pub(crate) fn capture<'a>(&self, entries: impl Iterator<Item = &'a Entry>) {
        let mut chunk = Vec::new();
        for e in entries {
            restore_request(&mut chunk, e);
        }
        let mut c = lock(&self.captured);
        if !self.active.load(Ordering::Acquire) || c.left == 0 {
            return;
        }
        c.chunks.push_back(chunk);
        c.left -= 1;
        if c.left == 0 {
            self.active.store(false, Ordering::Release);
        }
    }

    /// The next captured shard; `None` once all are taken and sent.
    /// `Some(empty)` when the next one is not captured yet.
    pub(crate) fn next_chunk(&self) -> Option<Vec<u8>> {
        let mut c = lock(&self.captured);
        match c.chunks.pop_front() {
            Some(chunk) => Some(chunk),
            None if c.left == 0 => None,
            None => Some(Vec::new()),
        }
    }

    /// Whether shard `i` is still to be captured.
    pub(crate) fn is_pending(&self, i: usize) -> bool {
        self.pending[i].load(Ordering::Acquire)
    }
}

/// `RESTORE key expire_at payload REPLACE ABSTTL` for one entry, expired
/// or not (a replica hides it until the primary's DEL arrives).
pub(crate) fn restore_request(out: &mut Vec<u8>, e: &Entry) {
    let payload = dump::encode(e);
    let at = e.expire_at.to_string();
    let args: [&[u8]; 6] = [
        b"RESTORE",
        e.key(),
        at.as_bytes(),
        &payload,
        b"REPLACE",
        b"ABSTTL",
    ];
    request(out, &args);
}

/// Appends `args` as one RESP request.
pub(crate) fn request(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}
