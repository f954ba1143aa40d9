//! Routing by a topology another proxy wrote to the shared store: the ring
//! and epoch it names, and during its change the same copy or sweep routing
//! the driving proxy has (old owners authoritative until the flip, moving
//! writes tracked as dirty; in the cutover phase, moving keys paused). The
//! change's state is mirrored for `CLUSTER RINGINFO`, marked as followed so
//! this proxy neither drives it nor starts another. [`prepare`] then makes
//! the proxy ready for the phase before it acknowledges it to the fleet.
//! Called by the fleet follower (`admin::fleet`) and at start-up.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::cutover::resync;
use super::mover::{Conns, NodeError};
use super::MigrationError;
use crate::proxy::admin::state::{self, Saved};
use crate::proxy::upstream::dirty::Dirty;
use crate::proxy::upstream::topology::{MigrationRoute, Routing};
use crate::proxy::Proxy;
use crate::ring::Ring;

/// Makes this proxy route as `saved` says; a no-op when it already does.
/// Returns the snapshot it replaced, if it replaced one.
pub(crate) fn apply(proxy: &Proxy, saved: &Saved) -> Result<Option<Arc<Routing>>, MigrationError> {
    let cur = proxy.routing.load_full();
    let same_ring = cur.ring.epoch() == saved.epoch && cur.ring.nodes() == &saved.nodes[..];
    let ring = if same_ring {
        cur.ring.clone()
    } else {
        Arc::new(Ring::new(
            saved.nodes.clone(),
            proxy.config().ring,
            saved.epoch,
        )?)
    };
    let shards = if same_ring {
        cur.shards.clone()
    } else {
        proxy.shards_for(&ring)
    };
    let label = state::change_label(saved);
    let routing = match &saved.migration {
        None => {
            let strays = !saved.pending_sweep.is_empty();
            if same_ring && cur.migration.is_none() && cur.filter_keys == strays {
                finish_following(proxy);
                return Ok(None);
            }
            Routing::new(ring, shards, None, strays)
        }
        Some(m) if m.phase == "sweep" => {
            if same_ring && cur.migration.is_none() && cur.filter_keys {
                return Ok(None);
            }
            mirror(proxy, &label, "sweeping");
            Routing::new(ring, shards, None, true)
        }
        Some(m) => {
            let paused = m.phase == "cutover";
            // The same change, in another phase: its dirty set goes on.
            let same = cur
                .migration
                .as_ref()
                .filter(|r| same_ring && r.next.epoch() == m.other_epoch);
            if same.is_some_and(|r| r.paused == paused) {
                return Ok(None);
            }
            let (next, next_shards, dirty) = match same {
                Some(r) => (r.next.clone(), r.next_shards.clone(), r.dirty.clone()),
                None => {
                    let next = Arc::new(Ring::new(
                        state::to_specs(&m.other_nodes),
                        proxy.config().ring,
                        m.other_epoch,
                    )?);
                    let shards = proxy.shards_for(&next);
                    (next, shards, Arc::new(Dirty::default()))
                }
            };
            let (resume, _) = tokio::sync::watch::channel(false);
            let route = Arc::new(MigrationRoute {
                next,
                next_shards,
                dirty,
                paused,
                resume: Arc::new(resume),
            });
            mirror(proxy, &label, if paused { "cutover" } else { "copying" });
            Routing::new(ring, shards, Some(route), true)
        }
    };
    let old = proxy.routing.swap(Arc::new(routing));
    if let Some(m) = &old.migration {
        // Requests paused on the old routing go on by the new one.
        m.resume.send_replace(true);
    }
    if saved.migration.is_none() {
        finish_following(proxy);
    }
    tracing::info!(epoch = saved.epoch, nodes = saved.nodes.len(), change = %label, "routing by the topology another proxy wrote");
    Ok(Some(old))
}

/// After [`apply`] replaced `old` (if it did): makes this proxy ready for
/// the phase it now routes by, before it acknowledges it. Every request
/// routed by `old` has been sent; when a copy began, every write sent
/// before has been answered (so the copy reads it, or the write is
/// tracked); in a cutover, moving keys are paused, every tracked write is
/// answered, and this proxy's dirty keys are re-synced.
pub(crate) async fn prepare(proxy: &Proxy, old: Option<Arc<Routing>>) -> Result<(), NodeError> {
    let cur = proxy.routing.load_full();
    if let Some(old) = &old {
        old.drained().await;
        let next_of = |r: &Routing| r.migration.as_ref().map(|m| m.next.epoch());
        if cur.migration.is_some() && next_of(old) != next_of(&cur) {
            for n in old.primaries() {
                n.barrier().await;
            }
        }
    }
    if let Some(m) = cur.migration.as_ref().filter(|m| m.paused) {
        m.dirty.settled().await;
        let timeout = Duration::from_millis(proxy.config().migration.timeout_ms);
        let mut conns = Conns::new(proxy, timeout);
        resync(proxy, &cur, m, &mut conns, false).await?;
    }
    Ok(())
}

/// Shows another proxy's change as this proxy's state, marked as followed.
fn mirror(proxy: &Proxy, label: &str, state: &str) {
    let t = &proxy.migration;
    if !t.following.load(Ordering::Relaxed) || !t.is_changing() {
        t.reset(format!("{label} (driven by another proxy)"));
        t.following.store(true, Ordering::Relaxed);
    }
    t.state(state);
}

fn finish_following(proxy: &Proxy) {
    let t = &proxy.migration;
    if t.following.load(Ordering::Relaxed) && t.is_changing() {
        t.state("ok");
    }
}

/// A leader that lost the election in the middle of its change: it stops
/// driving and routes by the store, as any other proxy of the fleet.
pub(crate) async fn stand_down(proxy: &Proxy, why: &str) {
    tracing::warn!(reason = %why, "this proxy no longer leads the fleet: its change goes on under the new leader");
    proxy.migration.following.store(true, Ordering::Relaxed);
    let Some(store) = proxy.store.clone() else {
        return;
    };
    let read =
        tokio::task::spawn_blocking(move || store.load().map(|s| s.map(|s| (store.revision(), s))));
    match read.await {
        Ok(Ok(Some((rev, saved)))) => match apply(proxy, &saved) {
            Ok(_) => {
                if let Some(f) = proxy.store.as_deref().and_then(|s| s.fleet()) {
                    f.routed_by(rev);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot route by the topology in the store"),
        },
        Ok(Ok(None)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "reading the topology after standing down"),
        Err(e) => tracing::warn!(error = %e, "reading the topology after standing down"),
    }
}
