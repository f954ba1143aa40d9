//! The local cache of hot GETs (`[hot_keys] cache_ttl_ms`) over built-in
//! nodes: hot GETs stop reaching the node, writes through the proxy are seen
//! at once, writes behind its back within the TTL, and the byte bound holds.

mod common;

use std::time::{Duration, Instant};

use common::http::get;
use common::*;
use redis::Commands;

/// A proxy over one built-in node with the cache configured by `hot_keys`,
/// and its admin address (for `/metrics`).
fn cluster(hot_keys: &str) -> (Cluster, String) {
    cluster_over(start_node(free_port()), hot_keys)
}

fn cluster_over(node: Proc, hot_keys: &str) -> (Cluster, String) {
    let c = Cluster::over(
        vec![node],
        &format!("[hot_keys]\n{hot_keys}\n[admin]\nlisten = \"127.0.0.1:0\"\n"),
    );
    let addr = admin_addr(&mut c.client());
    (c, addr)
}

/// The value of an unlabelled sample in a `/metrics` scrape.
/// One sample of a fresh `/metrics` scrape.
fn metric(addr: &str, series: &str) -> f64 {
    let r = get(addr, "/metrics");
    assert_eq!(r.status, 200);
    common::http::sample(&r.text(), series)
}

fn node_hits(c: &Cluster) -> u64 {
    info_number(c.nodes[0].port, "stats", "keyspace_hits")
}

/// Enough GETs that the 1-in-16 sampled sketch counts `key` as hot.
fn make_hot(con: &mut redis::Connection, key: &str) {
    for _ in 0..400 {
        let _: Option<String> = con.get(key).unwrap();
    }
}

#[test]
fn hot_gets_are_served_without_reaching_the_node() {
    let (c, admin) = cluster("cache_ttl_ms = 2000");
    let mut con = c.client();
    let _: () = con.set("hot", "value-1").unwrap();
    make_hot(&mut con, "hot");
    let before = node_hits(&c);
    let hits_before = metric(&admin, "shardis_hot_cache_hits_total");
    let started = Instant::now();
    for _ in 0..200 {
        let v: String = con.get("hot").unwrap();
        assert_eq!(v, "value-1");
    }
    // Each TTL that ran out during the loop costs one refill from the node.
    let refills = 1 + started.elapsed().as_millis() as u64 / 2000;
    let reached = node_hits(&c) - before;
    assert!(
        reached <= refills,
        "{reached} of 200 hot GETs reached the node (at most {refills} refills allowed)"
    );
    let served = metric(&admin, "shardis_hot_cache_hits_total") - hits_before;
    assert!(served >= 200.0 - refills as f64, "cache hits {served}");
    assert!(metric(&admin, "shardis_hot_cache_misses_total") >= 1.0);
    assert!(metric(&admin, "shardis_hot_cache_bytes") > 0.0);
    c.proxy.assert_no_panic();
}

#[test]
fn writes_through_the_proxy_are_seen_by_the_next_get() {
    let (c, _admin) = cluster("cache_ttl_ms = 2000");
    let mut con = c.client();
    let _: () = con.set("k", "one").unwrap();
    make_hot(&mut con, "k");
    let cached = |con: &mut redis::Connection, want: Option<&str>| {
        // Twice: the first may fill the cache, the second is served from it.
        for _ in 0..2 {
            let v: Option<String> = con.get("k").unwrap();
            assert_eq!(v.as_deref(), want);
        }
    };
    cached(&mut con, Some("one"));
    let _: () = con.set("k", "two").unwrap();
    cached(&mut con, Some("two"));
    let _: i64 = con.del("k").unwrap();
    cached(&mut con, None);
    let _: () = con.set("k", "5").unwrap();
    cached(&mut con, Some("5"));
    let _: i64 = con.incr("k", 1).unwrap();
    cached(&mut con, Some("6"));
    let _: () = redis::cmd("MSET")
        .arg("other")
        .arg("x")
        .arg("k")
        .arg("mset")
        .query(&mut con)
        .unwrap();
    cached(&mut con, Some("mset"));
    let _: i64 = redis::cmd("UNLINK")
        .arg("other")
        .arg("k")
        .query(&mut con)
        .unwrap();
    cached(&mut con, None);
    // A RESP3 client sees the cached nil in its own spelling.
    let _: i64 = con.del("k").unwrap();
    cached(&mut con, None);
    let mut r3 = Raw::connect(c.proxy.port);
    let _ = r3.call_bytes(&[b"HELLO", b"3"]);
    assert_eq!(r3.call_bytes(&[b"GET", b"k"]), b"_\r\n");
    c.proxy.assert_no_panic();
}

#[test]
fn a_transaction_through_the_proxy_is_seen_by_the_next_get() {
    // The built-in nodes do not run transactions.
    if !have_tool("redis-server") {
        return;
    }
    let (c, _admin) = cluster_over(start_redis(free_port()), "cache_ttl_ms = 2000");
    let mut con = c.client();
    let _: () = con.set("k", "one").unwrap();
    make_hot(&mut con, "k");
    let cached = |con: &mut redis::Connection, want: Option<&str>| {
        for _ in 0..2 {
            let v: Option<String> = con.get("k").unwrap();
            assert_eq!(v.as_deref(), want);
        }
    };
    let _: () = con.set("k", "tx-before").unwrap();
    cached(&mut con, Some("tx-before"));
    let _: () = redis::cmd("MULTI").query(&mut con).unwrap();
    let queued: String = redis::cmd("SET")
        .arg("k")
        .arg("tx-after")
        .query(&mut con)
        .unwrap();
    assert_eq!(queued, "QUEUED");
    let _: redis::Value = redis::cmd("EXEC").query(&mut con).unwrap();
    cached(&mut con, Some("tx-after"));
    c.proxy.assert_no_panic();
}

#[test]
fn a_write_behind_the_proxys_back_is_seen_within_the_ttl() {
    let ttl_ms = 2000;
    let (c, admin) = cluster(&format!("cache_ttl_ms = {ttl_ms}"));
    let mut con = c.client();
    let _: () = con.set("k", "old").unwrap();
    make_hot(&mut con, "k");
    let hits = metric(&admin, "shardis_hot_cache_hits_total");
    let v: String = con.get("k").unwrap();
    assert_eq!(v, "old");
    assert!(
        metric(&admin, "shardis_hot_cache_hits_total") > hits,
        "not cached"
    );
    let mut direct = connect(c.nodes[0].port);
    let _: () = direct.set("k", "new").unwrap();
    let written = Instant::now();
    // Generous margin for a loaded machine; only the upper bound is asserted.
    let limit = Duration::from_millis(ttl_ms + 3000);
    loop {
        let v: String = con.get("k").unwrap();
        if v == "new" {
            break;
        }
        assert_eq!(v, "old");
        assert!(
            written.elapsed() < limit,
            "still stale after {:?}",
            written.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    c.proxy.assert_no_panic();
}

#[test]
fn with_the_cache_off_every_get_reaches_the_node() {
    let (c, admin) = cluster("cache_ttl_ms = 0");
    let mut con = c.client();
    let _: () = con.set("hot", "v").unwrap();
    make_hot(&mut con, "hot");
    let before = node_hits(&c);
    for _ in 0..200 {
        let v: String = con.get("hot").unwrap();
        assert_eq!(v, "v");
    }
    assert_eq!(node_hits(&c) - before, 200);
    assert_eq!(metric(&admin, "shardis_hot_cache_hits_total"), 0.0);
    assert_eq!(metric(&admin, "shardis_hot_cache_bytes"), 0.0);
    c.proxy.assert_no_panic();
}

#[test]
fn many_big_hot_values_stay_within_cache_max_bytes() {
    let max = 200_000u64;
    let (c, admin) = cluster(&format!(
        "cache_ttl_ms = 10000\ncache_max_bytes = {max}\ncapacity = 256"
    ));
    let mut con = c.client();
    let keys: Vec<String> = (0..40).map(|i| format!("big:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        let _: () = con.set(k, format!("{i:0>20000}")).unwrap();
    }
    let mut peak = 0.0f64;
    for round in 0..6 {
        for (i, k) in keys.iter().enumerate() {
            for _ in 0..48 {
                let v: String = con.get(k).unwrap();
                assert_eq!(v.len(), 20_000);
                assert!(v.ends_with(&i.to_string()), "round {round} {k}");
            }
            let bytes = metric(&admin, "shardis_hot_cache_bytes");
            assert!(bytes <= max as f64, "{bytes} bytes cached, bound {max}");
            peak = peak.max(bytes);
        }
    }
    // The values were cached (the bound was reached for real).
    assert!(peak > max as f64 / 2.0, "peak {peak}");
    assert!(metric(&admin, "shardis_hot_cache_hits_total") > 0.0);
    c.proxy.assert_no_panic();
}

#[test]
fn a_topology_change_clears_the_cache() {
    let (c, admin) = cluster("cache_ttl_ms = 60000");
    let mut con = c.client();
    let keys: Vec<String> = (0..20).map(|i| format!("moving:{i}")).collect();
    for k in &keys {
        let _: () = con.set(k, "before").unwrap();
        make_hot(&mut con, k);
    }
    let hits = metric(&admin, "shardis_hot_cache_hits_total");
    for k in &keys {
        let v: String = con.get(k).unwrap();
        assert_eq!(v, "before");
    }
    assert!(metric(&admin, "shardis_hot_cache_hits_total") > hits);
    let extra = start_node(free_port());
    add_node(&mut con, &extra.addr(), "node2");
    wait_info(&mut con, 60, "ADDNODE to finish", |i| {
        i.contains("state:ok\r\n") && i.contains("nodes:2\r\n")
    });
    // Behind the proxy's back, at each key's owner now: with the cache
    // cleared at the new epoch, every next GET sees it.
    let mut moved = 0;
    for k in &keys {
        let owner = keynode(&mut con, k);
        let port = match owner.as_str() {
            "node1" => c.nodes[0].port,
            "node2" => {
                moved += 1;
                extra.port
            }
            other => panic!("unknown owner {other}"),
        };
        let _: () = connect(port).set(k, "after").unwrap();
        let v: String = con.get(k).unwrap();
        assert_eq!(v, "after", "{k} on {owner}");
    }
    assert!(moved > 0, "no key moved to the new node");
    c.proxy.assert_no_panic();
}
