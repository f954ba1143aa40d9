//! What the other clients (CLIENT LIST, KILL) and the drain see of one
//! client, and how its replies are sent (CLIENT REPLY): data each session
//! publishes and anyone reads. Never reaches a socket.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;

use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::policy::TABLE;
use crate::resp::eq_ignore_case;

/// What the other clients (CLIENT LIST, KILL) and the drain see of one
/// client. Written by its session only, read by anyone.
pub(crate) struct ClientEntry {
    pub(crate) id: u64,
    pub(crate) peer: String,
    pub(crate) local: String,
    /// The socket's descriptor, as CLIENT LIST shows it.
    pub(crate) fd: i64,
    pub(crate) budget: Arc<ReplyBudget>,
    /// Blocking commands waiting on a node (shared with the session's state).
    pub(crate) blocked: Arc<AtomicUsize>,
    /// Of those, the ones the node has begun (it answered the `CLIENT ID`
    /// sent just before each): CLIENT LIST's `b` flag and INFO's
    /// `blocked_clients`, so a client that sees itself counted blocked knows
    /// the node holds its command.
    pub(crate) blocked_at_node: Arc<AtomicUsize>,
    pub(crate) connected: Instant,
    /// A std mutex: written on SETNAME / HELLO SETNAME / RESET only.
    pub(crate) name: Mutex<Option<Bytes>>,
    /// Milliseconds after `connected` of the last request.
    pub(crate) last_ms: AtomicU64,
    /// The last command's index in the table; `u32::MAX`: none yet.
    pub(crate) cmd: AtomicU32,
    /// Commands queued by MULTI; -1 outside a transaction.
    pub(crate) multi: AtomicI64,
    /// Bytes in its query buffer.
    pub(crate) qbuf: AtomicUsize,
    pub(crate) proto: AtomicU8,
    pub(crate) monitor: AtomicBool,
    pub(crate) killed: AtomicBool,
    /// Channels, patterns and shard channels subscribed (set by whatever
    /// serves SUBSCRIBE for the client); any makes the client type `pubsub`.
    pub(crate) subscriptions: [AtomicUsize; 3],
    /// Where its latest blocking command waits, for CLIENT UNBLOCK (set
    /// and cleared by `blocking.rs`).
    pub(crate) blocked_on: Mutex<Option<BlockedOn>>,
    /// Its blocking pop the proxy itself waits for (keys on several nodes,
    /// `blocking_multi.rs`): a token and where CLIENT UNBLOCK sends why.
    pub(crate) waiting_here: Mutex<Option<(u64, tokio::sync::oneshot::Sender<Unblock>)>>,
}

/// How CLIENT UNBLOCK ends a wait: as its timeout would, or with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unblock {
    Timeout,
    Error,
}

/// A blocking command waiting on a node: the node, and the id the node
/// gave the pinned connection it waits on (known once `CLIENT ID`, sent
/// just before the command, is answered).
pub(crate) struct BlockedOn {
    /// Tells this command from a later one of the same client.
    pub(crate) token: u64,
    pub(crate) node: Arc<crate::proxy::upstream::topology::Node>,
    pub(crate) node_id: tokio::sync::watch::Receiver<Option<u64>>,
}

impl ClientEntry {
    pub(crate) fn new(
        id: u64,
        peer: String,
        local: String,
        fd: i64,
        budget: Arc<ReplyBudget>,
    ) -> Self {
        ClientEntry {
            id,
            peer,
            local,
            fd,
            budget,
            blocked: Default::default(),
            blocked_at_node: Default::default(),
            connected: Instant::now(),
            name: Mutex::new(None),
            last_ms: AtomicU64::new(0),
            cmd: AtomicU32::new(u32::MAX),
            multi: AtomicI64::new(-1),
            qbuf: AtomicUsize::new(0),
            proto: AtomicU8::new(2),
            monitor: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            subscriptions: Default::default(),
            blocked_on: Mutex::new(None),
            waiting_here: Mutex::new(None),
        }
    }

    /// True once CLIENT KILL chose this client: its session ends at once.
    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Relaxed)
    }

    pub(crate) fn set_name(&self, name: Option<Bytes>) {
        *self.name.lock().unwrap_or_else(|e| e.into_inner()) = name;
    }

    pub(crate) fn set_monitor(&self, on: bool) {
        self.monitor.store(on, Relaxed);
    }

    pub(super) fn is_pubsub(&self) -> bool {
        self.subscriptions.iter().any(|n| n.load(Relaxed) > 0)
    }

    /// Its type for the TYPE filters: a monitor counts as `normal`, as in Redis.
    pub(super) fn is_type(&self, t: &[u8]) -> bool {
        if eq_ignore_case(t, b"pubsub") {
            self.is_pubsub()
        } else if eq_ignore_case(t, b"normal") {
            !self.is_pubsub()
        } else {
            false // master, replica, slave: the proxy has none
        }
    }

    pub(super) fn age_secs(&self) -> u64 {
        self.connected.elapsed().as_secs()
    }

    /// Its CLIENT LIST line, in redis-server 7.0's field order. `cmd`
    /// overrides the last command (the client listing itself is running
    /// `client|list` right now).
    pub(super) fn line(&self, cmd: Option<&str>) -> String {
        let name = self.name.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let name = name.as_deref().map(String::from_utf8_lossy);
        let age = self.connected.elapsed();
        let idle = age.as_millis() as u64 - self.last_ms.load(Relaxed).min(age.as_millis() as u64);
        let mut flags = String::new();
        if self.monitor.load(Relaxed) {
            flags.push('O');
        }
        if self.is_pubsub() {
            flags.push('P');
        }
        let multi = self.multi.load(Relaxed);
        if multi >= 0 {
            flags.push('x');
        }
        if self.blocked_at_node.load(Relaxed) > 0 {
            flags.push('b');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let last = self.cmd.load(Relaxed) as usize;
        let cmd = cmd.unwrap_or(TABLE.get(last).map_or("NULL", |s| s.name));
        let [sub, psub, ssub] = &self.subscriptions;
        let qbuf = self.qbuf.load(Relaxed);
        let omem = self.budget.owed();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db=0 \
             sub={} psub={} ssub={} multi={multi} qbuf={qbuf} qbuf-free=0 argv-mem=0 \
             multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={omem} tot-mem={} events=r{} \
             cmd={cmd} user=default redir=-1 resp={}\n",
            self.id,
            self.peer,
            self.local,
            self.fd,
            name.unwrap_or_default(),
            age.as_secs(),
            idle / 1000,
            sub.load(Relaxed),
            psub.load(Relaxed),
            ssub.load(Relaxed),
            qbuf + omem,
            if omem > 0 { "w" } else { "" },
            self.proto.load(Relaxed),
        )
    }
}

/// How this client's replies are sent (CLIENT REPLY).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ReplyMode {
    #[default]
    On,
    /// No reply at all until CLIENT REPLY ON.
    Off,
    /// CLIENT REPLY SKIP was just run: the next command's reply is dropped.
    SkipNext,
    /// This command's reply is dropped.
    Skip,
}
