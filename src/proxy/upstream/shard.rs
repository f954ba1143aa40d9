//! A ring entry: the [`Shard`]. The ring places keys on shards by the
//! shard's name; a shard is served by one primary node and copied by 0–2
//! replicas (`proxy::ha` polls their roles and offsets and fails over).
//!
//! The primary's `Node` always carries the shard's name (a replica's carries
//! its address): a failover builds a new primary `Node` at the promoted
//! replica's address under the same name, so placement never moves.

use std::sync::Arc;

use crate::proxy::upstream::topology::Node;
use crate::ring::NodeSpec;

/// A shard as configured: the node that owns its keys and the nodes that
/// copy them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ShardSpec {
    /// The primary; its name is the shard's name, which the ring places by.
    pub(crate) primary: NodeSpec,
    /// Replicas of the primary.
    pub(crate) replicas: Vec<NodeSpec>,
}

impl ShardSpec {
    /// A shard of one node and no replicas.
    #[allow(dead_code)]
    pub(crate) fn single(primary: NodeSpec) -> ShardSpec {
        ShardSpec {
            primary,
            replicas: Vec::new(),
        }
    }
}

/// One entry of a routing snapshot, aligned with the ring's entries: the
/// primary serves every request routed to the shard. Shared (`Arc`) across
/// snapshots, so a shard that stays in the ring keeps its identity.
pub(crate) struct Shard {
    primary: Arc<Node>,
    replicas: Vec<Arc<Node>>,
}

impl Shard {
    pub(crate) fn new(primary: Arc<Node>, replicas: Vec<Arc<Node>>) -> Shard {
        Shard { primary, replicas }
    }

    /// The shard's name, the ring's placement key (its primary's name).
    pub(crate) fn name(&self) -> &str {
        &self.primary.spec.name
    }

    /// The node that serves the shard's requests.
    pub(crate) fn primary(&self) -> &Arc<Node> {
        &self.primary
    }

    /// The nodes copying the primary (reads may go to them, see `ha::reads`).
    pub(crate) fn replicas(&self) -> &[Arc<Node>] {
        &self.replicas
    }

    /// Every node of the shard, primary first: what holds the shard's keys
    /// or its subscribers.
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Arc<Node>> {
        std::iter::once(&self.primary).chain(&self.replicas)
    }
}
