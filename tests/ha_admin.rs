//! Shard membership at run time, on redis-server members: ADDREPLICA wires a
//! node as a replica, REMOVEREPLICA drops it, ADDNODE … REPLICAS adds a
//! shard with its replicas, and a planned CLUSTER FAILOVER under load costs
//! no client an error and loses no write. The pause it caused is printed.

mod common;
mod ha;

use std::time::Duration;

use common::*;
use ha::*;

fn cluster(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<String> {
    let mut c = redis::cmd("CLUSTER");
    for a in args {
        c.arg(*a);
    }
    c.query(con)
}

#[test]
fn addreplica_wires_a_node_and_removereplica_drops_it() {
    if !need_redis("ha_admin") {
        return;
    }
    let (pp, rp) = (free_port(), free_port());
    let _p = redis_at(pp, None);
    let _r = redis_at(rp, None);
    let replica = format!("127.0.0.1:{rp}");
    let (proxy, dir) = ha_proxy(&[(format!("127.0.0.1:{pp}"), vec![])], "");
    let mut con = connect(proxy.port);
    assert_eq!(
        cluster(&mut con, &["ADDREPLICA", "node1", &replica]).unwrap(),
        "OK"
    );
    wait_ring(&mut con, 10, "the added replica follows", |r| {
        is_synced_replica(r, &replica)
    });
    let state = std::fs::read_to_string(dir.path().join("state.toml")).unwrap();
    assert!(
        state.contains(&format!("node1 = [\"{replica}\"]")),
        "{state}"
    );
    let e = cluster(&mut con, &["ADDREPLICA", "node1", &replica]).unwrap_err();
    assert!(e.to_string().contains("already a member"), "{e}");
    let e = cluster(&mut con, &["ADDREPLICA", "nosuch", "127.0.0.1:1"]).unwrap_err();
    assert!(e.to_string().contains("cannot reach"), "{e}");
    assert_eq!(
        cluster(&mut con, &["REMOVEREPLICA", "node1", &replica]).unwrap(),
        "OK"
    );
    let r = ring(&mut con);
    assert!(!r.contains("role=replica"), "{r}");
    let e = cluster(&mut con, &["REMOVEREPLICA", "node1", &replica]).unwrap_err();
    assert!(e.to_string().contains("is not a replica"), "{e}");
}

#[test]
fn addnode_with_replicas_adds_a_shard_whose_replica_follows_it() {
    if !need_redis("ha_admin") {
        return;
    }
    let (pp, np, rp) = (free_port(), free_port(), free_port());
    let _p = redis_at(pp, None);
    let _n = redis_at(np, None);
    let _r = redis_at(rp, None);
    let (new, replica) = (format!("127.0.0.1:{np}"), format!("127.0.0.1:{rp}"));
    let (proxy, _dir) = ha_proxy(&[(format!("127.0.0.1:{pp}"), vec![])], "");
    let mut con = connect(proxy.port);
    let ok = cluster(
        &mut con,
        &["ADDNODE", &new, "NAME", "node2", "REPLICAS", &replica],
    )
    .unwrap();
    assert_eq!(ok, "OK");
    let r = wait_ring(&mut con, 15, "the new shard's replica follows it", |r| {
        r.contains(&format!("node2 {new} ")) && is_synced_replica(r, &replica)
    });
    assert!(r.contains("replica_of=node2"), "{r}");
}

#[test]
fn a_planned_failover_under_writes_costs_no_error_and_no_write() {
    if !need_redis("ha_admin") {
        return;
    }
    let (pp, rp) = (free_port(), free_port());
    let _p = redis_at(pp, None);
    let _r = redis_at(rp, None);
    let (old, replica) = (format!("127.0.0.1:{pp}"), format!("127.0.0.1:{rp}"));
    let (proxy, _dir) = ha_proxy(&[(old.clone(), vec![replica.clone()])], "");
    let mut con = connect(proxy.port);
    wait_ring(&mut con, 10, "the replica follows", |r| {
        is_synced_replica(r, &replica)
    });
    let port = proxy.port;
    let admin = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut a = connect(port);
        cluster(&mut a, &["FAILOVER", "node1"])
    });
    let w = write_for(proxy.port, "p", Duration::from_millis(1_200), |_| {});
    let answer = admin.join().unwrap();
    assert_eq!(answer.as_deref().ok(), Some("OK"), "{answer:?}");
    let last = info_field(&mut con, "last_failover");
    eprintln!(
        "planned failover: {} writes, {} errors; {last}",
        w.acked.len(),
        w.errors
    );
    assert_eq!(w.errors, 0, "last error: {}", w.last_error);
    let r = ring(&mut con);
    assert!(r.contains(&format!("node1 {replica} ")), "{r}");
    let lost = lost(proxy.port, "p", &w.acked);
    assert!(lost.is_empty(), "lost: {lost:?}");
    wait_ring(&mut con, 10, "the old primary follows the new", |r| {
        is_synced_replica(r, &old)
    });
}
