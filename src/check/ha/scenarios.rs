//! The high-availability scenarios, each on a fresh cluster of three shards
//! under a load on `node1`'s keys (see `load.rs`): kill -9 of a primary, of
//! a replica, a planned `CLUSTER FAILOVER`, and an old primary restarted
//! after a failover. Each returns one [`RunOut`]; `mod.rs` runs them and
//! judges them.

use std::time::Duration;

use super::cluster::{is_synced_replica, primary_in, HaCluster, Shape};
use super::load::{self, Load, Seen};
use super::RunOut;
use crate::check::client::{Client, Reply};
use crate::procs::NodeKind;

const SHARDS: usize = 3;
/// Workers writing to the shard under test.
pub(super) const WORKERS: usize = 4;
/// Load before the fault, and after the shard serves again.
const BEFORE: Duration = Duration::from_millis(700);
const AFTER: Duration = Duration::from_millis(700);

fn failover_config(write_ack: &str) -> String {
    format!("[failover]\nwrite_ack = \"{write_ack}\"\nwait_timeout_ms = 3000\n")
}

/// A cluster with `replicas` replicas a shard, every replica in sync, and
/// a load on node1's keys.
async fn loaded(
    kind: NodeKind,
    replicas: usize,
    write_ack: &str,
    aof: bool,
) -> Result<(HaCluster, Load), String> {
    let extra = failover_config(write_ack);
    let shape = Shape {
        shards: SHARDS,
        replicas,
        extra: &extra,
        aof,
        sentinel: false,
    };
    let c = HaCluster::start(kind, &shape)?;
    c.wait_synced(SHARDS, replicas).await?;
    let load = load_on(&c, "node1").await?;
    tokio::time::sleep(BEFORE).await;
    Ok((c, load))
}

/// [`WORKERS`] workers on keys of shard `name`.
pub(super) async fn load_on(c: &HaCluster, name: &str) -> Result<Load, String> {
    let tag = c.tag_on(name, 0).await?;
    Ok(Load::start(&c.proxy_addr, &vec![tag; WORKERS]))
}

/// The figures of a run, read through the proxy.
async fn judged(c: &HaCluster, seen: &[Seen], extra: String) -> Result<RunOut, String> {
    let t = load::totals(seen);
    let (lost, resurrected) = load::verify(&c.proxy_addr, seen, None).await?;
    Ok(RunOut::of(t, lost, resurrected, extra))
}

/// Waits until node1's routed primary is another member than `old`.
async fn wait_promoted(c: &HaCluster, old: &str, secs: u64) -> Result<String, String> {
    c.wait_ring(secs, "node1 has a new primary", |r| {
        primary_in(r, "node1").is_some_and(|p| p != old)
    })
    .await?;
    c.primary_of("node1").await
}

/// kill -9 of node1's primary under the load.
pub(super) async fn kill_primary(
    kind: NodeKind,
    replicas: usize,
    write_ack: &str,
) -> Result<RunOut, String> {
    let (mut c, load) = loaded(kind, replicas, write_ack, false).await?;
    let old = c.primary_of("node1").await?;
    let at = load.now();
    c.kill(&old);
    let new = wait_promoted(&c, &old, 15).await?;
    tokio::time::sleep(AFTER).await;
    let seen = load.stop().await?;
    let promoted = c.info_field("last_failover").await?;
    let mut out = judged(&c, &seen, format!("promoted {new}: {promoted}")).await?;
    // The window as clients saw it, from the kill when nothing failed.
    if out.window.is_none() {
        out.extra
            .push_str(&format!(" (no request failed; killed at {at:?})"));
    }
    Ok(out)
}

/// kill -9 of one of node1's replicas under the load.
pub(super) async fn kill_replica(kind: NodeKind) -> Result<RunOut, String> {
    let (mut c, load) = loaded(kind, 1, "primary", false).await?;
    let replica = c.replicas_of(0, 1)[0].clone();
    c.kill(&replica);
    let down = format!("{replica} {replica} replica_of=node1 state=down");
    c.wait_ring(10, "the replica is seen down", |r| r.contains(&down))
        .await?;
    tokio::time::sleep(AFTER).await;
    let seen = load.stop().await?;
    judged(&c, &seen, "the replica seen down".into()).await
}

/// `CLUSTER FAILOVER node1` (planned) under the load.
pub(super) async fn planned(kind: NodeKind) -> Result<RunOut, String> {
    let (c, load) = loaded(kind, 1, "primary", false).await?;
    let old = c.primary_of("node1").await?;
    let mut admin = Client::new(&c.proxy_addr, Duration::from_secs(15));
    let answer = admin.call(&[b"CLUSTER", b"FAILOVER", b"node1"]).await?;
    if answer != Reply::Simple("OK".into()) {
        let _ = load.stop().await;
        return Err(format!("CLUSTER FAILOVER node1: {}", answer.text()));
    }
    wait_promoted(&c, &old, 5).await?;
    tokio::time::sleep(AFTER).await;
    let seen = load.stop().await?;
    let last = c.info_field("last_failover").await?;
    judged(&c, &seen, last).await
}

/// kill -9 of node1's primary (two replicas, `write_ack = "replica"`),
/// then the old primary started again at its address — on redis-server
/// with its append-only file, so with the keys deleted meanwhile; a
/// built-in node keeps no data and comes back empty. It must rejoin as a
/// replica in sync: no acknowledged write lost, no deleted key back,
/// through the proxy and on the old primary itself.
pub(super) async fn restart_old_primary(kind: NodeKind) -> Result<RunOut, String> {
    let (mut c, load) = loaded(kind, 2, "replica", true).await?;
    let old = c.primary_of("node1").await?;
    c.kill(&old);
    wait_promoted(&c, &old, 15).await?;
    tokio::time::sleep(AFTER).await;
    let restarted_at = load.now();
    c.restart(&old)?;
    c.wait_ring(20, "the old primary rejoins as a replica in sync", |r| {
        is_synced_replica(r, &old)
    })
    .await?;
    tokio::time::sleep(AFTER).await;
    let seen = load.stop().await?;
    let mut out = judged(&c, &seen, String::new()).await?;
    // On the old primary itself: every key deleted before it came back.
    let deletes: Vec<Seen> = seen
        .iter()
        .map(|s| Seen {
            deleted: s.deleted.clone(),
            ..Seen::default()
        })
        .collect();
    let (_, on_old) = load::verify(&old, &deletes, Some(restarted_at)).await?;
    let mut role = Client::new(&old, Duration::from_secs(5));
    let role = match role.call(&[b"ROLE"]).await? {
        Reply::Array(parts) => parts.first().map(Reply::text).unwrap_or_default(),
        other => other.text(),
    };
    out.resurrected += on_old;
    let data = match kind {
        NodeKind::Redis => "with its AOF",
        NodeKind::Builtin => "empty (a built-in node keeps no data)",
    };
    out.extra = format!("restarted {data}; ROLE {role}; deleted keys back on it: {on_old}");
    if role != "slave" {
        out.broken += 1;
        out.extra.push_str(" (NOT a replica)");
    }
    Ok(out)
}
