//! Deleting copies a node holds but does not own: after a cutover (the old
//! owners' leftovers), after an abort (the targets' partial copies), and in
//! the background for nodes that were unreachable then (the pending list,
//! persisted, retried with backoff, flushed before such a node is re-added).
//! Called by `drive` and the admin path; a sweep only runs while no copy is
//! under way (a copy puts on a node keys it does not own yet).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::{fault_phase_delay, persist};
use crate::proxy::admin::migration::mover::{delete_keys, scan_node, AsyncBatch, Conns, NodeError};
use crate::proxy::upstream::topology::{MigrationRoute, Routing};
use crate::proxy::Proxy;
use crate::ring::{NodeSpec, Ring};

/// Background retries of pending sweeps back off from this...
const RETRY_FIRST_MS: u64 = 250;
/// ...to this.
const RETRY_MAX_MS: u64 = 5_000;

struct Sweep<'a> {
    proxy: &'a Proxy,
    ring: &'a Ring,
    node: &'a NodeSpec,
}

impl AsyncBatch for Sweep<'_> {
    async fn batch(&mut self, conns: &mut Conns, keys: Vec<Bytes>) -> Result<(), NodeError> {
        let strays: Vec<Bytes> = keys
            .into_iter()
            .filter(|k| self.ring.node(self.ring.locate(k)).name != self.node.name)
            .collect();
        if !strays.is_empty() {
            let n = delete_keys(conns, self.node, &strays).await?;
            self.proxy
                .migration
                .keys_swept
                .fetch_add(n.max(0) as u64, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Deletes, on each of `nodes` (all at once, each over its own connection),
/// the keys it holds but does not own in `ring`; returns the nodes that failed.
pub(crate) async fn sweep_nodes(proxy: &Proxy, ring: &Ring, nodes: &[NodeSpec]) -> Vec<NodeError> {
    let timeout = Duration::from_millis(proxy.config().migration.timeout_ms);
    let sweeps = nodes.iter().map(|node| async move {
        let step = Sweep { proxy, ring, node };
        let batch = proxy.config().migration.batch;
        scan_node(&mut Conns::new(proxy, timeout), node, batch, step).await
    });
    futures::future::join_all(sweeps)
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect()
}

/// KEYS and SCAN must hide strays while a member node may hold some.
fn members_have_strays(proxy: &Proxy, ring: &Ring) -> bool {
    proxy
        .migration
        .pending()
        .iter()
        .any(|n| ring.index_of(&n.name).is_some())
}

fn pending_note(proxy: &Proxy) -> String {
    let p = proxy.migration.pending();
    if p.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = p.iter().map(|n| n.name.as_str()).collect();
    format!(
        "copies left on unreachable node(s) {}; deleted when they answer again",
        names.join(", ")
    )
}

/// After cutover: delete the old owners' (and any pending node's) leftover
/// copies in one pass, then end the change. A node that does not answer is
/// recorded as pending and retried in the background: the change ends anyway,
/// so a dead node never blocks the next one.
pub(crate) async fn sweep_and_finish(
    proxy: &Arc<Proxy>,
    losing: Vec<NodeSpec>,
    leaving: Vec<String>,
) {
    proxy.migration.state("sweeping");
    fault_phase_delay().await;
    let routing = proxy.routing.load_full();
    let mut nodes = losing;
    for p in proxy.migration.pending() {
        if !nodes.iter().any(|n| n.name == p.name) {
            nodes.push(p);
        }
    }
    let failed = sweep_nodes(proxy, &routing.ring, &nodes).await;
    for n in &nodes {
        if !failed.iter().any(|e| e.node == n.name) {
            proxy.migration.drop_pending(&n.name);
        }
    }
    for e in &failed {
        if let Some(spec) = nodes.iter().find(|n| n.name == e.node) {
            proxy.migration.add_pending(spec);
        }
    }
    let mut notes = Vec::new();
    if let Err(e) = persist(proxy, &routing.ring, None).await {
        // The file still says "sweep": a restart sweeps again, which is harmless.
        notes.push(e.to_string());
    }
    notes.push(pending_note(proxy));
    notes.retain(|n| !n.is_empty());
    let note = notes.join("; ");
    proxy.routing.store(Arc::new(Routing::new(
        routing.ring.clone(),
        routing.shards.clone(),
        None,
        members_have_strays(proxy, &routing.ring),
    )));
    for n in &leaving {
        proxy.release(n);
    }
    proxy.migration.set(|t| t.last_error = note);
    proxy.migration.state("ok");
    tracing::info!(
        copied = proxy.migration.keys_copied.load(Ordering::Relaxed),
        resynced = proxy.migration.keys_resynced.load(Ordering::Relaxed),
        swept = proxy.migration.keys_swept.load(Ordering::Relaxed),
        pending = proxy.migration.pending().len(),
        "topology change finished"
    );
    spawn_retry(proxy);
}

/// The copy failed: keep the current ring (it never stopped routing), delete
/// partial copies on every target — the joining node included — and record
/// the targets that do not answer, so their copies are deleted later.
pub(crate) async fn abort(
    proxy: &Arc<Proxy>,
    routing: &Arc<Routing>,
    m: &MigrationRoute,
    why: &str,
) {
    tracing::warn!(reason = %why, "topology change aborted");
    let plain = Arc::new(Routing::new(
        routing.ring.clone(),
        routing.shards.clone(),
        None,
        true,
    ));
    let old = proxy.routing.swap(plain);
    old.drained().await;
    let targets: Vec<NodeSpec> = crate::proxy::admin::migration::copy::targets(routing, m)
        .iter()
        .map(|n| n.spec.clone())
        .collect();
    let failed = sweep_nodes(proxy, &routing.ring, &targets).await;
    for e in &failed {
        if let Some(spec) = targets.iter().find(|n| n.name == e.node) {
            proxy.migration.add_pending(spec);
        }
    }
    let mut notes = Vec::new();
    if let Err(e) = persist(proxy, &routing.ring, None).await {
        let e = e.to_string();
        if !why.contains(&e) {
            notes.push(e);
        }
    }
    notes.push(pending_note(proxy));
    notes.retain(|n| !n.is_empty());
    proxy.routing.store(Arc::new(Routing::new(
        routing.ring.clone(),
        routing.shards.clone(),
        None,
        members_have_strays(proxy, &routing.ring),
    )));
    for n in m.next_shards.iter().map(|s| s.primary()) {
        if routing.ring.index_of(&n.spec.name).is_none() {
            proxy.release(&n.spec.name);
        }
    }
    proxy.migration.set(|t| {
        t.last_error = format!(
            "change aborted, the ring is unchanged and no key was lost: {why}{}",
            notes.iter().map(|n| format!("; {n}")).collect::<String>()
        );
    });
    proxy.migration.state("aborted");
    spawn_retry(proxy);
}

/// Sweeps pending nodes now, against the current ring. The caller holds
/// `admin_lock` and no change runs. Returns the nodes still pending.
pub(crate) async fn sweep_pending(proxy: &Proxy, only: Option<&str>) -> Vec<NodeError> {
    let routing = proxy.routing.load_full();
    let nodes: Vec<NodeSpec> = proxy
        .migration
        .pending()
        .into_iter()
        .filter(|n| only.is_none_or(|o| n.name == o || n.addr == o))
        .collect();
    if nodes.is_empty() {
        return Vec::new();
    }
    let failed = sweep_nodes(proxy, &routing.ring, &nodes).await;
    let mut changed = false;
    for n in &nodes {
        if !failed.iter().any(|e| e.node == n.name) {
            changed |= proxy.migration.drop_pending(&n.name);
        }
    }
    if changed {
        if let Err(e) = persist(proxy, &routing.ring, None).await {
            proxy.migration.set(|t| t.last_error = e.to_string());
        }
        proxy.routing.store(Arc::new(Routing::new(
            routing.ring.clone(),
            routing.shards.clone(),
            None,
            members_have_strays(proxy, &routing.ring),
        )));
        if proxy.migration.pending().is_empty() {
            proxy.migration.set(|t| {
                if t.last_error.contains("copies left on unreachable") {
                    t.last_error.clear();
                }
            });
        }
    }
    failed
}

/// Starts the background retry of pending sweeps, unless it runs already.
pub(crate) fn spawn_retry(proxy: &Arc<Proxy>) {
    if proxy.migration.pending().is_empty() || proxy.migration.retrying.swap(true, Ordering::AcqRel)
    {
        return;
    }
    let p = proxy.clone();
    tokio::spawn(async move {
        let mut backoff = RETRY_FIRST_MS;
        loop {
            tokio::time::sleep(Duration::from_millis(backoff)).await;
            backoff = (backoff * 2).min(RETRY_MAX_MS);
            {
                // The admin lock keeps a change from starting mid-sweep.
                let _lock = p.admin_lock.lock().await;
                if !p.migration.is_changing() {
                    sweep_pending(&p, None).await;
                }
            }
            if p.migration.pending().is_empty() {
                p.migration.retrying.store(false, Ordering::Release);
                // A node may have been recorded since the check.
                if p.migration.pending().is_empty()
                    || p.migration.retrying.swap(true, Ordering::AcqRel)
                {
                    return;
                }
            }
        }
    });
}
