//! What happens when a shard's primary is down, by the pool's policy:
//! `failover` promotes the replica with the highest replication offset,
//! `remap` ejects the shard until it answers again, `fail` does nothing (its
//! keys get the upstream's prompt error). Called by the probe tasks
//! (`monitor.rs`); the only writer of routing snapshots outside a topology
//! change, and it keeps every shard's name, so no key moves on a failover.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::proxy::config::ha::{FailoverMode, OnPrimaryDown};
use crate::proxy::ha::call;
use crate::proxy::ha::status::{parse_info, role_is_master, Role};
use crate::proxy::upstream::topology::Routing;
use crate::proxy::Proxy;
use crate::resp::reply::is_error;

/// How long a failover waits for a running topology change to abort.
const CHANGE_ABORT_WAIT_MS: u64 = 10_000;

/// Why a failover did not happen.
#[derive(Debug)]
pub(crate) enum FailoverError {
    /// No replica answered as a replica.
    NoReplica,
    /// The chosen replica refused `REPLICAOF NO ONE` or did not become master.
    NotPromoted { addr: String, why: String },
    /// The shard is no longer in the ring.
    Gone,
    /// The new ring could not be built.
    Ring(String),
}

impl std::fmt::Display for FailoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailoverError::NoReplica => f.write_str("no replica answered"),
            FailoverError::NotPromoted { addr, why } => write!(f, "{addr} was not promoted: {why}"),
            FailoverError::Gone => f.write_str("the shard left the ring"),
            FailoverError::Ring(e) => write!(f, "{e}"),
        }
    }
}

/// A probe found `addr`, the primary of `shard`, down.
pub(crate) async fn primary_down(proxy: &Arc<Proxy>, shard: &str, addr: &str) {
    if proxy.ha.config.mode == FailoverMode::Sentinel {
        // Sentinel decides; `sentinel.rs` follows it.
        return;
    }
    match proxy.ha.config.on_primary_down {
        OnPrimaryDown::Fail => {}
        OnPrimaryDown::Remap => eject(proxy, shard, addr).await,
        OnPrimaryDown::Failover => {
            if proxy.ha.replicas_of(shard).is_empty() {
                return;
            }
            let Some(_slot) = proxy.ha.begin_failover(shard) else {
                return;
            };
            // Still the primary and still down? (Another probe may have acted.)
            let routing = proxy.routing.load_full();
            if !routing
                .ring
                .nodes()
                .iter()
                .any(|n| n.name == shard && n.addr == addr)
            {
                return;
            }
            let t0 = Instant::now();
            match promote(proxy, shard, addr, None).await {
                Ok((new, behind)) => {
                    proxy.ha.failovers.fetch_add(1, Ordering::Relaxed);
                    proxy.ha.note(format!(
                        "{shard}: primary {addr} down, {new} promoted in {} ms, {behind} bytes behind the primary's last polled offset",
                        t0.elapsed().as_millis()
                    ));
                }
                Err(e) => proxy.ha.note(format!(
                    "{shard}: primary {addr} down, not failed over: {e}"
                )),
            }
        }
    }
}

/// Promotes a replica of `shard` in place of `old`: the one named by `only`,
/// else the one with the highest offset. `REPLICAOF NO ONE`, then `ROLE`
/// must say master before any request is routed there; the other replicas
/// are repointed, `old` is kept as a replica (the probes resync it when it
/// answers again), and the routing snapshot is swapped. Returns the new
/// primary's address and how many bytes of stream it was behind `old`'s
/// offset as last polled (what an asynchronous write may have lost). The
/// caller holds the shard's failover slot.
pub(crate) async fn promote(
    proxy: &Arc<Proxy>,
    shard: &str,
    old: &str,
    only: Option<&str>,
) -> Result<(String, u64), FailoverError> {
    let timeout = Duration::from_millis(proxy.ha.config.probe_timeout_ms.max(200) * 2);
    let replicas = proxy.ha.replicas_of(shard);
    let mut best: Option<(String, u64)> = None;
    for r in replicas
        .iter()
        .filter(|r| only.is_none_or(|o| o == r.as_str()))
    {
        if r == old {
            continue;
        }
        let Ok(reply) = call::call(proxy, shard, r, &[b"INFO", b"replication"], timeout).await
        else {
            continue;
        };
        let info = parse_info(&String::from_utf8_lossy(&reply));
        if info.role != Role::Replica || info.syncing {
            continue;
        }
        if best.as_ref().is_none_or(|(_, o)| info.offset > *o) {
            best = Some((r.clone(), info.offset));
        }
    }
    let (new, offset) = best.ok_or(FailoverError::NoReplica)?;
    let behind = proxy.ha.status(old).offset().saturating_sub(offset);
    let not_promoted = |why: String| FailoverError::NotPromoted {
        addr: new.clone(),
        why,
    };
    match call::call(proxy, shard, &new, &[b"REPLICAOF", b"NO", b"ONE"], timeout).await {
        Ok(r) if !is_error(&r) => {}
        Ok(r) => {
            return Err(not_promoted(
                String::from_utf8_lossy(&r).trim_end().to_string(),
            ))
        }
        Err(e) => return Err(not_promoted(e.to_string())),
    }
    match call::call(proxy, shard, &new, &[b"ROLE"], timeout).await {
        Ok(r) if role_is_master(&r) => {}
        Ok(r) => {
            return Err(not_promoted(format!(
                "ROLE answered {}",
                String::from_utf8_lossy(&r).trim_end()
            )))
        }
        Err(e) => return Err(not_promoted(e.to_string())),
    }
    for r in replicas.iter().filter(|r| **r != new && *r != old) {
        // Best effort: one that misses it is repointed by its probe.
        let _ = call::repoint(proxy, shard, r, &new, timeout).await;
    }
    let mut rest: Vec<String> = replicas.into_iter().filter(|r| *r != new).collect();
    if !rest.iter().any(|r| r == old) {
        rest.push(old.to_string());
    }
    proxy.ha.set_replicas(shard, rest);
    proxy.ha.forget_node(&new);
    swap_primary(proxy, shard, &new).await?;
    Ok((new, behind))
}

/// Routes `shard` to its new primary `addr`: a new ring (the shard keeps its
/// name and weight, so every key stays placed where it was), persisted. A
/// topology change copying keys is aborted first: its copies would read
/// from the old primary.
pub(crate) async fn swap_primary(
    proxy: &Arc<Proxy>,
    shard: &str,
    addr: &str,
) -> Result<(), FailoverError> {
    if proxy.routing.load().migration.is_some() {
        if proxy.migration.is_copying() {
            proxy
                .migration
                .request_abort(shard, "its primary failed over");
        }
        let wait = Duration::from_millis(CHANGE_ABORT_WAIT_MS);
        crate::proxy::admin::migration::wait_idle(proxy, wait).await;
    }
    let cur = proxy.routing.load_full();
    if !cur.ring.nodes().iter().any(|n| n.name == shard) {
        return Err(FailoverError::Gone);
    }
    let specs = cur
        .ring
        .nodes()
        .iter()
        .map(|n| {
            let mut n = n.clone();
            if n.name == shard {
                n.addr = addr.to_string();
            }
            n
        })
        .collect();
    let next = Arc::new(
        cur.ring
            .with_nodes(specs)
            .map_err(|e| FailoverError::Ring(e.to_string()))?,
    );
    proxy.replace_primary(shard, addr);
    let shards = proxy.shards_for(&next);
    proxy.routing.store(Arc::new(Routing::new(
        next.clone(),
        shards,
        cur.migration.clone(),
        cur.filter_keys,
    )));
    if cur.migration.is_none() {
        if let Err(e) = crate::proxy::admin::migration::persist(proxy, &next, None).await {
            proxy.ha.note(format!(
                "{shard}: failed over, but the state file was not written: {e}"
            ));
        }
    }
    Ok(())
}

/// `remap`: the shard's keys go to the next ring entries until it answers
/// again. Not persisted: a restarted proxy routes to it again.
async fn eject(proxy: &Arc<Proxy>, shard: &str, addr: &str) {
    let cur = proxy.routing.load_full();
    if cur.migration.is_some() || cur.ring.nodes().len() < 2 {
        return;
    }
    let Some(spec) = cur
        .ring
        .nodes()
        .iter()
        .find(|n| n.name == shard && n.addr == addr)
        .cloned()
    else {
        return;
    };
    let specs = cur
        .ring
        .nodes()
        .iter()
        .filter(|n| n.name != shard)
        .cloned()
        .collect();
    let Ok(next) = cur.ring.with_nodes(specs) else {
        return;
    };
    let next = Arc::new(next);
    proxy
        .ha
        .ejected
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(spec);
    let shards = proxy.shards_for(&next);
    proxy
        .routing
        .store(Arc::new(Routing::new(next, shards, None, cur.filter_keys)));
    proxy
        .ha
        .note(format!("{shard}: primary {addr} down, ejected (remap)"));
}

/// A probe found `addr`, the primary of `shard`, up: an ejected shard goes
/// back into the ring.
pub(crate) async fn primary_up(proxy: &Arc<Proxy>, shard: &str, addr: &str) {
    let spec = {
        let mut ejected = proxy.ha.ejected.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = ejected.iter().position(|n| n.name == shard) else {
            return;
        };
        ejected.remove(i)
    };
    let cur = proxy.routing.load_full();
    let mut specs = cur.ring.nodes().to_vec();
    specs.push(spec);
    let Ok(next) = cur.ring.with_nodes(specs) else {
        return;
    };
    let next = Arc::new(next);
    let shards = proxy.shards_for(&next);
    proxy
        .routing
        .store(Arc::new(Routing::new(next, shards, None, cur.filter_keys)));
    proxy.ha.note(format!(
        "{shard}: primary {addr} answers again, back in the ring"
    ));
}
