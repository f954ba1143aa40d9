//! One request for a node, and the waiter its reply is handed to.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::proxy::conn::budget::{Exceeded, ReplyBudget};

/// One request for a node, and where its reply goes.
pub(crate) struct UpRequest {
    pub(crate) raw: Bytes,
    pub(crate) reply: Waiter,
    /// A `WAIT` the proxy adds after a write (`write_ack = "replica"`): the
    /// connection may send one for a run of them with the same bytes, since
    /// a WAIT after the last write of a batch covers every earlier write on
    /// the connection ([`PendingWait`]).
    pub(crate) merge_wait: bool,
}

/// The proxy's WAITs taken since the last write to the socket, sent once
/// after every request taken with them: each of their waiters gets that
/// one WAIT's reply.
#[derive(Default)]
pub(super) struct PendingWait {
    raw: Option<Bytes>,
    waiters: Vec<Waiter>,
}

impl PendingWait {
    /// Takes `req` if it is a WAIT that can join the pending one (or start
    /// it); gives it back otherwise.
    pub(super) fn take(&mut self, req: UpRequest) -> Option<UpRequest> {
        if !req.merge_wait {
            return Some(req);
        }
        match &self.raw {
            Some(raw) if *raw != req.raw => return Some(req),
            Some(_) => {}
            None => self.raw = Some(req.raw),
        }
        self.waiters.push(req.reply);
        None
    }

    /// The one WAIT to send and the waiter that answers all of them.
    pub(super) fn drain(&mut self) -> Option<(Bytes, Waiter)> {
        let raw = self.raw.take()?;
        let mut waiters = std::mem::take(&mut self.waiters).into_iter();
        let mut first = waiters.next()?;
        first.also = waiters.collect();
        Some((raw, first))
    }
}

/// Where one reply goes, and the client budget it is charged to.
pub(crate) struct Waiter {
    pub(super) tx: oneshot::Sender<Bytes>,
    pub(super) budget: Option<Arc<ReplyBudget>>,
    /// Merged WAITs' waiters, given the same reply.
    pub(super) also: Vec<Waiter>,
}

impl Waiter {
    /// Hands the reply over, charged to the client's budget (released again
    /// if the client is gone). Never waits: a slow client cannot hold up the
    /// connection its reply came on.
    pub(super) fn answer(mut self, reply: Bytes) {
        for w in std::mem::take(&mut self.also) {
            w.answer(reply.clone());
        }
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
