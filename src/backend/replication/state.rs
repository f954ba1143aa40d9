//! The replication state a node holds ([`Repl`]): the stream's feed, the
//! link to a primary, the counters and the cached parameters. Kept apart
//! from the functions that act on a whole node (`mod.rs`), so the node's
//! state can hold it without a circle.

use super::feed::Feed;
use crate::backend::pubsub::mailbox::Limits;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::watch;

/// The replica's link to its primary, as ROLE and INFO show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkState {
    /// To be connected (after REPLICAOF, or waiting to retry).
    Connect,
    /// Connecting and handshaking.
    Connecting,
    /// Receiving the snapshot.
    Sync,
    /// Applying the stream.
    Connected,
}

impl LinkState {
    pub(crate) fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// Where a replica replicates from, and how its link is doing.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) state: LinkState,
    /// The last byte read from the primary.
    pub(crate) last_io: Instant,
    /// Stream bytes read (`slave_read_repl_offset`).
    pub(crate) read_offset: u64,
    /// Since when the link has been down.
    pub(crate) down_since: Option<Instant>,
}

/// The replication state of one node.
pub(crate) struct Repl {
    /// A std mutex: appends copy bytes and never await.
    feed: Mutex<Feed>,
    /// The stream's end offset, for the senders to wait on.
    pub(crate) written: watch::Sender<u64>,
    /// Bumped on every acknowledgement, for WAIT.
    pub(crate) acked: watch::Sender<u64>,
    /// `Some` on a replica.
    link: Mutex<Option<Link>>,
    /// Bumped by every REPLICAOF: a link task of an older generation stops.
    pub(crate) generation: AtomicU64,
    /// One full sync at a time (the snapshot is one per node); async, as
    /// it is held for the whole transfer.
    pub(crate) full_sync: tokio::sync::Mutex<()>,
    next_reader: AtomicU64,
    /// INFO stats.
    pub(crate) sync_full: AtomicU64,
    pub(crate) sync_partial_ok: AtomicU64,
    pub(crate) sync_partial_err: AtomicU64,
    /// Cached from CONFIG: `repl-backlog-size`, and the replica class of
    /// `client-output-buffer-limit` (hard, soft, seconds).
    backlog_size: AtomicU64,
    limits: [AtomicU64; 3],
    /// Set on a replica (reads see it without a lock).
    is_replica: AtomicBool,
    /// Where REPLICAOF asks for a link task (`replica::run_links`).
    starts: Mutex<Option<tokio::sync::mpsc::UnboundedSender<u64>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Guarded state is replaced whole or appended to: never half changed.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Default for Repl {
    fn default() -> Self {
        Repl {
            feed: Mutex::default(),
            written: watch::Sender::new(0),
            acked: watch::Sender::new(0),
            link: Mutex::new(None),
            generation: AtomicU64::new(0),
            full_sync: tokio::sync::Mutex::new(()),
            next_reader: AtomicU64::new(1),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            backlog_size: AtomicU64::new(1024 * 1024),
            limits: [256 << 20, 64 << 20, 60].map(AtomicU64::new),
            is_replica: AtomicBool::new(false),
            starts: Mutex::new(None),
        }
    }
}

impl Repl {
    pub(crate) fn feed(&self) -> MutexGuard<'_, Feed> {
        lock(&self.feed)
    }

    pub(crate) fn starts(&self) -> MutexGuard<'_, Option<tokio::sync::mpsc::UnboundedSender<u64>>> {
        lock(&self.starts)
    }

    pub(crate) fn link(&self) -> MutexGuard<'_, Option<Link>> {
        lock(&self.link)
    }

    /// Whether this node replicates from a primary.
    pub(crate) fn is_replica(&self) -> bool {
        self.is_replica.load(Relaxed)
    }

    pub(crate) fn set_replica(&self, on: bool) {
        self.is_replica.store(on, Relaxed);
    }

    pub(crate) fn next_reader_id(&self) -> u64 {
        self.next_reader.fetch_add(1, Relaxed)
    }

    /// Re-reads the parameters the stream acts on (after CONFIG SET).
    pub(crate) fn refresh(&self, settings: &crate::backend::config::Settings) {
        let size = settings.int("repl-backlog-size").unwrap_or(1 << 20).max(1);
        self.backlog_size.store(size as u64, Relaxed);
        let text = settings
            .text("client-output-buffer-limit")
            .unwrap_or_default();
        let l = crate::backend::pubsub::limits::replica(&text);
        for (a, v) in self.limits.iter().zip([l.hard, l.soft, l.soft_secs]) {
            a.store(v, Relaxed);
        }
    }

    pub(crate) fn backlog_size(&self) -> usize {
        self.backlog_size.load(Relaxed) as usize
    }

    fn limits(&self) -> Limits {
        let [hard, soft, soft_secs] = &self.limits;
        Limits {
            hard: hard.load(Relaxed),
            soft: soft.load(Relaxed),
            soft_secs: soft_secs.load(Relaxed),
        }
    }

    /// Appends to the stream with the feed locked, then wakes the senders.
    pub(super) fn with_feed(&self, f: impl FnOnce(&mut Feed)) {
        let end = {
            let mut feed = self.feed();
            f(&mut feed);
            feed.trim(self.backlog_size(), &self.limits(), Instant::now());
            feed.end()
        };
        self.written
            .send_if_modified(|e| std::mem::replace(e, end) != end);
    }

    /// Appends raw stream bytes (a replica keeps its primary's stream as it
    /// came, so its own replicas and a promotion see the same offsets).
    pub(crate) fn append_raw(&self, bytes: &[u8]) {
        self.with_feed(|f| f.append(bytes));
    }
}

/// A WAIT that has to wait: for `replicas` acknowledgements of `offset`
/// (`commands::wait_for` does the waiting).
#[derive(Debug)]
pub(crate) struct WaitFor {
    pub(crate) offset: u64,
    pub(crate) replicas: usize,
    pub(crate) timeout_ms: u64,
}
