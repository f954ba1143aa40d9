//! The connect and request timeouts every node connection reads live.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The proxy's upstream timeouts, shared by every node's connections and
/// read where each use starts: a connect, a handshake, the watchdog's next
/// tick. Atomics, because a reload sets them while connections run, and a
/// connection must never wait on a lock to read its own timeout.
#[derive(Debug)]
pub(crate) struct Timeouts {
    connect_ms: AtomicU64,
    request_ms: AtomicU64,
}

impl Timeouts {
    pub(crate) fn new(connect_ms: u64, request_ms: u64) -> Arc<Timeouts> {
        Arc::new(Timeouts {
            connect_ms: connect_ms.into(),
            request_ms: request_ms.into(),
        })
    }

    /// Both at once, from a reloaded config.
    pub(crate) fn set(&self, connect_ms: u64, request_ms: u64) {
        self.connect_ms.store(connect_ms, Ordering::Relaxed);
        self.request_ms.store(request_ms, Ordering::Relaxed);
    }

    pub(crate) fn connect(&self) -> Duration {
        Duration::from_millis(self.connect_ms.load(Ordering::Relaxed))
    }

    pub(crate) fn request(&self) -> Duration {
        Duration::from_millis(self.request_ms.load(Ordering::Relaxed))
    }
}
