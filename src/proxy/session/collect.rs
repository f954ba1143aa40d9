//! The session's FIFO of owed replies: gathering the complete ones at its
//! front into one write, and queueing pub/sub messages behind them.

use bytes::BytesMut;
use tokio::sync::oneshot;

use super::{ClientSession, MAX_OUT_BYTES};
use crate::proxy::commands::pubsub::Push;
use crate::proxy::conn::budget::{Exceeded, ReplyBudget};
use crate::proxy::conn::pending::{lost_reply, Pending};

impl ClientSession {
    /// Moves the complete replies at the front of the FIFO into `out`,
    /// charging to `budget` those not charged on arrival; true when it
    /// reached a `Close` (whose reply is then in `out` too).
    pub(super) fn collect(&mut self, out: &mut BytesMut, budget: &ReplyBudget) -> bool {
        // One clock read for every reply gathered now.
        let mut now = None;
        while out.len() < MAX_OUT_BYTES {
            let (bytes, charged) = match self.owed.front_mut() {
                None => return false,
                Some(Pending::Ready(b)) => (std::mem::take(b), false),
                Some(Pending::One(rx)) => match rx.try_recv() {
                    Ok(b) => (b, false),
                    Err(oneshot::error::TryRecvError::Closed) => (lost_reply(), false),
                    Err(oneshot::error::TryRecvError::Empty) => return false,
                },
                Some(Pending::Charged(rx)) => match rx.try_recv() {
                    Ok(b) => (b, true),
                    Err(oneshot::error::TryRecvError::Closed) => (lost_reply(), false),
                    Err(oneshot::error::TryRecvError::Empty) => return false,
                },
                Some(Pending::Later(_)) => return false,
                Some(Pending::Pushed(b)) => (std::mem::take(b).freeze(), true),
                Some(Pending::Close(b)) => {
                    budget.charge(b.len());
                    out.extend_from_slice(b);
                    let b = b.clone();
                    self.answered(&b, *now.get_or_insert_with(std::time::Instant::now));
                    return true;
                }
            };
            if !charged {
                budget.charge(bytes.len());
            }
            out.extend_from_slice(&bytes);
            self.answered(&bytes, *now.get_or_insert_with(std::time::Instant::now));
            self.owed.pop_front();
        }
        false
    }

    /// The reply at the front is complete: hands its request's timing to the
    /// operator plane (metrics, slow log).
    pub(super) fn answered(&mut self, reply: &[u8], now: std::time::Instant) {
        if let Some(Some(t)) = self.timings.pop_front() {
            self.proxy
                .ops
                .answered(&self.proxy, t, now, reply, &self.state);
        }
    }

    /// Queues a pub/sub message behind every reply owed now (never inside
    /// one); consecutive messages share one slot.
    /// False when the subscriber must be closed.
    pub(super) fn pushed(&mut self, p: Push) -> bool {
        let m = match p {
            Push::Message(m) => m,
            Push::OverLimit => {
                self.exceeded(Exceeded::OutputHard);
                return false;
            }
            Push::ClosedByNode => return false,
            Push::Lost => {
                tracing::warn!(
                    client = self.state.id,
                    "closing a subscriber whose subscriptions no node could take"
                );
                return false;
            }
        };
        if let Some(Pending::Pushed(b)) = self.owed.back_mut() {
            b.extend_from_slice(&m);
            return true;
        }
        self.owed.push_back(Pending::Pushed(BytesMut::from(&m[..])));
        self.timings.push_back(None);
        true
    }
}
