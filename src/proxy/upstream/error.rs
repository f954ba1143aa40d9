//! Why a node could not answer a request, and the one error line a client
//! gets for it.

use std::fmt;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::resp::reply::ReplyError;

/// Why a node could not answer a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum UpstreamError {
    Connect(String),
    ConnectTimeout(Duration),
    HelloRefused(String),
    HelloTimeout,
    /// The node refused `SELECT`.
    SetupRefused(String),
    /// The socket failed while reading or writing.
    Io(String),
    ClosedByNode,
    /// A reply arrived with no request waiting for it.
    StrayReply,
    /// The node's bytes are not RESP, or a bulk is over `proto-max-bulk-len`.
    InvalidReply(ReplyError),
    NoReply(Duration),
    ShuttingDown,
    RequestDropped,
    /// The proxy closed the connection (its handle was dropped).
    Closed,
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use UpstreamError::*;
        match self {
            Connect(e) | Io(e) => write!(f, "{e}"),
            ConnectTimeout(t) => write!(f, "connect timed out after {} ms", t.as_millis()),
            HelloRefused(r) => write!(f, "handshake refused: {r}"),
            HelloTimeout => write!(f, "handshake timed out"),
            SetupRefused(r) => write!(f, "connection setup refused: {r}"),
            ClosedByNode => write!(f, "connection closed by node"),
            StrayReply => write!(f, "stray reply from node"),
            InvalidReply(e) => write!(f, "{e}"),
            NoReply(t) => write!(f, "no reply within {} ms", t.as_millis()),
            ShuttingDown => write!(f, "proxy is shutting down"),
            RequestDropped => write!(f, "request dropped"),
            Closed => write!(f, "connection closed"),
        }
    }
}

/// The `-ERR` a client gets when its node failed: the one place that
/// renders an [`UpstreamError`].
pub(crate) fn error_reply(label: &str, why: &UpstreamError) -> Bytes {
    let mut out = BytesMut::new();
    crate::resp::encode::error(&mut out, &format!("ERR node {label} is unavailable: {why}"));
    out.freeze()
}
