//! Topology: the routing snapshot sessions read on every request, the pool of
//! node connections, and the epoch gate that lets a topology change know when
//! no request routed by the previous snapshot is still being dispatched.
//!
//! Sessions only read (`Proxy::routing`, an `ArcSwap`: a lock-free load per
//! request, replaced whole on change), and only through [`enter`], the one
//! routing primitive every path of `route.rs` uses. The migration engine
//! builds a new [`Routing`] and swaps it in; nothing here does I/O except
//! `Node::barrier`.

use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use bytes::Bytes;
use tokio::sync::Notify;

use crate::proxy::upstream::shard::Shard;
use crate::proxy::upstream::{Health, Upstream, UpstreamOptions};
use crate::ring::{NodeSpec, Ring};

/// One backend node and its upstream connections (RESP2 always, RESP3 on first use).
pub(crate) struct Node {
    pub(crate) spec: NodeSpec,
    pub(crate) health: Arc<Health>,
    /// Dedicated connections clients hold to this node (see `pinned.rs`).
    pub(crate) pins: crate::proxy::upstream::pinned::PinCount,
    /// A pinned connection opened ahead of the next pin (`spare.rs`).
    pub(crate) spares: Arc<crate::proxy::upstream::spare::Spares>,
    resp2: Vec<Upstream>,
    resp3: OnceLock<Vec<Upstream>>,
    /// Its connections for scripts (see `lane.rs`).
    pub(crate) scripts: crate::proxy::upstream::lane::ScriptLane,
    opts: UpstreamOptions,
    conns: usize,
}

impl Node {
    /// Creates the node's connection actors (they connect on first use).
    /// `opts` carries the timeouts, limits and handshake every connection
    /// uses; its label and address are the node's.
    pub(crate) fn new(
        spec: NodeSpec,
        conns: usize,
        max_pinned: usize,
        opts: UpstreamOptions,
    ) -> Node {
        let health = Arc::new(Health::default());
        let opts = UpstreamOptions {
            label: format!("{} ({})", spec.name, spec.addr),
            addr: spec.addr.clone(),
            proto: 2,
            pinned: false,
            ..opts
        };
        let resp2 = (0..conns)
            .map(|_| Upstream::spawn(opts.clone(), health.clone()))
            .collect();
        Node {
            spec,
            health,
            pins: crate::proxy::upstream::pinned::PinCount::new(max_pinned),
            spares: Default::default(),
            resp2,
            resp3: OnceLock::new(),
            scripts: Default::default(),
            opts,
            conns,
        }
    }

    /// The connection for a client: pinned by client id, so one client's
    /// requests to one node keep their order.
    pub(crate) fn upstream(&self, proto: u8, client: u64) -> &Upstream {
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

    /// An idle script connection of this node (`lane.rs`).
    pub(crate) fn script_lane(&self, proto: u8) -> Upstream {
        self.scripts.pick(proto, &self.opts, &self.health)
    }

    /// Opens every shared connection now instead of on first use
    /// (twemproxy's `preconnect`): a PING on each, its reply dropped.
    pub(crate) fn preconnect(&self) {
        for up in &self.resp2 {
            let up = up.clone();
            tokio::spawn(async move {
                let _ = up
                    .call(bytes::Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"))
                    .await;
            });
        }
    }

    /// A dedicated connection to this node for one client (bounded by
    /// `max_pinned_per_node`).
    pub(crate) fn pin(
        self: &Arc<Self>,
        proto: u8,
    ) -> Result<crate::proxy::upstream::pinned::Pinned, crate::proxy::upstream::pinned::PinError>
    {
        crate::proxy::upstream::pinned::Pinned::open(self, proto, &self.opts)
    }

    /// The settings its connections use (pub/sub opens its own).
    pub(crate) fn options(&self) -> &UpstreamOptions {
        &self.opts
    }

    /// `name (addr)`, as in error replies.
    pub(crate) fn label(&self) -> &str {
        &self.opts.label
    }

    /// Waits until everything queued on this node's connections before now has
    /// been answered (a PING through each connection, which is FIFO).
    pub(crate) async fn barrier(&self) {
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
pub(crate) struct MigrationRoute {
    pub(crate) next: Arc<Ring>,
    /// Aligned with `next.nodes()`.
    pub(crate) next_shards: Vec<Arc<Shard>>,
    /// Moving keys written since the copy began (see `migration::Dirty`).
    pub(crate) dirty: Arc<crate::proxy::upstream::dirty::Dirty>,
    /// During cutover: requests on moving keys wait for `resume`.
    pub(crate) paused: bool,
    /// Becomes true when the cutover ends (either way).
    pub(crate) resume: Arc<tokio::sync::watch::Sender<bool>>,
}

/// What a session routes by: an immutable snapshot, swapped whole.
pub(crate) struct Routing {
    pub(crate) ring: Arc<Ring>,
    /// Aligned with `ring.nodes()`: the shard at each ring entry.
    pub(crate) shards: Vec<Arc<Shard>>,
    /// Present while keys are being copied to their next owners.
    pub(crate) migration: Option<Arc<MigrationRoute>>,
    /// Nodes may hold copies of keys they do not own (during a migration or
    /// its sweep): KEYS and SCAN drop those.
    pub(crate) filter_keys: bool,
    /// A planned failover's pause: requests on this ring entry's keys wait
    /// until the sender says the switch is over (`CLUSTER FAILOVER`).
    pub(crate) paused_shard: Option<(usize, Arc<tokio::sync::watch::Sender<bool>>)>,
    /// Requests being dispatched with this snapshot right now (the epoch gate).
    dispatching: AtomicUsize,
    /// Woken when `dispatching` drops to zero (a Notify, not polling: the
    /// cutover pause waits on it).
    drained: Notify,
}

impl Routing {
    pub(crate) fn new(
        ring: Arc<Ring>,
        shards: Vec<Arc<Shard>>,
        migration: Option<Arc<MigrationRoute>>,
        filter_keys: bool,
    ) -> Routing {
        Routing {
            ring,
            shards,
            migration,
            filter_keys,
            paused_shard: None,
            dispatching: AtomicUsize::new(0),
            drained: Notify::new(),
        }
    }

    /// The shard owning `key` in the current ring.
    pub(crate) fn shard(&self, key: &[u8]) -> &Arc<Shard> {
        &self.shards[self.ring.locate(key)]
    }

    /// The node serving `key` in the current ring (its shard's primary).
    pub(crate) fn owner(&self, key: &[u8]) -> &Arc<Node> {
        self.shard(key).primary()
    }

    /// The node serving ring entry `idx` (its shard's primary).
    pub(crate) fn node(&self, idx: usize) -> &Arc<Node> {
        self.shards[idx].primary()
    }

    /// The next ring's nodes while a change runs (a shard being added is in
    /// it only); none otherwise.
    pub(crate) fn next_nodes(&self) -> &[NodeSpec] {
        self.migration.as_ref().map_or(&[], |m| m.next.nodes())
    }

    /// The node serving each ring entry, in ring order.
    pub(crate) fn primaries(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.shards.iter().map(|s| s.primary())
    }

    /// Waits until no dispatch holds this snapshot. Called after the snapshot
    /// was swapped out: with [`enter`]'s re-check, no new dispatch can then
    /// start on it, so once this returns nothing routed by it is unsent.
    pub(crate) async fn drained(&self) {
        loop {
            let woken = self.drained.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            // Pairs with the fence in `enter`: either that dispatch sees the
            // new snapshot, or this load sees its count.
            fence(Ordering::SeqCst);
            if self.dispatching.load(Ordering::SeqCst) == 0 {
                return;
            }
            woken.await;
        }
    }

    /// True when `key`'s owner in the next ring differs from its owner now.
    pub(crate) fn is_moving(&self, key: &[u8]) -> bool {
        match &self.migration {
            Some(m) => !Arc::ptr_eq(m.next_shards[m.next.locate(key)].primary(), self.owner(key)),
            None => false,
        }
    }
}

/// A routing snapshot entered for one dispatch: while it lives, a topology
/// change that swapped this snapshot out waits (`Routing::drained`) before
/// it treats the snapshot's requests as sent. Derefs to the snapshot.
pub(crate) struct Gate(Arc<Routing>);

impl std::ops::Deref for Gate {
    type Target = Arc<Routing>;
    fn deref(&self) -> &Arc<Routing> {
        &self.0
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if self.0.dispatching.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

/// The one routing primitive: loads the current snapshot, waits out a paused
/// cutover if any of `keys` is moving, enters the snapshot's epoch gate, then
/// re-checks that the snapshot is still current (else leaves and retries).
///
/// The re-check closes the race where a request loads snapshot S, a cutover
/// swaps S out and finds S drained, and only then the request enters S and is
/// sent to a key's old owner after the final re-sync (a lost write).
pub(crate) async fn enter<'k, I>(current: &ArcSwap<Routing>, keys: impl Fn() -> I) -> Gate
where
    I: Iterator<Item = &'k Bytes>,
{
    match enter_for(current, keys, || false).await {
        Some(gate) => gate,
        None => unreachable!("a client that never hangs up is always admitted"),
    }
}

/// [`enter`] for a client's request: `None` when the request had to wait
/// out a cutover and `hung_up` says its client closed the connection
/// meanwhile. Such a request is never sent: a pause can outlast a client's
/// timeout (a leader lost in its cutover holds moving keys until its
/// successor finishes), and a write the client gave up on, sent seconds
/// later, could land after the writes the client made since on a new
/// connection (Redis, too, drops what a closed client had not yet run).
pub(crate) async fn enter_for<'k, I>(
    current: &ArcSwap<Routing>,
    keys: impl Fn() -> I,
    hung_up: impl Fn() -> bool,
) -> Option<Gate>
where
    I: Iterator<Item = &'k Bytes>,
{
    loop {
        let routing = current.load_full();
        if wait_cutover(&routing, keys()).await {
            if hung_up() {
                return None;
            }
            continue;
        }
        if let Some(gate) = admit(current, routing) {
            return Some(gate);
        }
    }
}

/// Enters `routing`'s epoch gate if it is still the current snapshot; `None`
/// (gate left again) if a change swapped it out meanwhile.
fn admit(current: &ArcSwap<Routing>, routing: Arc<Routing>) -> Option<Gate> {
    routing.dispatching.fetch_add(1, Ordering::SeqCst);
    let gate = Gate(routing);
    fence(Ordering::SeqCst);
    Arc::ptr_eq(&gate.0, &current.load()).then_some(gate)
}

/// During a change's cutover, requests on moving keys wait for it to end;
/// true when this request had to wait (the caller then routes it afresh).
async fn wait_cutover<'k>(routing: &Routing, mut keys: impl Iterator<Item = &'k Bytes>) -> bool {
    if let Some((idx, resume)) = &routing.paused_shard {
        let hit = keys.any(|k| routing.ring.locate(k) == *idx);
        if hit {
            let mut rx = resume.subscribe();
            let _ = rx.wait_for(|done| *done).await;
            return true;
        }
        return false;
    }
    let Some(m) = &routing.migration else {
        return false;
    };
    if !m.paused || !keys.any(|k| routing.is_moving(k)) {
        return false;
    }
    let mut rx = m.resume.subscribe();
    let _ = rx.wait_for(|done| *done).await;
    true
}

/// The nodes that own keys now (during a change, the current ring's: the
/// joining node only holds copies until the cutover).
pub(crate) fn all_nodes(routing: &Routing) -> Vec<Arc<Node>> {
    routing.primaries().cloned().collect()
}

/// A ring member's connections, with the config's timeouts, limits and
/// handshake (TLS, credentials, a pool's database).
pub(crate) fn new_node(
    spec: &NodeSpec,
    config: &crate::proxy::Config,
    timeouts: &Arc<crate::proxy::upstream::Timeouts>,
) -> Node {
    new_member(spec, &spec.name, config, timeouts)
}

/// The connections to `spec`, a member of the shard named `shard` (its
/// primary, or a replica): reached and logged in to as the shard's
/// `[[nodes]]` entry says.
pub(crate) fn new_member(
    spec: &NodeSpec,
    shard: &str,
    config: &crate::proxy::Config,
    timeouts: &Arc<crate::proxy::upstream::Timeouts>,
) -> Node {
    let opts = crate::proxy::upstream::UpstreamOptions {
        label: String::new(),
        addr: String::new(),
        proto: 2,
        timeouts: timeouts.clone(),
        pinned: false,
        script_lane: None,
        max_bulk_len: config.limits.max_bulk_len,
        credentials: config.node_auth.for_node(shard),
        select: config.node_auth.select(),
        tls: config.node_auth.tls.for_node(shard),
    };
    Node::new(
        spec.clone(),
        config.connections_per_node,
        config.max_pinned_per_node,
        opts,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::RingConfig;
    use std::time::Duration;

    fn routing(epoch: u64) -> Routing {
        let spec = NodeSpec {
            name: "a".into(),
            addr: "127.0.0.1:1".into(),
            weight: 1,
        };
        let ring = Ring::new(vec![spec], RingConfig::default(), epoch).unwrap();
        Routing::new(Arc::new(ring), Vec::new(), None, false)
    }

    /// The race the re-check closes: a request loaded the live snapshot, the
    /// cutover swapped it out and found it drained, and only then does the
    /// request try to enter it: it must be turned away (and route afresh).
    #[tokio::test]
    async fn a_snapshot_found_drained_cannot_be_entered_any_more() {
        let current = ArcSwap::from_pointee(routing(1));
        let loaded = current.load_full();
        current.store(Arc::new(routing(2)));
        loaded.drained().await;
        assert!(admit(&current, loaded.clone()).is_none());
        assert_eq!(loaded.dispatching.load(Ordering::SeqCst), 0);
        let gate = enter(&current, std::iter::empty).await;
        assert_eq!(gate.ring.epoch(), 2);
    }

    /// A swapped-out snapshot is not drained while a dispatch holds it, and
    /// is as soon as the last one leaves.
    #[tokio::test]
    async fn drained_waits_for_the_last_dispatch() {
        let current = ArcSwap::from_pointee(routing(1));
        let gate = enter(&current, std::iter::empty).await;
        let old = current.swap(Arc::new(routing(2)));
        let wait = tokio::time::timeout(Duration::from_millis(50), old.drained()).await;
        assert!(wait.is_err(), "drained while a dispatch holds the snapshot");
        let waiter = tokio::spawn({
            let old = old.clone();
            async move { old.drained().await }
        });
        drop(gate);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("drained once the last dispatch left")
            .unwrap();
    }
}
