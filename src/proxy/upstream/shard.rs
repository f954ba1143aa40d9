//! A ring entry: the [`Shard`]. The ring places keys on shards by the
//! shard's name; a shard is served by one primary node and, later, by
//! replicas that copy it.
//!
//! Today every shard is exactly one node and its replica list is empty:
//! routing reads `shard.primary()` wherever it used to read the node, so
//! adding replicas, roles, replication offsets and failover changes what a
//! shard holds, not who asks it.

use std::sync::Arc;

use crate::proxy::upstream::topology::Node;
use crate::ring::NodeSpec;

/// A shard as configured: the node that owns its keys and the nodes that
/// copy them. The config model carries the replica list (always empty
/// today) so a later change can fill it without reshaping routing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ShardSpec {
    /// The primary; its name is the shard's name, which the ring places by.
    pub(crate) primary: NodeSpec,
    /// Replicas of the primary.
    pub(crate) replicas: Vec<NodeSpec>,
}

impl ShardSpec {
    /// A shard of one node and no replicas (every shard today).
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

    /// Every node of the shard, primary first: what holds the shard's keys
    /// or its subscribers (today the primary alone).
    pub(crate) fn nodes(&self) -> impl Iterator<Item = &Arc<Node>> {
        std::iter::once(&self.primary).chain(&self.replicas)
    }
}
