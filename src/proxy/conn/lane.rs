//! The script lanes one client holds (see `upstream/lane.rs`, where each
//! node keeps its lanes): while a client holds a node's lane, every request
//! of its to that node goes there, behind its script.

use std::sync::Arc;

use crate::proxy::upstream::topology::Node;
use crate::proxy::upstream::Upstream;

/// The script lanes a client holds, one per node (see the module docs).
#[derive(Default)]
pub(crate) struct Lane {
    held: Vec<(Arc<Node>, Upstream)>,
    /// Nothing was owed when the request being dispatched arrived.
    idle: bool,
}

impl Lane {
    /// Before each request: with nothing owed the client gives its lanes
    /// back and may take one again.
    pub(crate) fn next_request(&mut self, nothing_owed: bool) {
        self.idle = nothing_owed;
        if nothing_owed && !self.held.is_empty() {
            self.held.clear();
        }
    }

    /// A script (or a load) for `node`: takes one of its lanes when the
    /// client may (nothing owed) and holds none of it yet.
    pub(crate) fn claim(&mut self, node: &Arc<Node>, proto: u8) {
        if self.idle && self.to(node).is_none() {
            self.held.push((node.clone(), node.script_lane(proto)));
        }
    }

    /// The lane the client's requests to `node` take, if it holds one.
    pub(crate) fn to(&self, node: &Node) -> Option<&Upstream> {
        self.held
            .iter()
            .find(|(n, _)| std::ptr::eq(Arc::as_ptr(n), node))
            .map(|(_, up)| up)
    }
}
