//! The shard-membership commands: `CLUSTER ADDREPLICA <shard> host:port`,
//! `CLUSTER REMOVEREPLICA <shard> host:port` and `CLUSTER FAILOVER <shard>
//! [FORCE]`. Called by `admin::handle`; each holds the admin lock, so none
//! runs beside a topology change (and a topology change is refused while a
//! shard fails over, see `admin::start_change`).
//!
//! A planned failover loses nothing: requests on the shard's keys wait
//! (`Routing::paused_shard`), what was sent is answered, the replica
//! catches up to the primary's offset, then the roles swap and the waiting
//! requests go to the new primary. `FORCE` skips the wait for the offset.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::proxy::ha::call;
use crate::proxy::ha::failover::promote;
use crate::proxy::ha::status::parse_info;
use crate::proxy::upstream::topology::Routing;
use crate::proxy::Proxy;
use crate::resp::reply::is_error;

/// How long a planned failover waits for the replica to catch up.
const CATCH_UP_WAIT_MS: u64 = 5_000;

/// Checks `addr` is `ip:port` and answers PING (after AUTH with the
/// shard's credentials).
async fn reachable(proxy: &Proxy, shard: &str, addr: &str) -> Result<(), String> {
    if addr.parse::<std::net::SocketAddr>().is_err() {
        return Err(format!(
            "ERR invalid replica address '{addr}': expected ip:port"
        ));
    }
    let t = Duration::from_millis(proxy.config().connect_timeout_ms.max(500));
    match call::call(proxy, shard, addr, &[b"PING"], t).await {
        Ok(r) if !is_error(&r) => Ok(()),
        Ok(r) => Err(format!(
            "ERR replica {addr} answered PING with {}",
            String::from_utf8_lossy(&r).trim_end()
        )),
        Err(e) => Err(format!("ERR cannot reach replica {addr}: {}", e.terse())),
    }
}

/// Takes the admin lock with no change running; the error is the reply.
async fn lock(proxy: &Proxy) -> Result<tokio::sync::MutexGuard<'_, ()>, String> {
    let lock = tokio::time::timeout(Duration::from_secs(10), proxy.admin_lock.lock())
        .await
        .map_err(|_| "ERR another topology change is being applied".to_string())?;
    if proxy.routing.load().migration.is_some() || proxy.migration.is_changing() {
        return Err(
            "ERR a topology change is in progress; retry when CLUSTER RINGINFO shows state:ok"
                .into(),
        );
    }
    Ok(lock)
}

/// Rebuilds the snapshot over the same ring so shards pick up their
/// replica lists, and saves them.
pub(crate) async fn refresh(proxy: &Arc<Proxy>) {
    let cur = proxy.routing.load_full();
    let shards = proxy.shards_for(&cur.ring);
    proxy.routing.store(Arc::new(Routing::new(
        cur.ring.clone(),
        shards,
        None,
        cur.filter_keys,
    )));
    if let Err(e) = crate::proxy::admin::migration::persist(proxy, &cur.ring, None).await {
        proxy.ha.note(format!(
            "replicas changed, but the state file was not written: {e}"
        ));
    }
    crate::proxy::ha::monitor::start(proxy);
}

/// True when `addr` is a member of some shard already.
fn is_member(proxy: &Proxy, addr: &str) -> bool {
    in_ring(proxy, |n| n.addr == addr) || proxy.ha.shard_of_replica(addr).is_some()
}

fn has_shard(proxy: &Proxy, shard: &str) -> bool {
    in_ring(proxy, |n| n.name == shard)
}

/// True when a node of the current ring is `is`.
fn in_ring(proxy: &Proxy, is: impl Fn(&crate::ring::NodeSpec) -> bool) -> bool {
    proxy.routing.load().ring.nodes().iter().any(is)
}

/// `CLUSTER ADDREPLICA <shard> host:port`: the node becomes a replica of the
/// shard's primary (its probe sends `REPLICAOF`; its data is replaced by
/// the primary's).
pub(crate) async fn add_replica(proxy: &Arc<Proxy>, shard: &str, addr: &str) -> Result<(), String> {
    reachable(proxy, shard, addr).await?;
    let _lock = lock(proxy).await?;
    if !has_shard(proxy, shard) {
        return Err(format!("ERR no shard named '{shard}' in the ring"));
    }
    if is_member(proxy, addr) {
        return Err(format!("ERR {addr} is already a member of a shard"));
    }
    let mut list = proxy.ha.replicas_of(shard);
    list.push(addr.to_string());
    proxy.ha.set_replicas(shard, list);
    refresh(proxy).await;
    Ok(())
}

/// `CLUSTER REMOVEREPLICA <shard> host:port`: no read goes to it any more;
/// the node itself is left as it is.
pub(crate) async fn remove_replica(
    proxy: &Arc<Proxy>,
    shard: &str,
    addr: &str,
) -> Result<(), String> {
    let _lock = lock(proxy).await?;
    let mut list = proxy.ha.replicas_of(shard);
    let before = list.len();
    list.retain(|a| a != addr);
    if list.len() == before {
        return Err(format!("ERR {addr} is not a replica of '{shard}'"));
    }
    proxy.ha.set_replicas(shard, list);
    proxy.ha.forget_node(addr);
    refresh(proxy).await;
    Ok(())
}

/// Ends a planned failover's pause however the failover ends.
struct Resume(Arc<tokio::sync::watch::Sender<bool>>);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

/// `CLUSTER FAILOVER <shard> [FORCE]`; replies with what it did.
pub(crate) async fn failover(
    proxy: &Arc<Proxy>,
    shard: &str,
    force: bool,
) -> Result<String, String> {
    let _lock = lock(proxy).await?;
    let cur = proxy.routing.load_full();
    let Some(idx) = cur.ring.nodes().iter().position(|n| n.name == shard) else {
        return Err(format!("ERR no shard named '{shard}' in the ring"));
    };
    let old = cur.ring.node(idx).addr.clone();
    let replicas = proxy.ha.replicas_of(shard);
    let pa = proxy.ha.status(&old);
    let offset = pa.offset();
    // The replica in sync with the highest offset.
    let target = replicas
        .iter()
        .filter(|r| **r != old)
        .filter(|r| force || proxy.ha.status(r).is_in_sync(&old, offset, u64::MAX))
        .max_by_key(|r| proxy.ha.status(r).offset())
        .cloned()
        .ok_or_else(|| format!("ERR shard '{shard}' has no replica in sync to fail over to"))?;
    let Some(_slot) = proxy.ha.begin_failover(shard) else {
        return Err(format!("ERR shard '{shard}' is failing over already"));
    };
    let t0 = Instant::now();
    // Pause the shard's keys, then wait out what was routed before.
    let (tx, _) = tokio::sync::watch::channel(false);
    let resume = Resume(Arc::new(tx));
    let mut paused = Routing::new(cur.ring.clone(), cur.shards.clone(), None, cur.filter_keys);
    paused.paused_shard = Some((idx, resume.0.clone()));
    let old_routing = proxy.routing.swap(Arc::new(paused));
    old_routing.drained().await;
    old_routing.node(idx).barrier().await;
    drop(old_routing);
    let switched = async {
        if !force {
            catch_up(proxy, shard, &old, &target).await?;
        }
        promote(proxy, shard, &old, Some(&target))
            .await
            .map(|(new, _)| new)
            .map_err(|e| format!("ERR {shard} not failed over: {e}"))
    }
    .await;
    let new = match switched {
        Ok(new) => new,
        Err(e) => {
            // Unpaused as it was: the waiting requests go to the old primary.
            let cur = proxy.routing.load_full();
            let plain = Routing::new(cur.ring.clone(), cur.shards.clone(), None, cur.filter_keys);
            proxy.routing.store(Arc::new(plain));
            return Err(e);
        }
    };
    // The old primary follows the new one at once (its probe would too).
    let _ = call::repoint(proxy, shard, &old, &new, Duration::from_millis(1_000)).await;
    drop(resume);
    let pause_ms = t0.elapsed().as_millis();
    proxy
        .ha
        .failovers
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let what =
        format!("{shard}: planned failover from {old} to {new}, writes paused {pause_ms} ms");
    proxy.ha.note(what.clone());
    Ok(what)
}

/// Waits until `replica`'s offset equals `primary`'s (no write reaches the
/// primary meanwhile: the shard is paused).
async fn catch_up(proxy: &Proxy, shard: &str, primary: &str, replica: &str) -> Result<(), String> {
    let t = Duration::from_millis(1_000);
    let deadline = Instant::now() + Duration::from_millis(CATCH_UP_WAIT_MS);
    let offset_of = |r: &bytes::Bytes| parse_info(&String::from_utf8_lossy(r)).offset;
    let info: &[&[u8]] = &[b"INFO", b"replication"];
    let p = call::call(proxy, shard, primary, info, t)
        .await
        .map_err(|e| format!("ERR primary {primary}: {}", e.terse()))?;
    let want = offset_of(&p);
    loop {
        if let Ok(r) = call::call(proxy, shard, replica, info, t).await {
            if offset_of(&r) >= want {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("ERR replica {replica} did not reach the primary's offset {want} in {CATCH_UP_WAIT_MS} ms; nothing changed"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
