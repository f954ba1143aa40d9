//! Pinned connections: a dedicated upstream connection that one client owns
//! for a while — a transaction from its first key (or WATCH) to EXEC, a
//! blocking command while it blocks, a subscriber while it has
//! subscriptions. The one mechanism behind MULTI/EXEC, blocking commands and
//! pub/sub.
//!
//! A [`Pinned`] is RAII: dropping it (completion, DISCARD, the client
//! leaving, its session ending by a panic) closes the connection at once and
//! gives its place back under `max_pinned_per_node`. Closing is what makes a
//! node forget a WATCH or a blocked pop of a client that is gone. Taken by
//! `transaction.rs`, `blocking.rs` and `pubsub/` (which holds a bare [`Slot`]
//! for a connection of its own: messages the node sends unasked would break
//! an upstream's FIFO matching); never shared between clients, never reconnected behind its owner's back (see
//! `upstream::fail_rest`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::upstream::topology::Node;
use crate::proxy::upstream::{Upstream, UpstreamOptions};

/// How many pinned connections a node has open, and its bound.
#[derive(Default)]
pub(crate) struct PinCount {
    open: AtomicUsize,
    max: usize,
}

impl PinCount {
    pub(crate) fn new(max: usize) -> PinCount {
        PinCount {
            open: AtomicUsize::new(0),
            max,
        }
    }

    /// Pinned connections open now.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// Why a client could not be given a pinned connection; its `Display` is
/// the error line the client gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PinError {
    /// The node has `max_pinned_per_node` pinned connections open already.
    Full { node: String, max: usize },
    /// No node of the routing may take a subscriber now.
    NoNode,
}

impl std::fmt::Display for PinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PinError::Full { node, max } => write!(
                f,
                "ERR max number of pinned connections reached for node {node} ({max} = proxy.max_pinned_per_node; used by MULTI, blocking commands and pub/sub)"
            ),
            PinError::NoNode => write!(f, "ERR no node is available for subscriptions"),
        }
    }
}

/// A place under `max_pinned_per_node`, given back when dropped.
pub(crate) struct Slot(Arc<Node>);

impl Slot {
    /// Takes a place on `node`, or says why not: it has
    /// `max_pinned_per_node` open already.
    pub(crate) fn take(node: &Arc<Node>) -> Result<Slot, PinError> {
        let pins = &node.pins;
        let taken = pins
            .open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < pins.max).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(PinError::Full {
                node: node.label().to_string(),
                max: pins.max,
            });
        }
        Ok(Slot(node.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.pins.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One client's dedicated connection to one node.
pub(crate) struct Pinned {
    // Field order matters: the connection handle drops (and the connection
    // closes) before the slot is given back.
    up: Upstream,
    _slot: Slot,
    pub(crate) node: Arc<Node>,
}

impl Pinned {
    /// Takes the node's spare connection for `proto` (`spare.rs`) or opens
    /// one (lazily: on its first request), a dedicated connection to `node`
    /// speaking `proto`, and starts the next spare; or says why not: the node has `max_pinned_per_node`
    /// open already.
    pub(crate) fn open(
        node: &Arc<Node>,
        proto: u8,
        opts: &UpstreamOptions,
    ) -> Result<Pinned, PinError> {
        let slot = Slot::take(node)?;
        let opts = UpstreamOptions {
            proto,
            pinned: true,
            ..opts.clone()
        };
        let up = node
            .spares
            .take(proto, &node.health)
            .unwrap_or_else(|| Upstream::spawn(opts.clone(), node.health.clone()));
        node.spares.refill(&opts, &node.health);
        Ok(Pinned {
            up,
            _slot: slot,
            node: node.clone(),
        })
    }

    /// Queues `raw` on this connection; replies come back in order. A reply
    /// the proxy consumes itself (MULTI's, a queued command's) is not charged
    /// to the client.
    pub(crate) async fn send(&self, raw: Bytes) -> oneshot::Receiver<Bytes> {
        self.up.send(raw).await
    }

    /// [`Pinned::send`] for a reply the client will be sent: charged to its
    /// reply budget on arrival, as forwarded replies are.
    pub(crate) async fn send_for(
        &self,
        raw: Bytes,
        budget: &Arc<ReplyBudget>,
    ) -> oneshot::Receiver<Bytes> {
        self.up.send_for(raw, Some(budget.clone())).await
    }

    /// True when this connection goes to `node`.
    pub(crate) fn is_to(&self, node: &Arc<Node>) -> bool {
        Arc::ptr_eq(&self.node, node)
    }
}
