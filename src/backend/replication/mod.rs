//! Replication between built-in nodes: a primary feeds every write to a
//! stream with byte offsets; a replica (`REPLICAOF host port`) takes a
//! snapshot of the primary once (a full sync), then applies the stream,
//! and after a short disconnect continues from its offset (a partial
//! resync) while the primary's backlog still holds it.
//!
//! ```text
//!  primary                                          replica
//!  command ─► effects ─► Feed (backlog, offsets)    link task (replica.rs)
//!                          │ read positions         PING, REPLCONF, PSYNC id off
//!                          ▼                          ▲
//!             sender (primary.rs) ── +FULLRESYNC id off, snapshot, stream ─►
//!                                 ◄─ REPLCONF ACK off ─── apply (apply.rs)
//! ```
//!
//! - `feed.rs` the backlog, the ids (PSYNC2's `replid`/`replid2`) and the
//!   replicas' read positions with their output limits;
//! - `effects.rs` what a write puts in the stream: the command itself when
//!   it is deterministic, its absolute effect otherwise (expiry as
//!   PEXPIREAT, random or time-dependent results as the keys' new state);
//! - `primary.rs` a replica's connection on the primary: PSYNC, the
//!   snapshot (taken shard by shard, `keyspace/replicated.rs`), the stream,
//!   the acknowledgements;
//! - `replica.rs` the replica's link to its primary, with retries;
//! - `apply.rs` running the primary's stream on the replica;
//! - `commands.rs` REPLICAOF, ROLE, REPLCONF, PSYNC, WAIT, INFO replication.
//!
//! Called by the dispatcher (after each write, around EXEC and scripts),
//! by the server loop (a connection that sent PSYNC becomes a replica's
//! sender) and by the expiry tick. Never touches the proxy.

mod apply;
pub(crate) mod commands;
pub(crate) mod effects;
pub(crate) mod feed;
mod primary;
mod replica;

use self::feed::Feed;
use crate::backend::node::Node;
use crate::backend::pubsub::mailbox::Limits;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::watch;

pub(crate) use primary::serve as serve_replica;
pub(crate) use replica::{run_links, start as start_link};

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
    fn with_feed(&self, f: impl FnOnce(&mut Feed)) {
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

/// Whether writes on `node` go to a stream now (it is a primary whose
/// backlog exists).
pub(crate) fn is_feeding(node: &Node) -> bool {
    node.store.hooks.feeding.load(Relaxed)
}

/// Puts `args` in the stream, after the removals the keyspace made on its
/// own since the last append (so a DEL of an expired key precedes the
/// command that found it gone).
pub(crate) fn emit(node: &Node, args: &[&[u8]]) {
    let mut bytes = Vec::new();
    crate::backend::keyspace::replicated::request(&mut bytes, args);
    node.repl.with_feed(|f| {
        push_removed(node, f);
        f.append(&bytes);
    });
}

/// Sends the DELs of keys the keyspace removed on its own (the expiry
/// tick calls this; every append does it first).
pub(crate) fn flush_removed(node: &Node) {
    if is_feeding(node) {
        node.repl.with_feed(|f| push_removed(node, f));
    }
}

fn push_removed(node: &Node, f: &mut Feed) {
    for key in node.store.hooks.take_removed() {
        let mut bytes = Vec::new();
        crate::backend::keyspace::replicated::request(&mut bytes, &[b"DEL", &key]);
        f.append(&bytes);
    }
}

/// Starts recording a transaction (EXEC, a script) when feeding.
pub(crate) fn begin_tx(node: &Node) {
    if is_feeding(node) {
        node.repl.with_feed(|f| {
            push_removed(node, f);
            f.begin_tx()
        });
    }
}

/// Ends it: its writes go out as one MULTI … EXEC.
pub(crate) fn end_tx(node: &Node) {
    if is_feeding(node) {
        node.repl.with_feed(|f| f.end_tx());
    }
}

/// Creates the backlog (the first replica attached): from now on writes
/// are fed. The caller holds the node's gate exclusively.
pub(crate) fn activate(node: &Node) {
    node.repl.with_feed(|f| f.active = true);
    node.store.hooks.feeding.store(true, Relaxed);
}
