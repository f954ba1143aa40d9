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
//! - `node` the state every connection shares ([`Node`]): the above, the
//!   counters, the transaction gate, MIGRATE's connection cache;
//! - `commands/` one file per command family, the table and the dispatcher;
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
mod pubsub;
mod server;
mod value;

pub use crate::resp::Limits;
pub use node::{Node, REDIS_VERSION};

use std::future::Future;
use std::net::SocketAddr;

/// Settings of one node.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeConfig {
    /// Memory limit in bytes for keys, values and their overhead; 0 =
    /// unlimited. Above it, keys are evicted by `maxmemory-policy`
    /// (allkeys-lru unless CONFIG SET changes it).
    pub maxmemory: u64,
    /// Bounds on client requests.
    pub limits: Limits,
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

/// Binds `addr` and serves a node on a current-thread runtime of its own
/// until `shutdown` completes. This is the recommended way to run a node:
/// measured on two cores, one node alone is as fast on a current-thread
/// runtime as on a multi-threaded one, and with ten nodes loaded at once
/// the current-thread nodes served slightly more in total (no cross-thread
/// wakeups, uncontended shard locks, 2 threads instead of 20+).
pub fn run_blocking(
    addr: SocketAddr,
    config: NodeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = crate::listen::listen_at(addr)?;
        run(listener, config, shutdown).await
    })
}
