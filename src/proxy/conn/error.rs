//! Errors a client session answers itself, and the one place that renders
//! each as its `-ERR …` line.
//!
//! Used by `session`. Errors from a node are rendered by `upstream`
//! ([`crate::proxy::upstream::UpstreamError`]); errors of a request's arguments are
//! built by the handlers, with Redis's wording.

use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::resp::{encode, ProtocolError};

/// Keys of one request on two nodes: Redis Cluster's text, outside MULTI as inside.
pub(crate) const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// A request that waited out a cutover for a client that hung up meanwhile:
/// not sent (the client reads no reply; the text is for logs and counts).
pub(crate) const HUNG_UP_IN_CUTOVER: &str =
    "ERR the client closed its connection while this request waited out a topology change's cutover: not sent";

/// A proxy of a fleet without a live lease, or not caught up since it got
/// one, may route by a ring the fleet has left: it serves no data.
pub(crate) const NOT_SERVING: &str = "TRYAGAIN this proxy's etcd lease lapsed, or it is catching up with the fleet's topology: it serves no keys until it routes by the fleet's current ring; retry, or use another proxy";

/// etcd is out of reach and a change is in progress: its moving keys may
/// change owner without this proxy seeing it.
pub(crate) const MOVING_WITHOUT_ETCD: &str = "TRYAGAIN etcd is unreachable and this key is moving in the topology change in progress: this proxy serves it again once it is back in touch with etcd; retry, or use another proxy";

/// etcd is gone and the lease lapsed: the ring is still the fleet's (no
/// change can be made without etcd), but a write could be overtaken by one
/// the moment etcd is back, so only reads are served.
pub(crate) const READS_ONLY_WITHOUT_ETCD: &str = "TRYAGAIN etcd is gone and this proxy's lease lapsed: it serves reads of keys not moving, and no writes, until it has a new lease; retry, or use another proxy";

/// The `-ERR` a client gets when its reply's channel closed without a reply.
pub(crate) fn lost() -> Bytes {
    Bytes::from_static(b"-ERR upstream connection lost before the reply arrived\r\n")
}

/// What went wrong with a client's request before any node saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ProxyError {
    /// Malformed or oversized request: answered, then the client is closed.
    Protocol(ProtocolError),
    /// The handler panicked; the session goes on.
    Internal { command: String },
    /// The proxy-wide query buffer limit chose this client (the largest).
    QueryBufferTotal,
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyError::Protocol(e) => write!(f, "ERR {e}"),
            ProxyError::Internal { command } => write!(
                f,
                "ERR internal error while handling '{command}' (logged by the proxy)"
            ),
            ProxyError::QueryBufferTotal => write!(
                f,
                "ERR Protocol error: proxy-wide query buffer limit reached (this client held the largest buffer)"
            ),
        }
    }
}

impl ProxyError {
    /// The error as the reply a client reads.
    pub(crate) fn reply(&self) -> Bytes {
        let mut b = BytesMut::new();
        encode::error(&mut b, &self.to_string());
        b.freeze()
    }
}

/// The reply for a request whose handler panicked; counts it.
pub(crate) fn internal_error(proxy: &crate::proxy::Proxy, client: u64, command: &[u8]) -> Bytes {
    let command = String::from_utf8_lossy(command).to_ascii_lowercase();
    let command = command.as_str();
    proxy
        .stats
        .internal_errors
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::warn!(
        client,
        command,
        "request handler panicked; answered -ERR internal error"
    );
    ProxyError::Internal {
        command: command.to_string(),
    }
    .reply()
}
