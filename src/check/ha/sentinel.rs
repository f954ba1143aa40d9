//! The Sentinel scenario: one redis-server shard (a primary, two replicas
//! started with `--replicaof`), three `redis-sentinel` processes watching
//! it (quorum 2, [`DOWN_AFTER_MS`]), the proxy in `mode = "sentinel"`
//! with `write_ack = "replica"`; kill -9 of the primary under the load,
//! and the window until writes succeed on the primary the Sentinels chose.

use std::time::{Duration, Instant};

use super::cluster::{primary_in, HaCluster, Shape};
use super::load;
use super::scenarios::load_on;
use super::RunOut;
use crate::check::client::{Client, Reply};
use crate::procs::{self, NodeKind, Proc};

/// Sentinel's `down-after-milliseconds` (its default is 30 000).
pub(crate) const DOWN_AFTER_MS: u64 = 1000;
/// Sentinel's `failover-timeout` (its default is 180 000).
pub(crate) const FAILOVER_TIMEOUT_MS: u64 = 5000;

/// The Sentinel settings, in words, for the report.
pub(crate) fn settings() -> String {
    format!("3 Sentinels, quorum 2, down-after-milliseconds {DOWN_AFTER_MS}, failover-timeout {FAILOVER_TIMEOUT_MS}, parallel-syncs 1")
}

/// True when `redis-sentinel` is on PATH.
pub(crate) fn is_available() -> bool {
    std::process::Command::new("redis-sentinel")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn sentinel(c: &HaCluster, port: u16, primary: u16) -> Result<Proc, String> {
    let conf = c.path(&format!("sentinel-{port}.conf"));
    let text = format!(
        "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {d}\n\
         sentinel monitor m1 127.0.0.1 {primary} 2\n\
         sentinel down-after-milliseconds m1 {DOWN_AFTER_MS}\n\
         sentinel failover-timeout m1 {FAILOVER_TIMEOUT_MS}\n\
         sentinel parallel-syncs m1 1\n",
        d = c.path("").display()
    );
    std::fs::write(&conf, text).map_err(|e| e.to_string())?;
    procs::start_sentinel(&conf, port)
}

/// A `SENTINEL master m1` field on the Sentinel at `port`.
async fn master_field(port: u16, field: &str) -> String {
    let mut c = Client::new(&format!("127.0.0.1:{port}"), Duration::from_secs(2));
    match c.call(&[b"SENTINEL", b"MASTER", b"m1"]).await {
        Ok(Reply::Array(kv)) => kv
            .chunks(2)
            .find(|p| p[0].text() == field)
            .map(|p| p[1].text())
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// One run: the Sentinels fail the primary over, the proxy follows.
pub(super) async fn kill_primary() -> Result<RunOut, String> {
    let extra_for = |sentinels: &[u16]| {
        let list: Vec<String> = sentinels
            .iter()
            .map(|s| format!("\"127.0.0.1:{s}\""))
            .collect();
        format!(
            "[failover]\nmode = \"sentinel\"\nsentinels = [{}]\nwrite_ack = \"replica\"\nwait_timeout_ms = 3000\n",
            list.join(", ")
        )
    };
    let ports = [
        procs::free_port()?,
        procs::free_port()?,
        procs::free_port()?,
    ];
    let extra = extra_for(&ports);
    let shape = Shape {
        shards: 1,
        replicas: 2,
        extra: &extra,
        aof: false,
        sentinel: true,
    };
    let mut c = HaCluster::members(NodeKind::Redis, &shape)?;
    let primary = c.members[0].port;
    let mut sentinels = Vec::new();
    for &p in &ports {
        sentinels.push(sentinel(&c, p, primary)?);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut ready = true;
        for &p in &ports {
            ready &= master_field(p, "num-slaves").await == "2"
                && master_field(p, "num-other-sentinels").await == "2";
        }
        if ready {
            break;
        }
        if Instant::now() > deadline {
            return Err("the Sentinels did not find each other and both replicas in 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.start_proxy(&shape)?;
    c.wait_synced(1, 2).await?;
    let load = load_on(&c, "node1").await?;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let old = c.primary_of("node1").await?;
    c.kill(&old);
    let secs = 15 + 2 * FAILOVER_TIMEOUT_MS / 1000;
    c.wait_ring(secs, "node1 follows the Sentinels' new primary", |r| {
        primary_in(r, "node1").is_some_and(|p| p != old)
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let seen = load.stop().await?;
    let t = load::totals(&seen);
    let (lost, resurrected) = load::verify(&c.proxy_addr, &seen, None).await?;
    let switches = c.info_field("failovers").await?;
    drop(sentinels);
    Ok(RunOut::of(
        t,
        lost,
        resurrected,
        format!("switches followed: {switches}"),
    ))
}
