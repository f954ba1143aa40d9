//! The fleet's cutover barrier: clients write and delete through every
//! proxy of three while a node is added and another removed, and every
//! acknowledged write reads back through every proxy, no deleted key
//! returns; a proxy stopped (SIGSTOP) in the middle of a change holds it
//! up no longer than its lease, and once continued it serves no key by the
//! ring it was stopped with: it refuses (TRYAGAIN) until it has caught up;
//! and a leader killed while the fleet is paused in its cutover is
//! replaced, the change finished, no write lost; a leader stopped past its
//! lease, once continued, writes no phase and moves no key.

mod common;

use std::time::{Duration, Instant};

use common::etcd::{Etcd, Fleet, Member};
use common::writers::{check, cluster, is_refusal, short_connect, Known, Writers};
use common::*;

/// The lease in these tests.
const TTL_S: u64 = 2;

fn leader_of(members: &[Member]) -> usize {
    let mut id = String::new();
    eventually(10, "a leader", || {
        id = ring_field(&members[0].ring_info(), "leader");
        id.starts_with("127.0.0.1:")
    });
    members
        .iter()
        .position(|m| id == format!("127.0.0.1:{}", m.port()))
        .expect("the leader is a member")
}

#[test]
fn writes_through_every_proxy_survive_a_node_added_and_one_removed() {
    let Some(etcd) = Etcd::start() else { return };
    // Catch-up, cutover and sweep each last 0.8 s longer: writes land in all.
    let Fleet {
        nodes: _nodes,
        addrs,
        members,
    } = Fleet::start(&etcd, 4, 3, 3, TTL_S, 800);
    let ports: Vec<u16> = members.iter().map(|m| m.port()).collect();
    let writers = Writers::start(&ports);
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let r = cluster(ports[1], &["ADDNODE", &addrs[3], "NAME", "extra"]);
    assert_eq!(r.unwrap(), "OK");
    for m in &members {
        eventually(30, "epoch 2 everywhere", || m.is_settled_at(2));
    }
    eprintln!("ADDNODE took {:?} under writes on 3 proxies", t0.elapsed());
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    assert_eq!(cluster(ports[2], &["REMOVENODE", "node1"]).unwrap(), "OK");
    for m in &members {
        eventually(30, "epoch 3 everywhere", || m.is_settled_at(3));
    }
    eprintln!(
        "REMOVENODE took {:?} under writes on 3 proxies",
        t0.elapsed()
    );
    std::thread::sleep(Duration::from_millis(300));
    let (known, acked, refused) = writers.finish();
    let unsure = known.values().filter(|k| **k == Known::Unsure).count();
    let deleted = known.values().filter(|k| **k == Known::Deleted).count();
    let mut bad = (0, 0);
    for &p in &ports {
        let (l, r) = check(p, &known);
        bad = (bad.0 + l, bad.1 + r);
    }
    eprintln!(
        "{acked} acknowledged writes ({refused} refused), {} keys checked ({deleted} deleted, {unsure} unsure) through 3 proxies: {} lost, {} resurrected",
        known.len(),
        bad.0,
        bad.1
    );
    assert_eq!(bad, (0, 0), "lost or resurrected keys");
    assert!(acked > 1000, "only {acked} acknowledged writes");
}

#[test]
fn a_stopped_proxy_holds_a_change_up_no_longer_than_its_lease_and_serves_no_stale_route() {
    let Some(etcd) = Etcd::start() else { return };
    let Fleet {
        nodes: _nodes,
        addrs,
        members,
    } = Fleet::start(&etcd, 3, 2, 3, TTL_S, 1000);
    let li = leader_of(&members);
    let (vi, oi) = ((li + 1) % 3, (li + 2) % 3);
    let (leader, victim, other) = (members[li].port(), members[vi].port(), members[oi].port());
    mset_keys(&mut connect(other), "s:", 2000);
    let writers = Writers::start(&[leader, other]);
    let asked = {
        let node = addrs[2].clone();
        std::thread::spawn(move || cluster(leader, &["ADDNODE", &node, "NAME", "extra"]))
    };
    // Stopped once the whole fleet is past the copy's barrier: the writes it
    // tracked are then lost with it, and the leader must copy again.
    let leader_log = || std::fs::read_to_string(&members[li].log).unwrap_or_default();
    eventually(10, "the copy's barrier passed", || {
        leader_log().contains("the fleet is ready for the change's phase")
    });
    let pid = members[vi].proc.pid() as libc::pid_t;
    // SAFETY: a signal to a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let t0 = Instant::now();
    assert_eq!(asked.join().unwrap().unwrap(), "OK");
    for p in [leader, other] {
        eventually(30, "epoch 2 on the running proxies", || {
            let i = cluster_info(&mut connect(p));
            ring_field(&i, "epoch") == "2" && ring_field(&i, "state") == "ok"
        });
    }
    let took = t0.elapsed();
    eprintln!("with one proxy stopped, the change finished {took:?} after the stop (lease {TTL_S} s, phases 3 x 1 s longer)");
    // Three delayed phases (3 s), the lease, and slack for etcd's expiry.
    assert!(took < Duration::from_secs(3 + TTL_S + 4), "took {took:?}");
    assert!(leader_log().contains("every moving key is copied again"));
    let (known, acked, _) = writers.finish();
    // New values everywhere, through the fleet: the stopped proxy's ring
    // would read the old owners.
    let mut con = connect(other);
    for i in 0..2000 {
        let _: () = redis::cmd("SET")
            .arg(format!("s:{i}"))
            .arg(format!("new{i}"))
            .query(&mut con)
            .unwrap();
    }
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let resumed = Instant::now();
    let (mut refused, mut right, mut stale) = (0, 0, 0);
    let mut con = short_connect(victim);
    let mut first_served = None;
    for i in 0..2000 {
        let r: redis::RedisResult<Option<String>> =
            redis::cmd("GET").arg(format!("s:{i}")).query(&mut con);
        match r {
            Ok(Some(v)) if v == format!("new{i}") => {
                right += 1;
                first_served.get_or_insert(resumed.elapsed());
            }
            Ok(v) => {
                stale += 1;
                eprintln!("stale after SIGCONT: s:{i} = {v:?}");
            }
            Err(e) if is_refusal(&e) => refused += 1,
            Err(e) => panic!("GET through the continued proxy: {e}"),
        }
    }
    eprintln!("after SIGCONT: {refused} refused, {right} right, {stale} stale; first served after {first_served:?}");
    assert_eq!(stale, 0);
    eventually(20, "the continued proxy at epoch 2, serving", || {
        let i = members[vi].ring_info();
        ring_field(&i, "epoch") == "2" && ring_field(&i, "serving") == "1"
    });
    assert_eq!(mset_keys_readable_as(victim, "s:", "new", 2000), 2000);
    let mut bad = (0, 0);
    for p in [leader, other, victim] {
        let (l, r) = check(p, &known);
        bad = (bad.0 + l, bad.1 + r);
    }
    eprintln!(
        "{acked} acknowledged writes during the change: {} lost, {} resurrected",
        bad.0, bad.1
    );
    assert_eq!(bad, (0, 0));
}

/// How many of `prefix{i}` read back as `value{i}` through `port`.
fn mset_keys_readable_as(port: u16, prefix: &str, value: &str, n: usize) -> usize {
    let mut con = connect(port);
    (0..n)
        .filter(|i| {
            let got: Option<String> = redis::cmd("GET")
                .arg(format!("{prefix}{i}"))
                .query(&mut con)
                .unwrap();
            got == Some(format!("{value}{i}"))
        })
        .count()
}

#[test]
fn a_leader_killed_in_the_cutover_is_replaced_and_no_write_is_lost() {
    let Some(etcd) = Etcd::start() else { return };
    let Fleet {
        nodes: _nodes,
        addrs,
        mut members,
    } = Fleet::start(&etcd, 3, 2, 3, TTL_S, 1500);
    let li = leader_of(&members);
    let others: Vec<u16> = (0..3)
        .filter(|&i| i != li)
        .map(|i| members[i].port())
        .collect();
    mset_keys(&mut connect(others[0]), "c:", 2000);
    let writers = Writers::start(&others);
    let asked = {
        let (port, node) = (members[li].port(), addrs[2].clone());
        std::thread::spawn(move || cluster(port, &["ADDNODE", &node, "NAME", "extra"]))
    };
    // Every other proxy paused on moving keys, waiting for the flip.
    eventually(20, "the fleet in its cutover", || {
        others
            .iter()
            .all(|&p| ring_field(&cluster_info(&mut connect(p)), "state") == "cutover")
    });
    let t0 = Instant::now();
    members[li].proc.kill();
    let _ = asked.join();
    let dead = members.remove(li);
    for m in &members {
        eventually(40, "epoch 2 on the survivors", || m.is_settled_at(2));
    }
    eprintln!(
        "the change finished {:?} after the leader was killed in its cutover",
        t0.elapsed()
    );
    let (known, acked, _) = writers.finish();
    let mut bad = (0, 0);
    for &p in &others {
        assert_eq!(mset_keys_readable(&mut connect(p), "c:", 2000), 2000);
        let (l, r) = check(p, &known);
        bad = (bad.0 + l, bad.1 + r);
    }
    eprintln!(
        "{acked} acknowledged writes: {} lost, {} resurrected",
        bad.0, bad.1
    );
    assert_eq!(bad, (0, 0));
    drop(dead);
}

#[test]
fn a_leader_stopped_past_its_lease_cannot_write_the_next_phase() {
    let Some(etcd) = Etcd::start() else { return };
    let Fleet {
        nodes: _nodes,
        addrs,
        members,
    } = Fleet::start(&etcd, 3, 2, 3, TTL_S, 1500);
    let li = leader_of(&members);
    let others: Vec<u16> = (0..3)
        .filter(|&i| i != li)
        .map(|i| members[i].port())
        .collect();
    mset_keys(&mut connect(others[0]), "f:", 2000);
    let asked = {
        let (port, node) = (members[li].port(), addrs[2].clone());
        std::thread::spawn(move || cluster(port, &["ADDNODE", &node, "NAME", "extra"]))
    };
    eventually(20, "the change under way", || {
        ring_field(&cluster_info(&mut connect(others[0])), "state") != "ok"
    });
    let pid = members[li].proc.pid() as libc::pid_t;
    // SAFETY: signals to a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    for &p in &others {
        eventually(40, "epoch 2 under the new leader", || {
            let i = cluster_info(&mut connect(p));
            ring_field(&i, "epoch") == "2" && ring_field(&i, "state") == "ok"
        });
    }
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let _ = asked.join();
    // The old leader's next phase write is refused by its fence: the fleet
    // stays at epoch 2 and the old leader follows it.
    for m in &members {
        eventually(20, "epoch 2 everywhere", || m.is_settled_at(2));
    }
    std::thread::sleep(Duration::from_secs(2));
    for m in &members {
        let i = m.ring_info();
        assert_eq!(ring_field(&i, "epoch"), "2", "{i}");
        assert_eq!(ring_field(&i, "nodes"), "3", "{i}");
        assert_eq!(mset_keys_readable(&mut connect(m.port()), "f:", 2000), 2000);
    }
}
