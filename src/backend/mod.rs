//! The built-in cache node: an in-memory RESP server a Redis user
//! recognises (strings, hashes, lists, sets and sorted sets), run as `shardis node --port P`, one OS process
//! per node behind the proxy.
//!
//! Layout: `store` (sharded keyspace, lazy expiry, memory accounting),
//! `value` and `zset` (the collection types and their encodings),
//! `evict` (eviction by `maxmemory-policy`, LFU counters, active expiry),
//! `config` (CONFIG parameters), `scan` (cursors, KEYS), `blocking`
//! (clients blocked in BLPOP and friends, and waking them), `pubsub`
//! (subscriptions, delivery, subscriber output limits),
//! `commands/*` (one file per command family, the table
//! and dispatcher), `server` (accept loop and pipelined client loop),
//! `blocking` and `wait` (blocked clients and a connection waiting for its
//! blocked request's reply), `error` (the one place errors become `-ERR`
//! lines), `watch` (WATCH's records; MULTI/EXEC are in `commands/multi`).
//! RESP framing comes
//! from `crate::resp`.
//!
//! Uses only `resp` and `glob` of our modules; never talks to the proxy or the ring.

#[doc(hidden)]
pub mod bench;
mod blocking;
mod chunked;
mod commands;
mod config;
mod dump;
mod entry;
mod error;
mod evict;
mod pubsub;
mod query;
mod scan;
mod server;
mod store;
mod typed;
mod value;
mod wait;
mod watch;
mod zset;

pub use crate::resp::Limits;
pub use server::{Node, REDIS_VERSION};

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
