//! The fleet without etcd: etcd killed with no change running — the
//! proxies go on serving, after their lease lapsed reads only (keys not
//! moving), writes and changes refused with a clear error, and all served
//! again once etcd is back; etcd restarted in the middle of a change — the
//! change pauses and resumes, no acknowledged write lost; etcd gone in a
//! cutover — every request and the ADDNODE that asked for it are answered
//! within a bound, none hangs.

mod common;

use std::time::{Duration, Instant};

use common::etcd::{Etcd, Fleet};
use common::writers::{check, cluster, Writers};
use common::*;

/// The lease in these tests.
const TTL_S: u64 = 2;

fn call(port: u16, args: &[&str]) -> String {
    Raw::connect(port).call(args)
}

#[test]
fn etcd_gone_for_good_leaves_reads_of_steady_keys_and_refuses_writes_and_changes() {
    let Some(mut etcd) = Etcd::start() else {
        return;
    };
    let fleet = Fleet::start(&etcd, 3, 2, 2, TTL_S, 0);
    let ports: Vec<u16> = fleet.members.iter().map(|m| m.port()).collect();
    mset_keys(&mut connect(ports[0]), "g:", 200);
    etcd.kill();
    std::thread::sleep(Duration::from_millis(TTL_S * 1000 + 1500));
    for &p in &ports {
        let mut con = connect(p);
        for i in 0..200 {
            let v: Option<String> = redis::cmd("GET")
                .arg(format!("g:{i}"))
                .query(&mut con)
                .unwrap();
            assert_eq!(
                v.as_deref(),
                Some(format!("v{i}").as_str()),
                "g:{i} through {p}"
            );
        }
        let w = call(p, &["SET", "g:0", "new"]);
        assert!(w.starts_with("-TRYAGAIN etcd is gone"), "{w}");
    }
    let t0 = Instant::now();
    let r = cluster(ports[1], &["ADDNODE", &fleet.addrs[2], "NAME", "extra"]);
    let took = t0.elapsed();
    let e = r.unwrap_err().to_string();
    assert!(e.contains("etcd"), "{e}");
    assert!(took < Duration::from_secs(15), "ADDNODE took {took:?}");
    eprintln!("without etcd: reads served, writes refused; ADDNODE refused after {took:?}: {e}");
    etcd.restart();
    for &p in &ports {
        eventually(20, "writes served again", || {
            call(p, &["SET", "g:0", "back"]) == "+OK\r\n"
        });
    }
}

#[test]
fn etcd_restarted_in_the_middle_of_a_change_resumes_it_and_loses_no_write() {
    let Some(mut etcd) = Etcd::start() else {
        return;
    };
    let fleet = Fleet::start(&etcd, 3, 2, 2, TTL_S, 800);
    let ports: Vec<u16> = fleet.members.iter().map(|m| m.port()).collect();
    let writers = Writers::start(&ports);
    std::thread::sleep(Duration::from_millis(300));
    let asked = {
        let (node, port) = (fleet.addrs[2].clone(), ports[1]);
        std::thread::spawn(move || cluster(port, &["ADDNODE", &node, "NAME", "extra"]))
    };
    eventually(10, "the change under way", || {
        let s = ring_field(&fleet.members[0].ring_info(), "state");
        s == "copying" || s == "catch-up"
    });
    etcd.kill();
    std::thread::sleep(Duration::from_millis(1000));
    etcd.restart();
    let t0 = Instant::now();
    for m in &fleet.members {
        eventually(60, "epoch 2 everywhere", || m.is_settled_at(2));
    }
    eprintln!(
        "after etcd's restart the change finished in {:?}; ADDNODE answered {:?}",
        t0.elapsed(),
        asked.join().unwrap()
    );
    std::thread::sleep(Duration::from_millis(300));
    let (known, acked, refused) = writers.finish();
    let mut bad = (0, 0);
    for &p in &ports {
        let (l, r) = check(p, &known);
        bad = (bad.0 + l, bad.1 + r);
    }
    eprintln!("{acked} acknowledged writes ({refused} refused) across etcd's restart: {} lost, {} resurrected", bad.0, bad.1);
    assert_eq!(bad, (0, 0), "lost or resurrected keys");
    assert!(acked > 500, "only {acked} acknowledged writes");
}

#[test]
fn etcd_gone_in_a_cutover_leaves_no_request_hanging() {
    let Some(mut etcd) = Etcd::start() else {
        return;
    };
    let fleet = Fleet::start(&etcd, 3, 2, 2, TTL_S, 1500);
    let ports: Vec<u16> = fleet.members.iter().map(|m| m.port()).collect();
    mset_keys(&mut connect(ports[0]), "c:", 500);
    let asked = {
        let (node, port) = (fleet.addrs[2].clone(), ports[1]);
        std::thread::spawn(move || {
            let t0 = Instant::now();
            (cluster(port, &["ADDNODE", &node, "NAME", "extra"]), t0)
        })
    };
    eventually(20, "the cutover", || {
        fleet
            .members
            .iter()
            .any(|m| ring_field(&m.ring_info(), "state") == "cutover")
    });
    etcd.kill();
    let killed = Instant::now();
    // Every key, through every proxy, gets an answer (a value or a refusal) in time.
    for &p in &ports {
        let mut con = Raw::connect(p);
        for i in (0..500).step_by(25) {
            let t0 = Instant::now();
            let r = con.call(&["GET", &format!("c:{i}")]);
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "GET c:{i} through {p} took {:?}: {r}",
                t0.elapsed()
            );
        }
    }
    let (r, _) = asked.join().unwrap();
    let took = killed.elapsed();
    eprintln!("etcd gone in the cutover: ADDNODE answered {took:?} after the kill: {r:?}");
    assert!(took < Duration::from_secs(40), "ADDNODE took {took:?}");
    // Paused, not ended: it resumes once etcd is back.
    let answer = format!("{r:?}");
    assert!(!answer.contains("ended without its new epoch"), "{answer}");
    etcd.restart();
    for m in &fleet.members {
        eventually(60, "a settled ring", || {
            ring_field(&m.ring_info(), "state") == "ok"
        });
    }
}
