//! Sentinel mode on real Redis Sentinel: three `redis-sentinel` processes
//! (quorum 2, `down-after-milliseconds 300`) watch a redis-server primary
//! with two replicas; the proxy (`[failover] mode = "sentinel"`) asks them
//! and a fourth, fake Sentinel that keeps advertising the original primary.
//! kill -9 of the primary under writes: the Sentinels fail over, the proxy
//! follows the majority once `ROLE` confirms the new primary, and the stale
//! Sentinel is outvoted. The proxy's config lists one replica only: the
//! other it takes from `SENTINEL replicas`. Timings are printed, not
//! asserted; so is how often the Sentinels switched (their logs'
//! `+switch-master`) beside how often the proxy followed.

mod common;
mod ha;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ha::*;

/// `redis-sentinel` on `port` watching `m1` at `primary_port`.
fn sentinel_at(port: u16, primary_port: u16, dir: &std::path::Path) -> Proc {
    let conf = dir.join(format!("sentinel-{port}.conf"));
    let text = format!(
        "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {d}\nlogfile {d}/sentinel-{port}.log\n\
         sentinel monitor m1 127.0.0.1 {primary_port} 2\n\
         sentinel down-after-milliseconds m1 300\n\
         sentinel failover-timeout m1 3000\n\
         sentinel parallel-syncs m1 1\n",
        d = dir.display()
    );
    std::fs::write(&conf, text).unwrap();
    let mut p = Proc::spawn(
        Command::new("redis-sentinel")
            .arg(&conf)
            .stdout(Stdio::null()),
        port,
        "redis-sentinel",
    );
    p.wait_ready();
    p
}

/// A `SENTINEL master m1` field on the Sentinel at `port`.
fn master_field(port: u16, field: &str) -> String {
    let v: Vec<String> = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg("m1")
        .query(&mut direct(port))
        .unwrap();
    v.chunks(2)
        .find(|kv| kv[0] == field)
        .map(|kv| kv[1].clone())
        .unwrap_or_default()
}

#[test]
fn the_proxy_follows_a_majority_of_sentinels_and_outvotes_a_stale_one() {
    if !need_redis("ha_sentinel") || !have_tool("redis-sentinel") {
        return;
    }
    let (pp, rp, rp2) = (free_port(), free_port(), free_port());
    let mut p = redis_at(pp, None);
    let pp_s = pp.to_string();
    let follow = ["--replicaof", "127.0.0.1", &pp_s];
    let _r = redis_with(rp, None, &follow);
    let _r2 = redis_with(rp2, None, &follow);
    let dir = tempdir::Dir::new();
    let ports = [free_port(), free_port(), free_port()];
    let _sentinels: Vec<Proc> = ports
        .iter()
        .map(|&s| sentinel_at(s, pp, dir.path()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ports.iter().all(|&s| {
        master_field(s, "num-slaves") == "2" && master_field(s, "num-other-sentinels") == "2"
    }) {
        assert!(
            Instant::now() < deadline,
            "the Sentinels found each other and both replicas"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A Sentinel stuck on the original primary, whatever happens.
    let stale: &'static [u8] = Box::leak(
        format!("*2\r\n$9\r\n127.0.0.1\r\n${}\r\n{pp}\r\n", pp_s.len())
            .into_bytes()
            .into_boxed_slice(),
    );
    let (fake, _fake_stop) = fake_node(stale, Duration::ZERO);
    let (primary, a, b) = (
        format!("127.0.0.1:{pp}"),
        format!("127.0.0.1:{rp}"),
        format!("127.0.0.1:{rp2}"),
    );
    let sentinels: Vec<String> = ports
        .iter()
        .chain([&fake])
        .map(|s| format!("\"127.0.0.1:{s}\""))
        .collect();
    let port = free_port();
    let cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 300\nrequest_timeout_ms = 2000\n\
         [failover]\nmode = \"sentinel\"\nsentinels = [{}]\n\
         [[nodes]]\naddr = \"{primary}\"\nname = \"node1\"\nmaster_name = \"m1\"\nreplicas = [\"{a}\"]\n",
        sentinels.join(", ")
    );
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    let _proxy = start_proxy_with(&path, port);
    let mut con = connect(port);
    wait_ring(
        &mut con,
        10,
        "both replicas, one from Sentinel, are seen in sync",
        |r| is_synced_replica(r, &a) && is_synced_replica(r, &b),
    );
    let killed = std::cell::Cell::new(None);
    let w = write_for(port, "s", Duration::from_millis(8_000), |i| {
        if i == 200 {
            p.kill();
            killed.set(Some(Instant::now()));
        }
    });
    let r = wait_ring(&mut con, 20, "a replica is node1's primary", |r| {
        r.contains(&format!("node1 {a} ")) || r.contains(&format!("node1 {b} "))
    });
    let new = if r.contains(&format!("node1 {a} ")) {
        &a
    } else {
        &b
    };
    let at_sentinels: Vec<String> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg("m1")
        .query(&mut direct(ports[0]))
        .unwrap();
    assert_eq!(
        &at_sentinels.join(":"),
        new,
        "the proxy routes where Sentinel says"
    );
    assert!(
        r.contains(&format!("{primary} {primary} replica_of=node1")),
        "the old primary is kept as a replica:\n{r}"
    );
    assert_eq!(info_field(&mut con, "failover_mode"), "sentinel");
    // Counted per switch the proxy followed; the Sentinels may switch more
    // than once (a new primary slow to answer on a loaded machine is taken
    // for down too), and two switches between two polls are followed as one.
    let switches: usize = info_field(&mut con, "failovers").parse().unwrap();
    let log = std::fs::read_to_string(dir.path().join(format!("sentinel-{}.log", ports[0])))
        .unwrap_or_default();
    let by_sentinel = log.matches("+switch-master").count();
    eprintln!("the proxy followed {switches} switch(es); the Sentinels made {by_sentinel}");
    assert!(switches >= 1 && switches <= by_sentinel.max(1), "{log}");
    let last = info_field(&mut con, "last_failover");
    assert!(last.contains("3 of 4 Sentinels"), "{last}");
    let lost = lost(port, "s", &w.acked);
    eprintln!(
        "sentinel (down-after-milliseconds 300, quorum 2): {} acknowledged, {} errors, failover window {:?}, lost {} (write_ack=primary)",
        w.acked.len(),
        w.errors,
        w.window,
        lost.len()
    );
    assert!(
        w.window.is_some(),
        "writes failed and resumed ({} errors, last: {})",
        w.errors,
        w.last_error
    );
}
