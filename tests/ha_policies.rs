//! The other `on_primary_down` policies and the read policy, on
//! redis-server members: `fail` keeps the prompt error and promotes
//! nothing; `remap` sends an ejected shard's keys to the next ring entry
//! until it answers again; `read_from = "replica"` reads from a replica in
//! sync and errs when none is.

mod common;
mod ha;

use std::time::{Duration, Instant};

use common::*;
use ha::*;

#[test]
fn fail_keeps_the_prompt_error_and_promotes_nothing() {
    if !need_redis("ha_policies") {
        return;
    }
    let (pp, rp) = (free_port(), free_port());
    let mut p = redis_at(pp, None);
    let _r = redis_at(rp, None);
    let replica = format!("127.0.0.1:{rp}");
    let extra = "[failover]\non_primary_down = \"fail\"\n";
    let (proxy, _dir) = ha_proxy(&[(format!("127.0.0.1:{pp}"), vec![replica.clone()])], extra);
    let mut con = connect(proxy.port);
    wait_ring(&mut con, 10, "the replica follows", |r| {
        is_synced_replica(r, &replica)
    });
    p.kill();
    std::thread::sleep(Duration::from_millis(1_000));
    let e = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(e.to_string().contains("unavailable"), "{e}");
    assert_eq!(info_field(&mut con, "failovers"), "0");
    assert_eq!(info_field(&mut con, "on_primary_down"), "fail");
}

#[test]
fn remap_sends_an_ejected_shards_keys_to_the_next_entry_until_it_returns() {
    if !need_redis("ha_policies") {
        return;
    }
    let (ap, bp) = (free_port(), free_port());
    let _a = redis_at(ap, None);
    let mut b = redis_at(bp, None);
    let extra = "[failover]\non_primary_down = \"remap\"\n";
    let shards = [
        (format!("127.0.0.1:{ap}"), vec![]),
        (format!("127.0.0.1:{bp}"), vec![]),
    ];
    let (proxy, _dir) = ha_proxy(&shards, extra);
    let mut con = connect(proxy.port);
    let key = (0..1000)
        .map(|i| format!("k{i}"))
        .find(|k| keynode(&mut con, k) == "node2")
        .unwrap();
    b.kill();
    let deadline = Instant::now() + Duration::from_secs(5);
    while redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .query::<()>(&mut con)
        .is_err()
    {
        assert!(Instant::now() < deadline, "the key was remapped");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(keynode(&mut con, &key), "node1");
    assert_eq!(info_field(&mut con, "nodes"), "1");
    let _b2 = redis_at(bp, None);
    let deadline = Instant::now() + Duration::from_secs(10);
    while keynode(&mut con, &key) != "node2" {
        assert!(Instant::now() < deadline, "the shard came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut con, "nodes"), "2");
}

#[test]
fn read_from_replica_reads_a_replica_in_sync_and_errs_without_one() {
    if !need_redis("ha_policies") {
        return;
    }
    let (pp, rp) = (free_port(), free_port());
    let _p = redis_at(pp, None);
    let mut r = redis_at(rp, None);
    let replica = format!("127.0.0.1:{rp}");
    // Right after its sync a redis-server replica acknowledges at its next
    // once-a-second cron, so the first WAIT may take most of a second.
    let extra =
        "[failover]\nread_from = \"replica\"\nwrite_ack = \"replica\"\nwait_timeout_ms = 3000\n";
    let (proxy, _dir) = ha_proxy(&[(format!("127.0.0.1:{pp}"), vec![replica.clone()])], extra);
    let mut con = connect(proxy.port);
    wait_ring(&mut con, 10, "the replica follows", |x| {
        is_synced_replica(x, &replica)
    });
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    // Acknowledged by the replica, so the read there sees it.
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let mut d = direct(rp);
    let before: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut d)
        .unwrap();
    assert!(
        before.contains("cmdstat_get:"),
        "the GET went to the replica: {before}"
    );
    r.kill();
    wait_ring(&mut con, 5, "the replica is seen down", |x| {
        x.contains(&format!("{replica} {replica} replica_of=node1 state=down"))
    });
    let e = redis::cmd("GET")
        .arg("k")
        .query::<Option<String>>(&mut con)
        .unwrap_err();
    assert!(
        e.to_string().contains("no replica of node1 is in sync"),
        "{e}"
    );
}
