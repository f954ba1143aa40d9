//! A shard with a replica, on redis-server members: the proxy wires the
//! replica to its primary and shows its role, offset and lag; a primary
//! killed with kill -9 is replaced by its replica without losing a write
//! acknowledged under `write_ack = "replica"`; the old primary, restarted
//! with its old data, rejoins as a replica and brings no deleted key back.
//! Timings are printed, not asserted.

mod common;
mod ha;

use std::time::Duration;

use common::*;
use ha::*;

#[test]
fn a_shard_shows_its_replica_with_role_offset_and_lag() {
    if !need_redis("ha_failover") {
        return;
    }
    let (pp, rp) = (free_port(), free_port());
    let _p = redis_at(pp, None);
    let _r = redis_at(rp, None);
    let (primary, replica) = (format!("127.0.0.1:{pp}"), format!("127.0.0.1:{rp}"));
    let (proxy, _dir) = ha_proxy(&[(primary.clone(), vec![replica.clone()])], "");
    let mut con = connect(proxy.port);
    // The replica was not replicating: the proxy makes it follow.
    let r = wait_ring(&mut con, 10, "the replica follows its primary", |r| {
        is_synced_replica(r, &replica)
    });
    assert!(r.contains(&format!("node1 {primary} ")), "{r}");
    assert!(r.contains(" repl=master offset="), "{r}");
    assert!(r.contains("replica_of=node1 state=up"), "{r}");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let mut d = direct(rp);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let v: Option<String> = redis::cmd("GET").arg("k").query(&mut d).unwrap();
        if v.as_deref() == Some("v") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the write reached the replica"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let info = cluster_info(&mut con);
    assert_eq!(ring_field(&info, "on_primary_down"), "failover");
    assert_eq!(ring_field(&info, "write_ack"), "primary");
    let shard = ring_field(&info, "shard_node1");
    assert!(
        shard.starts_with(&format!("primary={primary},state=up,role=master")),
        "{shard}"
    );
    assert!(
        shard.contains(&format!(";replica={replica},state=up,role=replica")),
        "{shard}"
    );
}

/// kill -9 of the primary while a client writes: a replica is promoted, the
/// other follows it, writes resume, and with `write_ack = "replica"` every
/// acknowledged write is still there. Two replicas: with one, the promoted
/// primary has no replica left to acknowledge a write until the old
/// primary returns, and such writes are refused.
fn kill_primary_under_writes(write_ack: &str) -> (Writes, Vec<usize>) {
    let (pp, rp, rp2) = (free_port(), free_port(), free_port());
    let mut p = redis_at(pp, None);
    let _r = redis_at(rp, None);
    let _r2 = redis_at(rp2, None);
    let (replica, other) = (format!("127.0.0.1:{rp}"), format!("127.0.0.1:{rp2}"));
    let extra = format!("[failover]\nwrite_ack = \"{write_ack}\"\n");
    let primary = format!("127.0.0.1:{pp}");
    let shards = [(primary.clone(), vec![replica.clone(), other.clone()])];
    let (proxy, dir) = ha_proxy(&shards, &extra);
    let shard = KilledShard {
        proxy: proxy.port,
        primary: &primary,
        replicas: &[&replica, &other],
        state_file: &dir.path().join("state.toml"),
        label: &format!("redis-server, write_ack={write_ack}"),
    };
    let out = shard.kill_under_writes(|| p.kill());
    // The failover names how far the promoted replica was behind.
    let last = info_field(&mut connect(proxy.port), "last_failover");
    eprintln!("{last}");
    assert!(
        last.contains("bytes behind the primary's last polled offset"),
        "{last}"
    );
    out
}

#[test]
fn killing_a_primary_promotes_its_replica_and_loses_no_write_acknowledged_by_a_replica() {
    if !need_redis("ha_failover") {
        return;
    }
    let (_, lost) = kill_primary_under_writes("replica");
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}

#[test]
fn killing_a_primary_with_write_ack_primary_fails_over_and_the_loss_is_reported() {
    if !need_redis("ha_failover") {
        return;
    }
    kill_primary_under_writes("primary");
}

#[test]
fn an_old_primary_restarted_with_its_data_rejoins_as_a_replica_without_a_deleted_key() {
    if !need_redis("ha_failover") {
        return;
    }
    let data = tempdir::Dir::new();
    let (pp, rp, rp2) = (free_port(), free_port(), free_port());
    let mut p = redis_at(pp, Some(data.path()));
    let _r = redis_at(rp, None);
    let _r2 = redis_at(rp2, None);
    let (old, replica) = (format!("127.0.0.1:{pp}"), format!("127.0.0.1:{rp}"));
    let other = format!("127.0.0.1:{rp2}");
    let extra = "[failover]\nwrite_ack = \"replica\"\n";
    let (proxy, _dir) = ha_proxy(
        &[(old.clone(), vec![replica.clone(), other.clone()])],
        extra,
    );
    let mut con = connect(proxy.port);
    wait_ring(&mut con, 10, "the replicas follow their primary", |r| {
        is_synced_replica(r, &replica) && is_synced_replica(r, &other)
    });
    for k in ["doomed", "kept"] {
        let _: () = redis::cmd("SET").arg(k).arg("old").query(&mut con).unwrap();
    }
    p.kill();
    wait_ring(&mut con, 10, "a replica is the primary", |r| {
        !r.contains(&format!("node1 {old} "))
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    // The first requests after the switch may still meet the old primary.
    while redis::cmd("DEL")
        .arg("doomed")
        .query::<i64>(&mut con)
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "DEL through the new primary"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("new")
        .query(&mut con)
        .unwrap();
    // Back with the AOF that still holds `doomed`.
    let _p2 = redis_at(pp, Some(data.path()));
    wait_ring(
        &mut con,
        15,
        "the old primary rejoins as a synced replica",
        |r| is_synced_replica(r, &old),
    );
    let mut d = direct(pp);
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut d).unwrap();
    assert_eq!(
        role[0],
        redis::Value::BulkString(b"slave".to_vec()),
        "{role:?}"
    );
    let got = |c: &mut redis::Connection, k: &str| -> Option<String> {
        redis::cmd("GET").arg(k).query(c).unwrap()
    };
    assert_eq!(
        got(&mut d, "doomed"),
        None,
        "a deleted key came back on the old primary"
    );
    assert_eq!(got(&mut d, "after").as_deref(), Some("new"));
    assert_eq!(got(&mut con, "doomed"), None);
    assert_eq!(got(&mut con, "kept").as_deref(), Some("old"));
}

#[test]
fn killing_a_replica_costs_no_client_an_error() {
    if !need_redis("ha_failover") {
        return;
    }
    let (pp, rp) = (free_port(), free_port());
    let _p = redis_at(pp, None);
    let mut r = redis_at(rp, None);
    let replica = format!("127.0.0.1:{rp}");
    let (proxy, _dir) = ha_proxy(&[(format!("127.0.0.1:{pp}"), vec![replica.clone()])], "");
    let mut con = connect(proxy.port);
    wait_ring(&mut con, 10, "the replica follows its primary", |x| {
        is_synced_replica(x, &replica)
    });
    let w = write_for(proxy.port, "r", Duration::from_millis(1_000), |i| {
        if i == 100 {
            r.kill();
        }
    });
    assert_eq!(w.errors, 0, "last error: {}", w.last_error);
    assert!(lost(proxy.port, "r", &w.acked).is_empty());
    wait_ring(&mut con, 5, "the replica is seen down", |x| {
        x.contains(&format!("{replica} {replica} replica_of=node1 state=down"))
    });
}
