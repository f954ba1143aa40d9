//! Catch-up and cutover: re-sync the keys clients wrote during the copy, then
//! pause requests on moving keys, sync what is left, persist the new ring and
//! swap it in. Called by `drive` in `mod.rs`; the only code that swaps the
//! next ring in.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::barrier::{self, Members};
use super::{copy, fault_phase_delay, persist};
use crate::proxy::admin::migration::mover::{
    copy_keys, delete_keys, group_moves, Conns, NodeError,
};
use crate::proxy::admin::state::{self, SavedMigration};
use crate::proxy::upstream::topology::{MigrationRoute, Routing};
use crate::proxy::Proxy;

/// Fault injection for the consistency checker's self-test: with
/// `SHARDIS_FAULT_SKIP_RESYNC=1` writes made during a copy are never re-synced,
/// which must make `shardis check` report lost writes.
fn fault_skip_resync() -> bool {
    std::env::var_os("SHARDIS_FAULT_SKIP_RESYNC").is_some_and(|v| v == "1")
}

/// Re-syncs dirty keys: delete at the next owner, copy again from the current
/// one. In a catch-up round (`live`), a key is forgotten only if no write to it
/// was answered meanwhile; at cutover everything is synced and forgotten.
pub(crate) async fn resync(
    proxy: &Proxy,
    routing: &Routing,
    m: &MigrationRoute,
    conns: &mut Conns,
    live: bool,
) -> Result<(), NodeError> {
    if fault_skip_resync() {
        m.dirty.clear();
        return Ok(());
    }
    let snapshot = m.dirty.snapshot();
    for chunk in snapshot.chunks(proxy.config().migration.batch) {
        for (from, to, keys) in group_moves(routing, m, chunk.iter().map(|(k, _)| k.clone())) {
            delete_keys(conns, &to.spec, &keys).await?;
            copy_keys(conns, &from.spec, &to.spec, &keys).await?;
            proxy
                .migration
                .keys_resynced
                .fetch_add(keys.len() as u64, Ordering::Relaxed);
        }
        for (k, g) in chunk {
            m.dirty.forget(k, live.then_some(*g));
        }
    }
    Ok(())
}

/// Pauses requests on moving keys, syncs what is left, persists the new ring
/// (off the runtime threads) and swaps it in. In a fleet, the pause is
/// fleet-wide first: the cutover phase is published and every live proxy
/// pauses, drains and re-syncs its own dirty keys and acknowledges, or
/// loses its lease; if one of the copy's `members` lost it, the dirty keys
/// it tracked are unknown, and every moving key is copied again inside the
/// pause. On failure the live copy routing is restored, so the caller can
/// abort with nothing lost.
pub(crate) async fn cutover(
    proxy: &Proxy,
    routing: &Arc<Routing>,
    m: &Arc<MigrationRoute>,
    conns: &mut Conns,
    members: &Members,
) -> Result<(), NodeError> {
    proxy.migration.state("cutover");
    let t0 = Instant::now();
    let paused_route = Arc::new(MigrationRoute {
        next: m.next.clone(),
        next_shards: m.next_shards.clone(),
        dirty: m.dirty.clone(),
        paused: true,
        resume: m.resume.clone(),
    });
    let paused = Arc::new(Routing::new(
        routing.ring.clone(),
        routing.shards.clone(),
        Some(paused_route),
        true,
    ));
    let live = proxy.routing.swap(paused.clone());
    let result = async {
        live.drained().await;
        m.dirty.settled().await;
        if proxy.store.as_ref().is_some_and(|s| s.fleet().is_some()) {
            fleet_pause(proxy, routing, m, conns, members).await?;
        }
        fault_phase_delay().await;
        resync(proxy, routing, m, conns, false).await?;
        let saved = SavedMigration {
            phase: "sweep".into(),
            other_epoch: routing.ring.epoch(),
            other_nodes: state::to_saved(routing.ring.nodes()),
        };
        let us = persist(proxy, &m.next, Some(saved))
            .await
            .map_err(|why| NodeError {
                node: "state file".into(),
                why: why.to_string(),
            })?;
        proxy.migration.last_persist_us.store(us, Ordering::Relaxed);
        Ok(())
    }
    .await;
    match result {
        Ok(()) => {
            proxy.routing.store(Arc::new(Routing::new(
                m.next.clone(),
                m.next_shards.clone(),
                None,
                true,
            )));
            m.resume.send_replace(true);
            proxy
                .migration
                .last_pause_ms
                .store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
            proxy.migration.state("sweeping");
            Ok(())
        }
        Err(e) => {
            // Back to the live copy routing; abort() takes it from there
            // (and its write of the topology resumes the other proxies).
            proxy.routing.store(live);
            m.resume.send_replace(true);
            Err(e)
        }
    }
}

/// The fleet-wide part of the pause: publish the cutover, wait for the
/// fleet, and copy every moving key again if a proxy of the copy was lost.
async fn fleet_pause(
    proxy: &Proxy,
    routing: &Routing,
    m: &MigrationRoute,
    conns: &mut Conns,
    members: &Members,
) -> Result<(), NodeError> {
    let saved = SavedMigration {
        phase: "cutover".into(),
        other_epoch: m.next.epoch(),
        other_nodes: state::to_saved(m.next.nodes()),
    };
    persist(proxy, &routing.ring, Some(saved))
        .await
        .map_err(|why| NodeError {
            node: "topology store".into(),
            why: why.to_string(),
        })?;
    let now = barrier::wait(proxy, "cutover").await?;
    let lost = barrier::lost(members, &now);
    if !lost.is_empty() {
        tracing::warn!(proxies = %lost.join(","), "proxies lost their lease during the copy: every moving key is copied again before the cutover");
        copy::reconcile(proxy, routing, m, conns).await?;
        copy::copy_walk(proxy, routing, m, conns).await?;
    }
    Ok(())
}
