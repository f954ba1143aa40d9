//! A fleet losing a member or its store: the leader killed (-9) in the
//! middle of a change, whose change another proxy finishes from the stored
//! phase once the dead leader's lease expires; and etcd gone, with keys
//! refused (TRYAGAIN) once the lease lapses, changes refused with an error
//! naming etcd, and both served again when etcd is back.

mod common;

use std::time::{Duration, Instant};

use common::etcd::{Etcd, Member};
use common::*;

/// The lease in these tests: a dead leader is replaced this many seconds on.
const TTL_S: u64 = 2;

fn add_node(port: u16, addr: &str) -> redis::RedisResult<String> {
    redis::cmd("CLUSTER")
        .arg("ADDNODE")
        .arg(addr)
        .query(&mut connect(port))
}

#[test]
fn a_leader_killed_mid_change_is_replaced_and_its_change_finished() {
    let Some(etcd) = Etcd::start() else { return };
    let nodes: Vec<Proc> = (0..3).map(|_| start_node(free_port())).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    // Each phase lasts 1.5 s longer, so the kill lands inside the change.
    let slow = [("SHARDIS_FAULT_PHASE_DELAY_MS", "1500")];
    let mut members: Vec<Member> = (0..3)
        .map(|_| Member::start(&etcd, &addrs[..2], TTL_S, &slow))
        .collect();
    mset_keys(&mut connect(members[1].port()), "lk:", 3000);
    let leader = {
        let mut id = String::new();
        eventually(10, "a leader", || {
            id = ring_field(&members[1].ring_info(), "leader");
            id.starts_with("127.0.0.1:")
        });
        id
    };
    let li = members
        .iter()
        .position(|m| leader == format!("127.0.0.1:{}", m.port()))
        .expect("the leader is a member");
    let asked = {
        let (port, node) = (members[li].port(), addrs[2].clone());
        std::thread::spawn(move || add_node(port, &node))
    };
    let other = (li + 1) % 3;
    eventually(10, "the change under way", || {
        ring_field(&members[other].ring_info(), "state") != "ok"
    });
    let t0 = Instant::now();
    members[li].proc.kill();
    let _ = asked.join();
    let dead = members.remove(li);
    for m in &members {
        eventually(30, "epoch 2 on the survivors", || m.is_settled_at(2));
        let i = m.ring_info();
        assert_eq!(ring_field(&i, "nodes"), "3", "{i}");
    }
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(TTL_S - 1),
        "finished in {took:?}"
    );
    eprintln!("the change finished {took:?} after the leader was killed");
    for m in &members {
        assert_eq!(
            mset_keys_readable(&mut connect(m.port()), "lk:", 3000),
            3000
        );
        let i = m.ring_info();
        assert_ne!(ring_field(&i, "leader"), leader, "{i}");
    }
    drop(dead);
}

#[test]
fn without_etcd_a_proxy_serves_only_reads_once_its_lease_lapses_and_refuses_changes_naming_etcd() {
    let Some(mut etcd) = Etcd::start() else {
        return;
    };
    let nodes: Vec<Proc> = (0..3).map(|_| start_node(free_port())).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let a = Member::start(&etcd, &addrs[..2], TTL_S, &[]);
    let b = Member::start(&etcd, &addrs[..2], TTL_S, &[]);
    mset_keys(&mut connect(a.port()), "eg:", 500);
    etcd.kill();
    let t0 = Instant::now();
    eventually(10, "etcd_connected:0", || {
        ring_field(&b.ring_info(), "etcd_connected") == "0"
    });
    // Past its lease, with etcd gone (nothing listens at its endpoint), no
    // proxy can change the ring: reads go on, writes are refused (retry
    // elsewhere), and it still answers about itself.
    for m in [&a, &b] {
        eventually(10, "serving:0", || {
            ring_field(&m.ring_info(), "serving") == "0"
        });
        let got: Option<String> = redis::cmd("GET")
            .arg("eg:1")
            .query(&mut connect(m.port()))
            .unwrap();
        assert_eq!(got.as_deref(), Some("v1"));
        let err = redis::cmd("SET")
            .arg("eg:1")
            .arg("x")
            .query::<()>(&mut connect(m.port()))
            .unwrap_err();
        assert_eq!(err.kind(), redis::ErrorKind::TryAgain, "{err}");
        assert!(err.to_string().contains("etcd is gone"), "{err}");
        let err = add_node(m.port(), &addrs[2]).unwrap_err().to_string();
        assert!(err.contains("etcd"), "{err}");
        assert!(err.contains("the ring is unchanged"), "{err}");
    }
    assert!(t0.elapsed() >= Duration::from_millis(TTL_S * 1000 / 2));
    // Back again: the fleet serves and takes changes once more.
    etcd.restart();
    for m in [&a, &b] {
        eventually(20, "etcd_connected:1, serving:1", || {
            let i = m.ring_info();
            ring_field(&i, "etcd_connected") == "1" && ring_field(&i, "serving") == "1"
        });
    }
    for m in [&a, &b] {
        assert_eq!(mset_keys_readable(&mut connect(m.port()), "eg:", 500), 500);
        mset_keys(&mut connect(m.port()), "eg2:", 100);
    }
    assert_eq!(add_node(b.port(), &addrs[2]).unwrap(), "OK");
    for m in [&a, &b] {
        eventually(20, "epoch 2", || m.is_settled_at(2));
        assert_eq!(mset_keys_readable(&mut connect(m.port()), "eg:", 500), 500);
        assert_eq!(mset_keys_readable(&mut connect(m.port()), "eg2:", 100), 100);
    }
}
