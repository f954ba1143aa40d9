//! A node without sockets, for `bench/node.rs`: runs requests through the
//! real dispatcher (gate, table lookup, handler, WATCH touch) and exposes
//! the gate alone, so the gate's share of a command's cost can be measured;
//! and feeds a query buffer piece by piece as reads from a socket would.
//! Not part of the API; never used by the server.

use bytes::BytesMut;

use super::commands::{self, Client};
use super::node::Node;
use super::server::query::Query;
use super::NodeConfig;

/// One node and one client of it.
pub struct Bench {
    node: Node,
    client: Client,
    query: Query,
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
            query: Query::with_capacity(16 * 1024),
        }
    }

    /// Runs one request; its reply is appended to `out`.
    pub fn run(&mut self, args: &[&[u8]], out: &mut BytesMut) {
        let now = super::keyspace::clock::now_ms();
        if let commands::Next::Script(cmd) =
            commands::dispatch(&self.node, &mut self.client, out, args, now)
        {
            commands::run_script(&self.node, &mut self.client, out, cmd, args);
        }
    }

    /// Takes and releases the node's gate shared, as every command does.
    pub fn gate(&self) {
        drop(self.node.shared());
    }

    /// Appends `piece` to the client's query buffer, as one read from its
    /// socket, then runs every request now complete, as the server loop
    /// does; their replies are appended to `out`. False on a protocol error.
    pub fn feed(&mut self, piece: &[u8], out: &mut BytesMut) -> bool {
        self.query.buf.extend_from_slice(piece);
        let limits = self.node.limits;
        loop {
            let frame = match self.query.next(&limits) {
                Ok(Some(frame)) => frame,
                Ok(None) => return true,
                Err(_) => return false,
            };
            let args = self.query.args(&frame);
            if !args.is_empty() {
                let now = super::keyspace::clock::now_ms();
                commands::dispatch(&self.node, &mut self.client, out, &args, now);
            }
            drop(args);
            self.query.consume(&frame);
        }
    }
}
