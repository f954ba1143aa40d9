//! Topology: the routing snapshot sessions read on every request, the pool of
//! node connections, and the epoch gate that lets a topology change know when
//! no request routed by the previous snapshot is still being dispatched.
//!
//! Sessions only read (`Proxy::routing`, an `ArcSwap`: a lock-free load per
//! request, replaced whole on change). The admin path builds a new
//! [`Routing`] and swaps it in; nothing here does I/O except `Node::barrier`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;

use super::upstream::{Health, Upstream, UpstreamOptions};
use crate::ring::{NodeSpec, Ring};

/// One backend node and its upstream connections (RESP2 always, RESP3 on first use).
pub struct Node {
    pub spec: NodeSpec,
    pub health: Arc<Health>,
    resp2: Vec<Upstream>,
    resp3: OnceLock<Vec<Upstream>>,
    opts: UpstreamOptions,
    conns: usize,
}

impl Node {
    /// Creates the node's connection actors (they connect on first use).
    pub fn new(spec: NodeSpec, conns: usize, connect_timeout: Duration, request_timeout: Duration) -> Node {
        let health = Arc::new(Health::default());
        let opts = UpstreamOptions {
            label: format!("{} ({})", spec.name, spec.addr),
            addr: spec.addr.clone(),
            proto: 2,
            connect_timeout,
            request_timeout,
        };
        let resp2 = (0..conns).map(|_| Upstream::spawn(opts.clone(), health.clone())).collect();
        Node { spec, health, resp2, resp3: OnceLock::new(), opts, conns }
    }

    /// The connection for a client: pinned by client id, so one client's
    /// requests to one node keep their order.
    pub fn upstream(&self, proto: u8, client: u64) -> &Upstream {
        let pool = if proto >= 3 {
            self.resp3.get_or_init(|| {
                let opts = UpstreamOptions { proto: 3, ..self.opts.clone() };
                (0..self.conns).map(|_| Upstream::spawn(opts.clone(), self.health.clone())).collect()
            })
        } else {
            &self.resp2
        };
        &pool[(client as usize) % pool.len()]
    }

    /// `name (addr)`, as in error replies.
    pub fn label(&self) -> &str {
        &self.opts.label
    }

    /// Waits until everything queued on this node's connections before now has
    /// been answered (a PING through each connection, which is FIFO).
    pub async fn barrier(&self) {
        let ping = Bytes::from_static(b"*1\r\n$4\r\nPING\r\n");
        let mut waits = Vec::new();
        for u in self.resp2.iter().chain(self.resp3.get().into_iter().flatten()) {
            waits.push(u.send(ping.clone()).await);
        }
        for w in waits {
            let _ = w.await;
        }
    }
}

/// The keys that change owner between two rings, while a migration runs.
pub struct MigrationRoute {
    /// The ring before the change.
    pub prev: Arc<Ring>,
    /// Nodes of `prev`, aligned with `prev.nodes()`.
    pub prev_nodes: Vec<Arc<Node>>,
    /// Old owners whose keys are known lost (a removed node that is down):
    /// their keys are not moved, just routed to their new owner.
    pub lost: Vec<bool>,
    /// Set once no request routed by the previous ring can still reach an old
    /// owner; ensure-moves wait for it, so a late write can never land behind
    /// its key's move.
    pub ready: tokio::sync::watch::Sender<bool>,
}

/// What a session routes by: an immutable snapshot, swapped whole.
pub struct Routing {
    pub ring: Arc<Ring>,
    /// Aligned with `ring.nodes()`.
    pub nodes: Vec<Arc<Node>>,
    /// Present while keys are moving to their new owners.
    pub migration: Option<Arc<MigrationRoute>>,
    /// Requests being dispatched with this snapshot right now (the epoch gate).
    dispatching: AtomicUsize,
}

impl Routing {
    pub fn new(ring: Arc<Ring>, nodes: Vec<Arc<Node>>, migration: Option<Arc<MigrationRoute>>) -> Routing {
        Routing { ring, nodes, migration, dispatching: AtomicUsize::new(0) }
    }

    /// The node owning `key` in the current ring.
    pub fn owner(&self, key: &[u8]) -> &Arc<Node> {
        &self.nodes[self.ring.locate(key)]
    }

    /// Marks a dispatch in progress until the guard drops.
    pub fn enter(self: &Arc<Self>) -> DispatchGuard {
        self.dispatching.fetch_add(1, Ordering::AcqRel);
        DispatchGuard(self.clone())
    }

    /// Waits until no dispatch holds this snapshot (after it was swapped out).
    pub async fn drained(&self) {
        while self.dispatching.load(Ordering::Acquire) != 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// For a key whose owner changed: (old owner, new owner), else `None`.
    pub fn moving(&self, key: &[u8]) -> Option<(&Arc<Node>, &Arc<Node>)> {
        let m = self.migration.as_ref()?;
        let old = m.prev.locate(key);
        if m.lost[old] {
            return None;
        }
        let old_node = &m.prev_nodes[old];
        let new_node = self.owner(key);
        if Arc::ptr_eq(old_node, new_node) {
            None
        } else {
            Some((old_node, new_node))
        }
    }
}

/// Held while one request is being dispatched; see [`Routing::enter`].
pub struct DispatchGuard(Arc<Routing>);

impl Drop for DispatchGuard {
    fn drop(&mut self) {
        self.0.dispatching.fetch_sub(1, Ordering::AcqRel);
    }
}
