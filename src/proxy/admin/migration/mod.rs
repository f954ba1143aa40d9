//! Online migration: copy exactly the keys whose owner changes, then cut over,
//! while clients keep being served — without losing an acknowledged write or
//! resurrecting a deleted key, whichever party dies or stops.
//!
//! The protocol (the README's "Migration" section gives the argument):
//! 1. **Copy** (`copy.rs`, paced by `pacer/`). The current ring keeps
//!    routing every request, so old owners stay authoritative. The proxy tracks every moving key a client
//!    writes (the [`Dirty`] set, marked when the write's reply arrives). After
//!    an epoch barrier (no request routed by the previous snapshot is still
//!    unanswered), the mover walks every old owner that loses keys with SCAN
//!    and copies each moving key with `MIGRATE … COPY REPLACE KEYS …`.
//! 2. **Catch-up** (`cutover.rs`). Dirty keys are re-synced (delete at the
//!    target, copy again from the source) in rounds while clients keep writing.
//! 3. **Cutover** (`cutover.rs`). Requests on moving keys pause; once every
//!    write already sent has been answered, the remaining dirty keys are
//!    re-synced, the new ring is persisted and swapped in, and the paused
//!    requests go on at their new owners.
//! 4. **Sweep** (`sweep.rs`). Old owners' leftover copies are deleted in one
//!    pass; a node that does not answer is recorded and retried in the
//!    background, and the change ends anyway.
//!
//! Anything failing before the swap aborts the change: the ring never stopped
//! routing, so no key is lost, and the targets' partial copies are deleted
//! (later, for a target that does not answer). `CLUSTER REMOVENODE` of an
//! unreachable node aborts a copy in progress. Called by the admin path
//! (`begin`, `remove_unreachable`) and at start-up (`resume`); the only code
//! that swaps routing snapshots.

pub(crate) mod barrier;
mod change;
mod copy;
mod cutover;
mod error;
pub(crate) mod follow;
mod mover;
mod pacer;
mod status;
mod sweep;

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub(crate) use crate::proxy::upstream::dirty::{track_write, Dirty};
pub(crate) use error::MigrationError;
pub(crate) use status::Tracker;

use crate::proxy::admin::state::{self, Saved, SavedMigration};
use crate::proxy::upstream::topology::{MigrationRoute, Routing};
use crate::proxy::Proxy;
use crate::ring::{NodeSpec, Ring};
use mover::{Conns, NodeError};

/// Catch-up rounds stop once this few dirty keys remain (the cutover pause re-syncs them).
const CUTOVER_DIRTY_KEYS: usize = 2_000;
const MAX_CATCH_UP_ROUNDS: usize = 8;

pub(crate) use change::Change;

/// Fault injection for the consistency checker: with
/// `SHARDIS_FAULT_PHASE_DELAY_MS=n`, catch-up, the cutover pause and the sweep
/// each last at least n ms longer, so a fault can be injected inside each.
async fn fault_phase_delay() {
    static DELAY: OnceLock<u64> = OnceLock::new();
    let ms = *DELAY.get_or_init(|| {
        std::env::var("SHARDIS_FAULT_PHASE_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    });
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Saves the topology to the proxy's store off the runtime threads (fsync can take
/// milliseconds, and the cutover writes inside its pause); returns the time
/// it took in microseconds. The pending sweeps go along.
pub(crate) async fn persist(
    proxy: &Proxy,
    ring: &Ring,
    migration: Option<SavedMigration>,
) -> Result<u64, MigrationError> {
    let Some(store) = proxy.store.clone() else {
        return Ok(0);
    };
    let saved = Saved {
        epoch: ring.epoch(),
        nodes: ring.nodes().to_vec(),
        migration,
        pending_sweep: proxy.migration.pending(),
        replicas: proxy.ha.all_replicas(),
    };
    // One writer at a time: they share the temporary file's name.
    let _one = proxy.migration.persist_lock.lock().await;
    let t0 = Instant::now();
    tokio::task::spawn_blocking(move || store.save(&saved))
        .await
        .map_err(|e| MigrationError::StateTask(e.to_string()))??;
    Ok(t0.elapsed().as_micros() as u64)
}

/// Starts a change: builds the next ring, persists it, and starts the copy.
/// Returns the ring rebuild time in microseconds. The caller holds
/// `admin_lock` and has validated the change. If the state file cannot be
/// written the change does not start, and the error names the file.
pub(crate) async fn begin(proxy: &Arc<Proxy>, change: Change) -> Result<u64, MigrationError> {
    let cur = proxy.routing.load_full();
    if cur.migration.is_some() || proxy.migration.is_changing() {
        return Err(MigrationError::InProgress);
    }
    let (specs, label) = change.next_nodes(cur.ring.nodes());
    let t0 = Instant::now();
    let next = cur.ring.with_nodes(specs)?;
    let rebuild_us = t0.elapsed().as_micros() as u64;
    let saved = SavedMigration {
        phase: "copy".into(),
        other_epoch: next.epoch(),
        other_nodes: state::to_saved(next.nodes()),
    };
    if let Err(e) = persist(proxy, &cur.ring, Some(saved)).await {
        proxy
            .migration
            .set(|t| t.last_error = format!("{label} not started: {e}"));
        return Err(MigrationError::Unchanged(Box::new(e)));
    }
    proxy
        .migration
        .last_rebuild_us
        .store(rebuild_us, Ordering::Relaxed);
    proxy.migration.reset(label);
    let route = new_route(proxy, Arc::new(next));
    let old = proxy.routing.swap(Arc::new(Routing::new(
        cur.ring.clone(),
        cur.shards.clone(),
        Some(route),
        true,
    )));
    if !crate::proxy::admin::store::is_leader(proxy.store.as_deref()) {
        // The fleet's leader drives it once it sees it in the store; this
        // proxy routes by it meanwhile, as every other proxy does, and
        // tells the leader once its earlier writes are answered.
        proxy.migration.following.store(true, Ordering::Relaxed);
        let p = proxy.clone();
        let rev = proxy.store.as_ref().map_or(0, |s| s.revision());
        tokio::spawn(async move {
            old.drained().await;
            for n in old.primaries() {
                n.barrier().await;
            }
            drop(old);
            barrier::acknowledge(&p, rev).await;
        });
        return Ok(rebuild_us);
    }
    let p = proxy.clone();
    tokio::spawn(async move {
        // Writes routed before tracking began must be answered before the copy
        // reads their keys.
        old.drained().await;
        for n in old.primaries() {
            n.barrier().await;
        }
        drop(old);
        drive(p, false).await;
    });
    Ok(rebuild_us)
}

fn new_route(proxy: &Proxy, next: Arc<Ring>) -> Arc<MigrationRoute> {
    let next_shards = proxy.shards_for(&next);
    let (resume, _) = tokio::sync::watch::channel(false);
    Arc::new(MigrationRoute {
        next,
        next_shards,
        dirty: Arc::new(Dirty::default()),
        paused: false,
        resume: Arc::new(resume),
    })
}

/// Restores what the state file says is unfinished after a restart: a change
/// (resumed from its copy or its sweep) and the pending sweeps.
pub(crate) fn resume(proxy: &Arc<Proxy>, saved: Saved) -> Result<(), MigrationError> {
    resume_with(proxy, saved, "after restart")
}

/// [`resume`], saying why in the change's label (`after restart`, `as the
/// new leader`).
pub(crate) fn resume_with(
    proxy: &Arc<Proxy>,
    saved: Saved,
    why: &str,
) -> Result<(), MigrationError> {
    for n in &saved.pending_sweep {
        proxy.migration.add_pending(n);
    }
    let cur = proxy.routing.load_full();
    let Some(m) = saved.migration else {
        if !saved.pending_sweep.is_empty() {
            let strays = saved
                .pending_sweep
                .iter()
                .any(|n| cur.ring.index_of(&n.name).is_some());
            proxy.routing.store(Arc::new(Routing::new(
                cur.ring.clone(),
                cur.shards.clone(),
                None,
                strays,
            )));
            sweep::spawn_retry(proxy);
        }
        return Ok(());
    };
    let other = Arc::new(proxy.ring(state::to_specs(&m.other_nodes), m.other_epoch)?);
    proxy.migration.reset(format!("resumed {} {why}", m.phase));
    let p = proxy.clone();
    if m.phase == "sweep" {
        proxy.routing.store(Arc::new(Routing::new(
            cur.ring.clone(),
            cur.shards.clone(),
            None,
            true,
        )));
        proxy.migration.state("sweeping");
        let leaving: Vec<String> = other
            .nodes()
            .iter()
            .filter(|n| cur.ring.index_of(&n.name).is_none())
            .map(|n| n.name.clone())
            .collect();
        tokio::spawn(async move {
            let losing = crate::ring::losing_nodes(&other, &p.routing.load().ring);
            let losing = other
                .nodes()
                .iter()
                .zip(&losing)
                .filter(|(_, l)| **l)
                .map(|(n, _)| n.clone())
                .collect();
            sweep::sweep_and_finish(&p, losing, leaving).await;
        });
    } else {
        // A follower taking over keeps the dirty keys it tracked.
        let route = match cur
            .migration
            .as_ref()
            .filter(|r| r.next.epoch() == other.epoch())
        {
            Some(r) => {
                let (resume, _) = tokio::sync::watch::channel(false);
                Arc::new(MigrationRoute {
                    next: r.next.clone(),
                    next_shards: r.next_shards.clone(),
                    dirty: r.dirty.clone(),
                    paused: false,
                    resume: Arc::new(resume),
                })
            }
            None => new_route(proxy, other),
        };
        let old = proxy.routing.swap(Arc::new(Routing::new(
            cur.ring.clone(),
            cur.shards.clone(),
            Some(route),
            true,
        )));
        if let Some(m) = &old.migration {
            // Requests paused by a cutover the old leader left go on.
            m.resume.send_replace(true);
        }
        tokio::spawn(drive(p, true));
    }
    Ok(())
}

/// Waits until an operator asks the running change to abort.
async fn abort_requested(proxy: &Proxy) -> NodeError {
    loop {
        let woken = proxy.migration.abort.notified();
        if let Some(why) = proxy.migration.abort_reason() {
            return NodeError {
                node: why.0,
                why: why.1,
            };
        }
        woken.await;
    }
}

/// Runs a change from its copy phase to the end (or its abort).
async fn drive(proxy: Arc<Proxy>, restarted: bool) {
    let started = Instant::now();
    let routing = proxy.routing.load_full();
    let Some(m) = routing.migration.clone() else {
        return;
    };
    let timeout = Duration::from_millis(proxy.config().migration.timeout_ms);
    let mut conns = Conns::new(&proxy, timeout);
    let before_swap = async {
        // Every proxy tracks its writes to moving keys before the copy reads.
        let members = barrier::wait(&proxy, "copy").await?;
        // A node that still holds strays must lose them before it gains keys:
        // a stray of a key deleted since would otherwise come back.
        let gaining: Vec<String> = copy::targets(&routing, &m)
            .iter()
            .map(|n| n.spec.name.clone())
            .collect();
        for p in proxy.migration.pending() {
            if gaining.contains(&p.name) {
                if let Some(e) = sweep::sweep_nodes(&proxy, &routing.ring, std::slice::from_ref(&p))
                    .await
                    .into_iter()
                    .next()
                {
                    return Err(e);
                }
                proxy.migration.drop_pending(&p.name);
            }
        }
        if restarted {
            copy::reconcile(&proxy, &routing, &m, &mut conns).await?;
        }
        copy::copy_walk(&proxy, &routing, &m, &mut conns).await?;
        proxy.migration.state("catch-up");
        fault_phase_delay().await;
        for _ in 0..MAX_CATCH_UP_ROUNDS {
            if m.dirty.len() <= CUTOVER_DIRTY_KEYS {
                break;
            }
            cutover::resync(&proxy, &routing, &m, &mut conns, true).await?;
        }
        Ok(members)
    };
    let result = tokio::select! {
        r = before_swap => r,
        e = abort_requested(&proxy) => Err(e),
    };
    let result = match result {
        Ok(members) => cutover::cutover(&proxy, &routing, &m, &mut conns, &members).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => {
            let losing = copy::sources(&routing, &m)
                .iter()
                .map(|n| n.spec.clone())
                .collect();
            let leaving = routing
                .primaries()
                .filter(|n| m.next.index_of(&n.spec.name).is_none())
                .map(|n| n.spec.name.clone())
                .collect();
            sweep::sweep_and_finish(&proxy, losing, leaving).await;
            proxy
                .migration
                .set(|t| t.last_duration_ms = started.elapsed().as_millis() as u64);
        }
        // A leader fenced off (its lease lapsed, another leads) neither
        // aborts nor sweeps: the change goes on under the new leader.
        Err(e) if is_fenced_off(&proxy) => follow::stand_down(&proxy, &e.to_string()).await,
        Err(e) => sweep::abort(&proxy, &routing, &m, &e.to_string()).await,
    }
}

/// Whether this proxy lost the fleet's lead, or its lease (the election
/// may not have told it yet): its change is no longer its own.
fn is_fenced_off(proxy: &Proxy) -> bool {
    let store = proxy.store.as_deref();
    !crate::proxy::admin::store::is_leader(store) || !crate::proxy::admin::store::is_serving(store)
}

/// Waits (at most `max`) until no change runs; false on timeout.
pub(crate) async fn wait_idle(proxy: &Proxy, max: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let woken = proxy.migration.ended.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if !proxy.migration.is_changing() {
            return true;
        }
        if tokio::time::timeout_at(deadline, woken).await.is_err() {
            return false;
        }
    }
}

/// Deletes the strays of a pending node now (before it is re-added); the
/// caller holds `admin_lock` and no change runs. Ok when nothing is pending
/// for `name_or_addr`.
pub(crate) async fn sweep_before_readd(
    proxy: &Proxy,
    name_or_addr: &str,
) -> Result<(), MigrationError> {
    match sweep::sweep_pending(proxy, Some(name_or_addr))
        .await
        .into_iter()
        .next()
    {
        Some(e) => Err(MigrationError::Node(e)),
        None => Ok(()),
    }
}

/// Forgets the pending sweep of a node that is not in the ring; true if it
/// was pending (`CLUSTER REMOVENODE` of such a node).
pub(crate) async fn forget_pending(
    proxy: &Proxy,
    name_or_addr: &str,
) -> Result<bool, MigrationError> {
    if !proxy.migration.drop_pending(name_or_addr) {
        return Ok(false);
    }
    let ring = proxy.routing.load().ring.clone();
    persist(proxy, &ring, None).await.map(|_| true)
}

/// REMOVENODE of a node that is down: its keys cannot be copied (they are
/// lost with it, as with any cache node that dies), so the ring drops it at
/// once and its keys are served, empty, by their new owners. The node is
/// recorded as holding strays, so if it comes back its stale keys are
/// deleted. The caller holds `admin_lock`, and no change runs.
pub(crate) async fn remove_unreachable(
    proxy: &Arc<Proxy>,
    spec: &NodeSpec,
) -> Result<u64, MigrationError> {
    let cur = proxy.routing.load_full();
    if cur.migration.is_some() || proxy.migration.is_changing() {
        return Err(MigrationError::InProgress);
    }
    let name = &spec.name;
    let t0 = Instant::now();
    let next = cur.ring.with_nodes(
        cur.ring
            .nodes()
            .iter()
            .filter(|n| &n.name != name)
            .cloned()
            .collect(),
    )?;
    let rebuild_us = t0.elapsed().as_micros() as u64;
    proxy.migration.add_pending(spec);
    if let Err(e) = persist(proxy, &next, None).await {
        proxy.migration.drop_pending(name);
        return Err(MigrationError::Unchanged(Box::new(e)));
    }
    proxy
        .migration
        .last_rebuild_us
        .store(rebuild_us, Ordering::Relaxed);
    proxy
        .migration
        .reset(format!("remove {name} (unreachable)"));
    let next = Arc::new(next);
    let nodes = proxy.shards_for(&next);
    let strays = proxy
        .migration
        .pending()
        .iter()
        .any(|n| next.index_of(&n.name).is_some());
    proxy
        .routing
        .store(Arc::new(Routing::new(next, nodes, None, strays)));
    proxy.release(name);
    proxy.migration.set(|t| {
        t.last_error =
            format!("node {name} was unreachable when removed: the keys it held are lost");
    });
    proxy.migration.state("ok");
    sweep::spawn_retry(proxy);
    Ok(rebuild_us)
}
