//! The client's handle on its subscriber connection: queues requests for
//! the connection's actor (`conn.rs`), tells whether it is open or busy,
//! and closes it when dropped. Held in the client's `Subscriber`.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::proxy::commands::clients::entry::ClientEntry;
use crate::proxy::commands::pubsub::conn::{Actor, Shared};
use crate::proxy::commands::pubsub::link::take_slot;
use crate::proxy::commands::pubsub::message::{Push, SubRequest};
use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::upstream::pinned::PinError;
use crate::proxy::Proxy;

/// The client's handle; dropping it closes the connection.
pub(crate) struct SubConn {
    shared: Arc<Shared>,
    _gone: oneshot::Sender<()>,
}

impl SubConn {
    /// Opens a subscriber connection (it connects on its first request) to
    /// the routing's node with the fewest pinned connections, or says why
    /// not.
    pub(crate) fn open(
        proxy: &Arc<Proxy>,
        proto: u8,
        client: u64,
        budget: &Arc<ReplyBudget>,
        push: mpsc::UnboundedSender<Push>,
        entry: &Arc<ClientEntry>,
    ) -> Result<SubConn, PinError> {
        let routing = proxy.routing.load_full();
        let (slot, node) = take_slot(&routing, &[], client)?;
        let shared = Arc::new(Shared::default());
        let (gone_tx, gone_rx) = oneshot::channel();
        let actor = Actor::new(proxy, shared.clone(), proto, push, budget, client, entry);
        tokio::spawn(actor.run(node, slot, gone_rx));
        Ok(SubConn {
            shared,
            _gone: gone_tx,
        })
    }

    /// Queues a request; gives it back if the connection was released.
    pub(crate) fn send(&self, req: SubRequest) -> Result<(), SubRequest> {
        let mut q = self.shared.lock();
        if q.closed {
            return Err(req);
        }
        q.reqs.push_back(req);
        drop(q);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// True while the connection holds (or is about to hold) subscriptions.
    pub(crate) fn is_open(&self) -> bool {
        !self.shared.lock().closed
    }

    /// True while a request is queued or not fully answered.
    pub(crate) fn is_busy(&self) -> bool {
        let q = self.shared.lock();
        !q.closed && (q.in_flight > 0 || !q.reqs.is_empty())
    }

    /// Waits until no request is queued or in flight.
    pub(crate) async fn settled(&self) {
        loop {
            let n = self.shared.settled.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if !self.is_busy() {
                return;
            }
            n.await;
        }
    }
}
