//! One request for a node, and the waiter its reply is handed to.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::proxy::conn::budget::{Exceeded, ReplyBudget};

/// One request for a node, and where its reply goes.
pub(crate) struct UpRequest {
    pub(crate) raw: Bytes,
    pub(crate) reply: Waiter,
}

/// Where one reply goes, and the client budget it is charged to.
pub(crate) struct Waiter {
    pub(super) tx: oneshot::Sender<Bytes>,
    pub(super) budget: Option<Arc<ReplyBudget>>,
}

impl Waiter {
    /// Hands the reply over, charged to the client's budget (released again
    /// if the client is gone). Never waits: a slow client cannot hold up the
    /// connection its reply came on.
    pub(super) fn answer(self, reply: Bytes) {
        let n = reply.len();
        if let Some(b) = &self.budget {
            // The proxy-wide reply total chose this client: it is closed
            // without reading what it is owed, so nothing more is kept for
            // it, even before its session has noticed.
            if b.evicted() == Some(Exceeded::ReplyTotal) {
                return;
            }
            b.charge(n);
        }
        if self.tx.send(reply).is_err() {
            if let Some(b) = &self.budget {
                b.release(n);
            }
        }
    }
}
