//! The state every connection of one node shares ([`Node`]): the
//! keyspace, the run-time settings, the counters, the blocked clients, the
//! pub/sub hub, MIGRATE's connection cache and the gate that makes EXEC
//! atomic.
//!
//! Built by `server/` when the node starts, read by every command through
//! its `Ctx`. Knows nothing of commands or sockets, so that everything
//! below it (keyspace, values, settings) can be tested without them.

use crate::backend::blocking::Blocking;
use crate::backend::config::Settings;
use crate::backend::keyspace::clock::now_ms;
use crate::backend::keyspace::evict::OutOfMemory;
use crate::backend::keyspace::store::Store;
use crate::backend::pubsub::Hub;
use crate::backend::value::Thresholds;
use crate::backend::NodeConfig;
use crate::client::Conn;
use crate::resp::Limits;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

/// The version reported by INFO and HELLO: the Redis release whose commands
/// and replies the node reproduces.
pub(crate) const REDIS_VERSION: &str = "7.0.0";

/// The built-in node's counters, shown by its INFO (the proxy keeps its own,
/// `proxy::Stats`).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Commands executed (INFO `total_commands_processed`).
    pub(crate) total_commands: AtomicU64,
    /// Connections ever accepted.
    pub(crate) total_connections: AtomicU64,
    /// Connections open now.
    pub(crate) connected_clients: AtomicUsize,
    /// Connections waiting in a blocking command now.
    pub(crate) blocked_clients: AtomicUsize,
    /// Those of them with a timeout (INFO `clients_in_timeout_table`).
    pub(crate) timeout_clients: AtomicUsize,
    /// Writes since the node started (INFO `rdb_changes_since_last_save`:
    /// nothing is ever saved): one per write command that succeeded, except
    /// SETBIT and BITFIELD, which count only a change, as Redis does.
    pub(crate) dirty: AtomicU64,
}

/// State shared by every connection of one node.
pub(crate) struct Node {
    /// The keyspace.
    pub(crate) store: Store,
    /// Run-time parameters (CONFIG GET/SET), `maxmemory` among them.
    pub(crate) settings: Settings,
    /// Request bounds; `max_bulk_len` is superseded by the live
    /// `proto-max-bulk-len` in `settings`.
    pub(crate) limits: Limits,
    /// Connection and command counters.
    pub(crate) stats: Stats,
    /// Serializes MIGRATEs and holds their target connections. An async
    /// mutex because it is held across network round trips.
    pub(crate) migrate: tokio::sync::Mutex<MigrateState>,
    /// The listening port (INFO `tcp_port`).
    pub(crate) port: u16,
    /// Start time, ms since the epoch.
    pub(crate) started_ms: u64,
    /// A random id for this run (INFO `run_id`).
    pub(crate) run_id: String,
    /// `--requirepass`'s SHA-256 (see `commands::connection`).
    pub(crate) requirepass: Option<[u8; 32]>,
    /// INFO `instantaneous_ops_per_sec`.
    pub(crate) ops: crate::resp::info::OpsMeter,
    /// INFO `used_memory_peak`: raised by INFO and by the expiry tick, as
    /// Redis raises it in its cron.
    pub(crate) memory_peak: AtomicU64,
    /// Clients blocked in BLPOP and friends.
    pub(crate) blocking: Blocking,
    /// Pub/sub subscriptions; shared with each subscriber, which leaves
    /// them when dropped.
    pub(crate) pubsub: Arc<Hub>,
    pub(crate) next_client_id: AtomicU64,
    /// Makes EXEC atomic: every command, expiry sweep and MIGRATE step
    /// holds it shared while it touches the store ([`Node::shared`]); EXEC
    /// holds it exclusively ([`Node::exclusive`]). A `std` lock, held only
    /// by synchronous code, never across an `.await`, and never taken
    /// twice by one thread. Uncontended until a transaction runs: one
    /// atomic add and subtract per command. Rust's lock lets a waiting
    /// EXEC in before new readers, so transactions are not starved.
    gate: RwLock<()>,
    /// The Lua state and script cache (EVAL, FUNCTION).
    pub(crate) scripting: crate::backend::scripting::Scripting,
    /// Replication: the stream and backlog, the replicas, the link to a
    /// primary.
    pub(crate) repl: crate::backend::replication::state::Repl,
}

impl Node {
    /// Holds the gate shared: no transaction runs until the guard drops.
    pub(crate) fn shared(&self) -> RwLockReadGuard<'_, ()> {
        // Poisoned only if an EXEC panicked; the store stays consistent
        // (every mutation is one table call), so carry on.
        self.gate.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds the gate exclusively: nothing else touches the store until
    /// the guard drops.
    pub(crate) fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write().unwrap_or_else(|e| e.into_inner())
    }

    /// `busy-reply-threshold` (alias `lua-time-limit`) in ms: how long a
    /// script runs before other clients are answered `-BUSY`.
    pub(crate) fn busy_threshold_ms(&self) -> u64 {
        self.settings
            .int("busy-reply-threshold")
            .map_or(5_000, |v| v.max(0) as u64)
    }

    /// Holds the gate shared unless something holds it exclusively now.
    /// Holds the gate exclusively if nothing holds it now.
    pub(crate) fn try_exclusive(&self) -> Option<RwLockWriteGuard<'_, ()>> {
        match self.gate.try_write() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    pub(crate) fn try_shared(&self) -> Option<RwLockReadGuard<'_, ()>> {
        match self.gate.try_read() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The current encoding thresholds, read from the live CONFIG
    /// parameters (`hash-max-listpack-entries` …); a parameter that cannot
    /// be read keeps Redis's default.
    pub(crate) fn thresholds(&self) -> Thresholds {
        let d = Thresholds::default();
        let s = &self.settings;
        let size = |name: &str, default: usize| {
            s.int(name)
                .and_then(|v| usize::try_from(v).ok())
                .unwrap_or(default)
        };
        Thresholds {
            hash_entries: size("hash-max-listpack-entries", d.hash_entries),
            hash_value: size("hash-max-listpack-value", d.hash_value),
            list_size: s.int("list-max-listpack-size").unwrap_or(d.list_size),
            set_intset: size("set-max-intset-entries", d.set_intset),
            set_entries: size("set-max-listpack-entries", d.set_entries),
            set_value: size("set-max-listpack-value", d.set_value),
            zset_entries: size("zset-max-listpack-entries", d.zset_entries),
            zset_value: size("zset-max-listpack-value", d.zset_value),
            stream_node_bytes: size("stream-node-max-bytes", d.stream_node_bytes),
            stream_node_entries: size("stream-node-max-entries", d.stream_node_entries),
        }
    }

    pub(crate) fn new(config: &NodeConfig, port: u16) -> Node {
        let store = Store::new();
        let run_id = format!(
            "{:016x}{:016x}{:08x}",
            store.hash(b"run_id"),
            store.hash(b"id2"),
            std::process::id()
        );
        Node {
            store,
            settings: Settings::new(config.maxmemory, config.limits.max_bulk_len, port)
                .with_masterauth(config.masterauth.as_ref()),
            limits: config.limits,
            stats: Stats::default(),
            migrate: tokio::sync::Mutex::new(MigrateState::default()),
            port,
            started_ms: now_ms(),
            run_id,
            requirepass: config.requirepass,
            ops: Default::default(),
            memory_peak: AtomicU64::new(0),
            blocking: Blocking::default(),
            pubsub: Arc::default(),
            next_client_id: AtomicU64::new(1),
            gate: RwLock::new(()),
            scripting: Default::default(),
            repl: Default::default(),
        }
    }
}

impl Node {
    /// Makes room under `maxmemory` by the node's policy (the dispatcher
    /// calls this before commands that may grow memory).
    pub(crate) fn make_room(&self, now: u64) -> Result<(), OutOfMemory> {
        let s = &self.settings;
        self.store.evict_to_fit(
            s.maxmemory.load(Relaxed),
            s.policy(),
            s.samples.load(Relaxed) as usize,
            now,
        )
    }

    /// Copies the LFU parameters into the store after CONFIG SET.
    pub(crate) fn sync_lfu(&self) {
        let (s, lfu) = (&self.settings, &self.store.counters.lfu);
        lfu.enabled.store(s.policy().is_lfu(), Relaxed);
        lfu.log_factor
            .store(s.lfu_log_factor.load(Relaxed) as u32, Relaxed);
        lfu.decay_time
            .store(s.lfu_decay_time.load(Relaxed) as u32, Relaxed);
    }
}

/// Cached connections to MIGRATE targets; lives behind the node's MIGRATE
/// mutex, which is what serializes MIGRATEs.
#[derive(Default)]
pub(crate) struct MigrateState {
    pub(crate) conns: HashMap<(String, u16), (Conn, Instant)>,
}
