//! A client's transaction state as plain data: the WATCH connection and the
//! MULTI queue. Changed by the transaction handler (`mod.rs`) only; the
//! client's state holds it.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::proxy::upstream::pinned::Pinned;
use crate::proxy::upstream::topology::Node;

/// A client's transaction state: the WATCH connection and the MULTI queue.
#[derive(Default)]
pub(crate) struct TxState {
    pub(super) multi: Option<Multi>,
    /// Pinned by WATCH; kept until EXEC, DISCARD, UNWATCH or disconnect
    /// (closing it is what makes the node forget the watched keys).
    pub(super) watch: Option<Pinned>,
}

impl TxState {
    /// True between MULTI and EXEC/DISCARD.
    pub(crate) fn is_queueing(&self) -> bool {
        self.multi.is_some()
    }

    /// Commands queued since MULTI; `None` outside a transaction.
    pub(crate) fn queued(&self) -> Option<usize> {
        self.multi.as_ref().map(|m| m.queued.len())
    }

    /// Inside MULTI, marks the transaction as failed: EXEC will discard it
    /// (a command refused while queueing, as Redis does).
    pub(crate) fn flag_error(&mut self) {
        if let Some(m) = self.multi.as_mut() {
            m.errored = true;
        }
    }

    /// Forgets everything (RESET, HELLO's implied reset is not Redis's).
    pub(crate) fn clear(&mut self) {
        self.multi = None;
        self.watch = None;
    }
}

/// A transaction being queued.
#[derive(Default)]
pub(super) struct Multi {
    pub(super) queued: Vec<Bytes>,
    pub(super) bytes: usize,
    pub(super) keys: Vec<Bytes>,
    /// The node every key must live on: the WATCH's, else the first key's.
    pub(super) node: Option<Arc<Node>>,
    /// The connection pinned at the first key (unless WATCH pinned one).
    pub(super) pin: Option<Pinned>,
    pub(super) writes: bool,
    /// MULTI's reply from the WATCH connection, where MULTI went at once
    /// (so EXEC costs no round trip before the queued commands leave).
    pub(super) started: Option<oneshot::Receiver<Bytes>>,
    /// A queue-time error: EXEC answers -EXECABORT.
    pub(super) errored: bool,
}
