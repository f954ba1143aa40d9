//! Running the primary's requests on a replica: the snapshot's RESTOREs
//! and the stream's writes, through the node's own dispatcher as a client
//! marked `is_master` (never refused as a write to a replica, never held
//! back by maxmemory).
//!
//! They run at time 0, so no key is expired while the primary's requests
//! run: a replica removes keys only when its primary's stream says so
//! (expiry arrives as DEL), as a Redis replica does; other clients of the
//! replica still see expired keys as absent. Every time in the stream is
//! absolute (`effects.rs`), so nothing else depends on the clock.

use crate::backend::commands::{self, Client, Next};
use crate::backend::node::Node;
use bytes::BytesMut;

/// The primary's client on a replica.
pub(super) struct Applier {
    client: Client,
    out: BytesMut,
}

impl Applier {
    pub(super) fn new(node: &Node, peer: String) -> Applier {
        let id = node
            .next_client_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut client = Client::new(id, peer, String::new(), 0);
        client.is_master = true;
        client.never_block = true;
        Applier {
            client,
            out: BytesMut::new(),
        }
    }

    /// Runs one request of the primary's; its reply is dropped. False when
    /// a script of the replica's own clients holds the node: the caller
    /// waits a moment and applies it again.
    pub(super) fn apply(&mut self, node: &Node, args: &[&[u8]]) -> bool {
        if args.is_empty() {
            return true;
        }
        match commands::dispatch(node, &mut self.client, &mut self.out, args, 0) {
            Next::Busy => return false,
            Next::Done => {}
            _ => tracing::debug!("a replicated request tried to block, migrate or script; ignored"),
        }
        if self.out.first() == Some(&b'-') && !self.client.tx.is_queueing() {
            tracing::debug!(
                "replicated request answered {}",
                String::from_utf8_lossy(&self.out[..self.out.len().min(200)])
            );
        }
        self.out.clear();
        true
    }

    /// [`Applier::apply`], waiting out a script that holds the node.
    pub(super) async fn apply_now(&mut self, node: &Node, args: &[&[u8]]) {
        while !self.apply(node, args) {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}
