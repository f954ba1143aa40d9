//! The proxy's counters (INFO, `/metrics`): plain atomics, bumped by the
//! sessions, the accept loops and the routes.

use std::sync::atomic::{AtomicU64, AtomicUsize};

/// The proxy's counters, shown by its INFO (the built-in node keeps its
/// own, `backend::node::Stats`).
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) clients: AtomicUsize,
    pub(crate) connections: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) commands: AtomicU64,
    /// Requests whose handling panicked (answered `-ERR internal error`).
    pub(crate) internal_errors: AtomicU64,
    /// INFO `instantaneous_ops_per_sec`.
    pub(crate) ops: crate::resp::info::OpsMeter,
    /// Clients closed for owing too many reply bytes.
    pub(crate) output_limit_closes: AtomicU64,
    /// Clients closed because the proxy-wide total of owed replies chose
    /// them (INFO `evicted_clients`, as Redis's `maxmemory-clients`).
    pub(crate) reply_total_closes: AtomicU64,
    /// Clients waiting in a blocking command (INFO `blocked_clients`).
    pub(crate) blocked_clients: AtomicUsize,
    /// Blocked commands with a timeout (INFO `clients_in_timeout_table`).
    pub(crate) timeout_clients: AtomicUsize,
    /// Clients closed for their own or the proxy-wide query buffer limit.
    pub(crate) query_limit_closes: AtomicU64,
    /// Clients that closed their connection (twemproxy's `client_eof`).
    pub(crate) client_eof: AtomicU64,
    /// Client connections that failed (twemproxy's `client_err`).
    pub(crate) client_err: AtomicU64,
    /// Requests split across nodes, one per node (twemproxy's `fragments`).
    pub(crate) fragments: AtomicU64,
}
