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

    /// Runs one request of the primary's; its reply is dropped.
    pub(super) fn apply(&mut self, node: &Node, args: &[&[u8]]) {
        if args.is_empty() {
            return;
        }
        if let Next::Block(_) | Next::Migrate =
            commands::dispatch(node, &mut self.client, &mut self.out, args, 0)
        {
            tracing::debug!("a replicated request tried to block or migrate; ignored");
        }
        if self.out.first() == Some(&b'-') && !self.client.tx.is_queueing() {
            tracing::debug!(
                "replicated request answered {}",
                String::from_utf8_lossy(&self.out[..self.out.len().min(200)])
            );
        }
        self.out.clear();
    }
}
