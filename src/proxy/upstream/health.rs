//! A node's connection state and traffic counts, shared by all its
//! upstream connections: `CLUSTER RING`'s up/down, `/metrics`, and
//! twemproxy's per-server stats.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use super::UpstreamError;
use crate::proxy::ops::metrics::NodeMetrics;

/// Connection state of a node, shown by `CLUSTER RING`.
#[derive(Default)]
pub(crate) struct Health {
    /// 0 = never connected, 1 = up, 2 = down.
    state: AtomicU8,
    pub(crate) failures: AtomicU64,
    /// Failures since the last successful connect (twemproxy's
    /// `failure_count`, which `auto_eject_hosts` compares with
    /// `server_failure_limit`).
    pub(crate) consecutive: AtomicU64,
    pub(crate) last_error: std::sync::Mutex<String>,
    /// Requests, errors, latency, in flight, reconnects (for `/metrics`).
    pub(crate) metrics: NodeMetrics,
    /// What went over the wire (twemproxy's per-server stats).
    pub(crate) wire: Wire,
}

/// One node's traffic and connection ends, as twemproxy's stats count them.
#[derive(Default)]
pub(crate) struct Wire {
    pub(crate) requests: AtomicU64,
    pub(crate) request_bytes: AtomicU64,
    pub(crate) responses: AtomicU64,
    pub(crate) response_bytes: AtomicU64,
    /// Connections closed by the node.
    pub(crate) eof: AtomicU64,
    /// Connections that failed otherwise (refused, reset, bad reply).
    pub(crate) err: AtomicU64,
    /// Connects and replies that timed out.
    pub(crate) timedout: AtomicU64,
    /// Open now, and ever opened.
    pub(crate) connections: AtomicU64,
    pub(crate) opened: AtomicU64,
    /// Requests answered with our error because the node failed
    /// (twemproxy's pool stat `forward_error`).
    pub(crate) forward_errors: AtomicU64,
}

impl Wire {
    #[inline]
    pub(super) fn sent(&self, n: u64, bytes: u64) {
        if n > 0 {
            self.requests.fetch_add(n, Ordering::Relaxed);
            self.request_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(super) fn received(&self, n: u64, bytes: u64) {
        if n > 0 {
            self.responses.fetch_add(n, Ordering::Relaxed);
            self.response_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }
}

impl Health {
    /// True while the last connection attempt succeeded.
    pub(crate) fn is_up(&self) -> bool {
        self.state.load(Ordering::Relaxed) == 1
    }

    pub(crate) fn state(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            1 => "up",
            2 => "down",
            _ => "idle",
        }
    }

    pub(super) fn set_up(&self) {
        self.state.store(1, Ordering::Relaxed);
        self.consecutive.store(0, Ordering::Relaxed);
    }

    pub(super) fn set_down(&self, err: &UpstreamError) {
        self.state.store(2, Ordering::Relaxed);
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.consecutive.fetch_add(1, Ordering::Relaxed);
        let kind = match err {
            UpstreamError::ClosedByNode => &self.wire.eof,
            UpstreamError::NoReply(_) | UpstreamError::ConnectTimeout(_) => &self.wire.timedout,
            _ => &self.wire.err,
        };
        kind.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut e) = self.last_error.lock() {
            *e = err.to_string();
        }
    }
}
