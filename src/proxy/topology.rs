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
    pub fn new(
        spec: NodeSpec,
        conns: usize,
        connect_timeout: Duration,
        request_timeout: Duration,
        max_bulk_len: usize,
    ) -> Node {
        let health = Arc::new(Health::default());
        let opts = UpstreamOptions {
            label: format!("{} ({})", spec.name, spec.addr),
            addr: spec.addr.clone(),
            proto: 2,
            connect_timeout,
            request_timeout,
            max_bulk_len,
        };
        let resp2 = (0..conns)
            .map(|_| Upstream::spawn(opts.clone(), health.clone()))
            .collect();
        Node {
            spec,
            health,
            resp2,
            resp3: OnceLock::new(),
            opts,
            conns,
        }
    }

    /// The connection for a client: pinned by client id, so one client's
    /// requests to one node keep their order.
    pub fn upstream(&self, proto: u8, client: u64) -> &Upstream {
        let pool = if proto >= 3 {
            self.resp3.get_or_init(|| {
                let opts = UpstreamOptions {
                    proto: 3,
                    ..self.opts.clone()
                };
                (0..self.conns)
                    .map(|_| Upstream::spawn(opts.clone(), self.health.clone()))
                    .collect()
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
        for u in self
            .resp2
            .iter()
            .chain(self.resp3.get().into_iter().flatten())
        {
            waits.push(u.send(ping.clone()).await);
        }
        for w in waits {
            let _ = w.await;
        }
    }
}

/// A topology change in its copy phase: the current ring still routes every
/// request; `next` is the ring being moved to.
pub struct MigrationRoute {
    pub next: Arc<Ring>,
    /// Aligned with `next.nodes()`.
    pub next_nodes: Vec<Arc<Node>>,
    /// Moving keys written since the copy began (see `migration::Dirty`).
    pub dirty: Arc<crate::proxy::migration::Dirty>,
    /// During cutover: requests on moving keys wait for `resume`.
    pub paused: bool,
    /// Becomes true when the cutover ends (either way).
    pub resume: Arc<tokio::sync::watch::Sender<bool>>,
}

/// What a session routes by: an immutable snapshot, swapped whole.
pub struct Routing {
    pub ring: Arc<Ring>,
    /// Aligned with `ring.nodes()`.
    pub nodes: Vec<Arc<Node>>,
    /// Present while keys are being copied to their next owners.
    pub migration: Option<Arc<MigrationRoute>>,
    /// Nodes may hold copies of keys they do not own (during a migration or
    /// its sweep): KEYS and SCAN drop those.
    pub filter_keys: bool,
    /// Requests being dispatched with this snapshot right now (the epoch gate).
    dispatching: AtomicUsize,
}

impl Routing {
    pub fn new(
        ring: Arc<Ring>,
        nodes: Vec<Arc<Node>>,
        migration: Option<Arc<MigrationRoute>>,
        filter_keys: bool,
    ) -> Routing {
        Routing {
            ring,
            nodes,
            migration,
            filter_keys,
            dispatching: AtomicUsize::new(0),
        }
    }

    /// The node owning `key` in the current ring.
    pub fn owner(&self, key: &[u8]) -> &Arc<Node> {
        &self.nodes[self.ring.locate(key)]
    }

    /// Marks a dispatch in progress until the guard drops.
    pub fn enter(&self) -> DispatchGuard<'_> {
        self.dispatching.fetch_add(1, Ordering::AcqRel);
        DispatchGuard(self)
    }

    /// Waits until no dispatch holds this snapshot (after it was swapped out).
    pub async fn drained(&self) {
        while self.dispatching.load(Ordering::Acquire) != 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// True when `key`'s owner in the next ring differs from its owner now.
    pub fn is_moving(&self, key: &[u8]) -> bool {
        match &self.migration {
            Some(m) => !Arc::ptr_eq(&m.next_nodes[m.next.locate(key)], self.owner(key)),
            None => false,
        }
    }
}

/// Held while one request is being dispatched; see [`Routing::enter`].
pub struct DispatchGuard<'a>(&'a Routing);

impl Drop for DispatchGuard<'_> {
    fn drop(&mut self) {
        self.0.dispatching.fetch_sub(1, Ordering::AcqRel);
    }
}
