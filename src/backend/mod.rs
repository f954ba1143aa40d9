//! The built-in cache node: an in-memory RESP server a Redis user
//! recognises (strings, hashes, lists, sets and sorted sets), run as `shardis node --port P`, one OS process
//! per node behind the proxy.
//!
//! Layout, bottom up (a folder uses only those above it in this list):
//!
//! - `error` the one place errors become `-ERR` lines;
//! - `value/` the collection types and their encodings (hash, list, set,
//!   sorted set);
//! - `keyspace/` the sharded keyspace: entries, lazy and active expiry,
//!   memory accounting and eviction, SCAN cursors, WATCH's records, DUMP's
//!   format, the keys made ready for blocked clients;
//! - `config/` CONFIG parameters; `pubsub/` subscriptions, delivery,
//!   subscriber output limits; `blocking` the registry of clients blocked
//!   in BLPOP and friends;
//! - `node` the state every connection shares ([`node::Node`]): the above, the
//!   counters, the transaction gate, MIGRATE's connection cache;
//! - `commands/` one file per command family, the table and the dispatcher;
//! - `replication/` the stream of writes to replicas, the link to a
//!   primary, REPLICAOF, ROLE, WAIT;
//! - `server/` the accept loop and each client's socket loop: its query
//!   buffer, the wait of a blocked request, writing replies and messages.
//!
//! Uses only `resp` and `glob` of our modules; never talks to the proxy or the ring.

#[doc(hidden)]
pub mod bench;
mod blocking;
mod commands;
mod config;
mod error;
mod keyspace;
mod node;
mod notify;
mod pubsub;
mod replication;
mod scripting;
mod server;
mod value;

use crate::resp::Limits;
use std::future::Future;

/// Settings of one node.
#[derive(Debug, Clone, Default)]
pub struct NodeConfig {
    /// Replicate from this primary (`host`, `port`) from the start, as
    /// `REPLICAOF host port` would.
    pub replicaof: Option<(String, u16)>,
    /// Memory limit in bytes for keys, values and their overhead; 0 =
    /// unlimited. Above it, keys are evicted by `maxmemory-policy`
    /// (allkeys-lru unless CONFIG SET changes it).
    pub maxmemory: u64,
    /// Bounds on client requests.
    pub limits: Limits,
    /// `--requirepass`, as its SHA-256: clients must `AUTH` first (as the
    /// `default` user). `None`: no password, as Redis without one.
    pub requirepass: Option<[u8; 32]>,
    /// `--masterauth` (and `--masteruser`): what a replica sends its
    /// primary (`AUTH`) before the handshake, as Redis's `masterauth`.
    pub masterauth: Option<MasterAuth>,
}

/// A replica's credentials towards its primary; `Debug` hides the password.
#[derive(Clone, Default)]
pub struct MasterAuth {
    pub user: Option<String>,
    pub password: String,
}

impl std::fmt::Debug for MasterAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MasterAuth({:?}, <redacted>)", self.user)
    }
}

impl NodeConfig {
    /// The digest kept for `--requirepass password` (the text itself is not kept).
    pub fn password_digest(password: &str) -> [u8; 32] {
        NodeConfig::password_digest_bytes(password.as_bytes())
    }

    pub(crate) fn password_digest_bytes(password: &[u8]) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(password).into()
    }
}

/// Serves a node on `listener` until `shutdown` completes; see
/// [`server::run`]. Works on any tokio runtime.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: NodeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    server::run(listener, config, shutdown).await
}
