//! Whether etcd is gone, as opposed to out of this proxy's reach: while the
//! topology watch is down, every endpoint is tried with a bare TCP connect.
//! When each one refuses (nothing listens there), no etcd member the fleet
//! was configured with is running, so no proxy can start a change or flip
//! an epoch (both are etcd transactions) and the ring this proxy knows is
//! still the fleet's: that is what lets it go on serving reads of keys not
//! moving after its lease lapsed ([`Serving::Reads`]). A timeout or any
//! other failure proves nothing (a partition looks like that), so it counts
//! as "not gone".

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the endpoints are tried while the watch is down.
const PROBE_MS: u64 = 500;
/// How long one connect may take before it counts as "not refused".
const CONNECT_MS: u64 = 300;

/// What a proxy of the fleet may serve now (read per request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Serving {
    /// Lease alive, in touch with etcd, routing by the topology read under
    /// the lease: everything.
    All,
    /// Lease alive but etcd out of reach: everything except requests on
    /// keys a change in progress moves (the change may advance unseen).
    SteadyKeys,
    /// Lease lapsed and every etcd endpoint refuses connections: reads of
    /// keys no change moves; no writes.
    Reads,
    /// Lease lapsed with etcd perhaps alive elsewhere, or a new lease whose
    /// topology is not read yet: nothing keyed.
    Nothing,
}

/// Keeps `gone` true exactly while the watch is down and every endpoint
/// refuses a connection.
pub(super) async fn probe(
    endpoints: Vec<String>,
    watching: Arc<AtomicBool>,
    gone: Arc<AtomicBool>,
) {
    loop {
        let now_gone = !watching.load(Ordering::Relaxed) && all_refuse(&endpoints).await;
        gone.store(now_gone, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(PROBE_MS)).await;
    }
}

async fn all_refuse(endpoints: &[String]) -> bool {
    for e in endpoints {
        let addr = e
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        let limit = Duration::from_millis(CONNECT_MS);
        match tokio::time::timeout(limit, tokio::net::TcpStream::connect(addr)).await {
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => {}
            _ => return false,
        }
    }
    !endpoints.is_empty()
}
