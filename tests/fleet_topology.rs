//! Several proxies on one etcd: the first seeds the ring from its config, the
//! others route by the store (saying how their config differs), every proxy
//! follows a change made on another, one change runs fleet-wide at a time,
//! and CLUSTER PROXIES lists the live proxies. Each test starts its own etcd.

mod common;

use common::etcd::{Etcd, Member};
use common::*;

fn member(etcd: &Etcd, nodes: &[String], env: &[(&str, &str)]) -> Member {
    Member::start(etcd, nodes, 2, env)
}

fn info(port: u16) -> String {
    cluster_info(&mut connect(port))
}

fn owners(port: u16, n: usize) -> Vec<String> {
    let mut con = connect(port);
    (0..n)
        .map(|i| keynode(&mut con, &format!("k{i}")))
        .collect()
}

fn settled(port: u16, epoch: u64) -> bool {
    let i = info(port);
    ring_field(&i, "epoch") == epoch.to_string() && ring_field(&i, "state") == "ok"
}

#[test]
fn the_first_proxy_seeds_the_store_and_the_others_route_by_it() {
    let Some(etcd) = Etcd::start() else { return };
    let nodes: Vec<Proc> = (0..3).map(|_| start_node(free_port())).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let a = member(&etcd, &addrs, &[]);
    // The second lists one node fewer: the store wins, and it says so.
    let b = member(&etcd, &addrs[..2], &[]);
    assert_eq!(owners(a.proc.port, 200), owners(b.proc.port, 200));
    let log = std::fs::read_to_string(&b.log).unwrap();
    assert!(log.contains("overrides the config's nodes"), "{log}");
    assert!(log.contains("added at run time: node3"), "{log}");
    for p in [a.proc.port, b.proc.port] {
        let i = info(p);
        assert_eq!(ring_field(&i, "epoch"), "1", "{i}");
        assert_eq!(ring_field(&i, "nodes"), "3", "{i}");
        assert_eq!(ring_field(&i, "topology_store"), "etcd", "{i}");
    }
    // A key written through one proxy reads back through the other.
    let mut ca = connect(a.proc.port);
    mset_keys(&mut ca, "seed:", 300);
    assert_eq!(
        mset_keys_readable(&mut connect(b.proc.port), "seed:", 300),
        300
    );
}

#[test]
fn a_change_made_on_one_proxy_is_followed_by_the_others() {
    let Some(etcd) = Etcd::start() else { return };
    let nodes: Vec<Proc> = (0..4).map(|_| start_node(free_port())).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let a = member(&etcd, &addrs[..2], &[]);
    // (a seeds the store and, started first, is usually the leader.)
    let b = member(&etcd, &addrs[..2], &[]);
    let c = member(&etcd, &addrs[..2], &[]);
    let ports = [a.proc.port, b.proc.port, c.proc.port];
    mset_keys(&mut connect(a.proc.port), "f:", 2000);
    // Two proxies take one change each, whichever of them leads.
    for (i, (port, node)) in ports.iter().zip(&addrs[2..]).enumerate() {
        let r: String = redis::cmd("CLUSTER")
            .arg("ADDNODE")
            .arg(node)
            .arg("NAME")
            .arg(format!("extra{i}"))
            .query(&mut connect(*port))
            .unwrap_or_else(|e| panic!("ADDNODE on proxy {i}: {e}"));
        assert_eq!(r, "OK");
        let epoch = 2 + i as u64;
        for p in ports {
            eventually(20, &format!("epoch {epoch} on every proxy"), || {
                settled(p, epoch)
            });
        }
    }
    let want = owners(a.proc.port, 300);
    for p in ports {
        assert_eq!(owners(p, 300), want);
        assert_eq!(mset_keys_readable(&mut connect(p), "f:", 2000), 2000);
    }
    // And a removal asked of the third.
    let r: String = redis::cmd("CLUSTER")
        .arg("REMOVENODE")
        .arg("extra0")
        .query(&mut connect(c.proc.port))
        .unwrap();
    assert_eq!(r, "OK");
    for p in ports {
        eventually(20, "epoch 4 everywhere", || settled(p, 4));
        assert_eq!(mset_keys_readable(&mut connect(p), "f:", 2000), 2000);
    }
}

#[test]
fn one_change_runs_fleet_wide_and_cluster_proxies_lists_the_fleet() {
    let Some(etcd) = Etcd::start() else { return };
    let nodes: Vec<Proc> = (0..4).map(|_| start_node(free_port())).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let slow = [("SHARDIS_FAULT_PHASE_DELAY_MS", "1500")];
    let a = member(&etcd, &addrs[..2], &slow);
    let b = member(&etcd, &addrs[..2], &slow);
    eventually(10, "two registrations", || {
        let p: String = redis::cmd("CLUSTER")
            .arg("PROXIES")
            .query(&mut connect(b.proc.port))
            .unwrap();
        p.lines().count() == 2 && p.contains("role=leader")
    });
    let first = {
        let (port, node) = (a.proc.port, addrs[2].clone());
        std::thread::spawn(move || {
            redis::cmd("CLUSTER")
                .arg("ADDNODE")
                .arg(node)
                .query::<String>(&mut connect(port))
        })
    };
    eventually(10, "the change to show on the other proxy", || {
        ring_field(&info(b.proc.port), "state") != "ok"
    });
    let second: redis::RedisResult<String> = redis::cmd("CLUSTER")
        .arg("ADDNODE")
        .arg(&addrs[3])
        .query(&mut connect(b.proc.port));
    let err = second.unwrap_err().to_string();
    assert!(err.contains("in progress"), "{err}");
    assert_eq!(first.join().unwrap().unwrap(), "OK");
    for p in [a.proc.port, b.proc.port] {
        eventually(20, "epoch 2", || settled(p, 2));
        let i = info(p);
        assert_eq!(ring_field(&i, "nodes"), "3", "{i}");
    }
    // The asking proxy's own line is live at once; the other's
    // registration is rewritten every second.
    let listed = || -> String {
        redis::cmd("CLUSTER")
            .arg("PROXIES")
            .query(&mut connect(a.proc.port))
            .unwrap()
    };
    assert!(
        listed().contains(&format!("127.0.0.1:{} epoch=2", a.proc.port)),
        "{}",
        listed()
    );
    eventually(5, "both registrations at epoch 2", || {
        let l = listed();
        [a.proc.port, b.proc.port]
            .iter()
            .all(|p| l.contains(&format!("127.0.0.1:{p} epoch=2")) && !l.contains("state=cutover"))
    });
}
