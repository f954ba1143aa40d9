//! A node without sockets, for `bench/node.rs`: runs requests through the
//! real dispatcher (gate, table lookup, handler, WATCH touch) and exposes
//! the gate alone, so the gate's share of a command's cost can be measured.
//! Not part of the API; never used by the server.

use bytes::BytesMut;

use super::commands::{self, Client};
use super::server::Node;
use super::NodeConfig;

/// One node and one client of it.
pub struct Bench {
    node: Node,
    client: Client,
}

impl Default for Bench {
    fn default() -> Self {
        Self::new()
    }
}

impl Bench {
    /// An empty node with default settings.
    pub fn new() -> Bench {
        Bench {
            node: Node::new(&NodeConfig::default(), 0),
            client: Client::new(1, String::new(), String::new(), 0),
        }
    }

    /// Runs one request; its reply is appended to `out`.
    pub fn run(&mut self, args: &[&[u8]], out: &mut BytesMut) {
        let now = super::store::now_ms();
        commands::dispatch(&self.node, &mut self.client, out, args, now);
    }

    /// Takes and releases the node's gate shared, as every command does.
    pub fn gate(&self) {
        drop(self.node.shared());
    }
}
