//! `write_ack = "replica"` beyond single-key writes: a `MULTI`/`EXEC` that
//! writes is answered only once `WAIT 1` counted a replica (else its reply
//! becomes the not-acknowledged error), and each fragment of a multi-key
//! write split over shards (`MSET`, `DEL`) waits for its own shard's
//! replica — so right after the reply every key is already on a replica.
//! FLUSHALL and FLUSHDB, sent to every shard, wait for each shard's replica.
//! On built-in nodes.

mod common;
mod ha;

use std::collections::HashMap;

use common::*;
use ha::*;

struct Pool {
    proxy: Proc,
    _dir: tempdir::Dir,
    /// Replica port by shard name.
    replicas: HashMap<String, u16>,
    nodes: Vec<Proc>,
}

fn pool() -> Pool {
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let nodes: Vec<Proc> = ports.iter().map(|&p| builtin_with(p, &[])).collect();
    let shards = [
        (
            format!("127.0.0.1:{}", ports[0]),
            vec![format!("127.0.0.1:{}", ports[2])],
        ),
        (
            format!("127.0.0.1:{}", ports[1]),
            vec![format!("127.0.0.1:{}", ports[3])],
        ),
    ];
    let extra = "[failover]\nwrite_ack = \"replica\"\nwait_timeout_ms = 2000\n";
    let (proxy, dir) = ha_proxy(&shards, extra);
    let mut con = connect(proxy.port);
    wait_ring(&mut con, 15, "both replicas follow", |r| {
        shards.iter().all(|(_, rs)| is_synced_replica(r, &rs[0]))
    });
    let replicas = HashMap::from([
        ("node1".to_string(), ports[2]),
        ("node2".to_string(), ports[3]),
    ]);
    Pool {
        proxy,
        _dir: dir,
        replicas,
        nodes,
    }
}

impl Pool {
    /// `key` read straight from the replica of the shard that owns it.
    fn on_replica(&self, con: &mut redis::Connection, key: &str) -> Option<String> {
        let shard: String = redis::cmd("CLUSTER")
            .arg("KEYNODE")
            .arg(key)
            .query(con)
            .unwrap();
        redis::cmd("GET")
            .arg(key)
            .query(&mut direct(self.replicas[&shard]))
            .unwrap()
    }
}

#[test]
fn a_transaction_and_a_split_write_are_on_a_replica_when_answered() {
    let p = pool();
    let mut con = connect(p.proxy.port);
    let (ok, n): (String, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("{t}a")
        .arg(1)
        .cmd("INCR")
        .arg("{t}a")
        .query(&mut con)
        .unwrap();
    assert_eq!((ok.as_str(), n), ("OK", 2));
    assert_eq!(p.on_replica(&mut con, "{t}a").as_deref(), Some("2"));
    let keys: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    let mut mset = redis::cmd("MSET");
    for k in &keys {
        mset.arg(k).arg(format!("v-{k}"));
    }
    let _: () = mset.query(&mut con).unwrap();
    let mut owners = std::collections::HashSet::new();
    for k in &keys {
        let shard: String = redis::cmd("CLUSTER")
            .arg("KEYNODE")
            .arg(k)
            .query(&mut con)
            .unwrap();
        owners.insert(shard);
        let want = format!("v-{k}");
        assert_eq!(p.on_replica(&mut con, k).as_deref(), Some(want.as_str()));
    }
    assert_eq!(owners.len(), 2, "the keys span both shards");
    let n: i64 = redis::cmd("DEL").arg(&keys).query(&mut con).unwrap();
    assert_eq!(n, 20);
    for k in &keys {
        assert_eq!(
            p.on_replica(&mut con, k),
            None,
            "{k} deleted on the replica"
        );
    }
}

#[test]
fn a_transaction_no_replica_acknowledged_is_answered_with_an_error() {
    let mut p = pool();
    let mut con = connect(p.proxy.port);
    let shard: String = redis::cmd("CLUSTER")
        .arg("KEYNODE")
        .arg("{t}a")
        .query(&mut con)
        .unwrap();
    let i = if shard == "node1" { 2 } else { 3 };
    p.nodes[i].kill();
    let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
    let q: String = redis::cmd("SET")
        .arg("{t}a")
        .arg(1)
        .query(&mut con)
        .unwrap();
    assert_eq!(q, "QUEUED");
    let e = redis::cmd("EXEC")
        .query::<redis::Value>(&mut con)
        .unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "transaction to {shard} not acknowledged by a replica"
        )),
        "{e}"
    );
    // A read-only transaction waits for nobody.
    let (v,): (Option<String>,) = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg("{t}a")
        .query(&mut con)
        .unwrap();
    assert_eq!(v.as_deref(), Some("1"));
}

#[test]
fn a_flush_is_answered_once_every_shards_replica_has_it() {
    let mut p = pool();
    let mut con = connect(p.proxy.port);
    let mut mset = redis::cmd("MSET");
    for i in 0..20 {
        mset.arg(format!("f{i}")).arg(i);
    }
    let _: () = mset.query(&mut con).unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    // Right after the reply: no key left on either shard's replica.
    for (shard, &port) in &p.replicas {
        let n: i64 = redis::cmd("DBSIZE").query(&mut direct(port)).unwrap();
        assert_eq!(n, 0, "{shard}'s replica after FLUSHALL");
    }
    // One shard's replica gone: the flush is not known to be on it.
    p.nodes[3].kill();
    let e = redis::cmd("FLUSHDB").query::<()>(&mut con).unwrap_err();
    assert!(
        e.to_string()
            .contains("write to node2 not acknowledged by a replica"),
        "{e}"
    );
}
