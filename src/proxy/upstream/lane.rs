//! Script lanes: each node's connection of its own for scripts (EVAL, FCALL
//! and their forms), so a long script holds only that connection. The
//! node's shared connections stay free: other clients' requests reach the
//! node, which answers `-BUSY` past `busy-reply-threshold`, as redis-server
//! answers every other client while its one thread runs a script.
//!
//! A client's requests to one node keep their order because a client
//! enters a lane only with nothing owed (no request of its own in flight
//! anywhere), and while it is on a node's lane every request of its to that
//! node goes there too, behind the script. It leaves the lane once nothing
//! is owed again. SCRIPT and FUNCTION, sent to every node, take every
//! node's lane the same way (FUNCTION LOAD then FCALL in one pipeline keep
//! their order). A script sent while other replies are owed goes on the
//! shared connection, in order with them: a pipeline of short scripts
//! costs nothing more than before.
//!
//! Used by `route::keyed` (scripts claim the lane) and by every send on a
//! client's behalf (`Node::upstream_for`); the lane's in-flight count lets
//! PING ask a node that runs a script (`commands::local`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::proxy::upstream::topology::Node;
use crate::proxy::upstream::{Health, Upstream, UpstreamOptions};

/// One node's script connections, one per protocol, opened on first use.
#[derive(Default)]
pub(crate) struct ScriptLane {
    resp2: OnceLock<Upstream>,
    resp3: OnceLock<Upstream>,
    /// Requests in flight on each connection (RESP2, RESP3), published by
    /// its connection task.
    in_flight: [Arc<AtomicUsize>; 2],
}

impl ScriptLane {
    /// The script connection speaking `proto`, with the node's settings.
    pub(crate) fn upstream(
        &self,
        proto: u8,
        opts: &UpstreamOptions,
        health: &Arc<Health>,
    ) -> &Upstream {
        let (cell, i, proto) = if proto >= 3 {
            (&self.resp3, 1, 3)
        } else {
            (&self.resp2, 0, 2)
        };
        cell.get_or_init(|| {
            let opts = UpstreamOptions {
                proto,
                script_lane: Some(self.in_flight[i].clone()),
                ..opts.clone()
            };
            Upstream::spawn(opts, health.clone())
        })
    }

    /// Whether a script (or a request queued behind one) is in flight now.
    pub(crate) fn is_running(&self) -> bool {
        self.in_flight.iter().any(|n| n.load(Ordering::Relaxed) > 0)
    }
}

/// Which node's script lane a client is on, if any (see the module docs).
#[derive(Default)]
pub(crate) struct Lane {
    node: Option<Arc<Node>>,
    /// On every node's lane: after SCRIPT or FUNCTION (LOAD, …), sent to
    /// every node, so the script that follows it in a pipeline is sent
    /// behind it on its node's lane.
    all: bool,
    /// Nothing was owed when the request being dispatched arrived.
    idle: bool,
}

impl Lane {
    /// Before each request: with nothing owed the client leaves its lane
    /// and may enter one again.
    pub(crate) fn next_request(&mut self, nothing_owed: bool) {
        self.idle = nothing_owed;
        if nothing_owed {
            self.node = None;
            self.all = false;
        }
    }

    /// A script for `node`: takes its lane when the client may (nothing
    /// owed, or already on it).
    pub(crate) fn claim(&mut self, node: &Arc<Node>) {
        if self.idle {
            self.node = Some(node.clone());
        }
    }

    /// SCRIPT or FUNCTION for every node: takes every node's lane when the
    /// client may (nothing owed).
    pub(crate) fn claim_all(&mut self) {
        if self.idle {
            self.all = true;
        }
    }

    /// Whether the client's requests to `node` go on its script lane.
    pub(crate) fn is_on(&self, node: &Node) -> bool {
        self.all
            || self
                .node
                .as_ref()
                .is_some_and(|n| std::ptr::eq(Arc::as_ptr(n), node))
    }
}
