//! The built-in node and a real redis-server, side by side, for the GEO
//! commands: every reply byte for byte the same, under RESP2 and RESP3,
//! errors included; thousands of random points searched with every
//! option; ties in distance cut by COUNT; and GEOADD, GEOSEARCH and the
//! STORE forms with hash-tagged keys through a proxy over built-in nodes.
//! Skips with a printed reason when `redis-server` is not on PATH, unless
//! `SHARDIS_REQUIRE_REDIS=1`.

#[path = "node_vs_redis_geo/cases.rs"]
mod cases;
mod common;
#[path = "node_vs_redis_geo/random.rs"]
mod random;

use common::compare::{pair, split, Compare};
use common::{Cluster, Raw};
use random::Rng;

#[test]
fn geo_replies_match_redis_server_in_resp2_and_resp3() {
    let Some((node, redis)) = pair() else {
        return;
    };
    for proto in ["2", "3"] {
        let mut c = Compare::open_empty(node.port, redis.port, proto);
        for case in cases::CASES {
            c.step("", &["FLUSHALL".to_string()]);
            for step in *case {
                c.step(&format!("RESP{proto}"), &split(step));
            }
        }
        c.finish(&format!("GEO cases, RESP{proto}"));
    }
    node.assert_no_panic();
}

/// 3 000 random points in one sorted set (past the listpack threshold)
/// and 120 in a small one, then 2 000 random searches and 300 storing
/// ones (each followed by a ZRANGE of what it stored) on each protocol.
#[test]
fn random_points_search_alike_on_the_node_and_redis_server() {
    let Some((node, redis)) = pair() else {
        return;
    };
    for (proto, seed) in [("2", 1), ("3", 2)] {
        let mut c = Compare::open_empty(node.port, redis.port, proto);
        let mut r = Rng::new(seed);
        let mut sets = random::points(&mut r, "big", 3000);
        sets.extend(random::points(&mut r, "small", 120));
        for args in &sets {
            c.step("setup", args);
        }
        for i in 0..2000 {
            let (key, n) = if i % 5 == 0 {
                ("small", 120)
            } else {
                ("big", 3000)
            };
            c.step(&format!("RESP{proto}"), &random::search(&mut r, key, n));
        }
        for _ in 0..300 {
            c.step("store", &random::store_search(&mut r, "big", 3000, "dst"));
            c.step(
                "store",
                &["ZRANGE", "dst", "0", "-1", "WITHSCORES"].map(String::from),
            );
        }
        c.finish(&format!("random searches, RESP{proto}"));
    }
    node.assert_no_panic();
}

#[test]
fn ties_in_distance_cut_by_count_keep_redis_order() {
    let Some((node, redis)) = pair() else {
        return;
    };
    let mut c = Compare::open_empty(node.port, redis.port, "2");
    for args in random::ties() {
        c.step("ties", &args);
    }
    c.finish("ties");
}

/// The same GEO session through a proxy over three built-in nodes and on
/// a plain redis-server; a STORE destination on another node than its
/// source is refused and never written.
#[test]
fn geo_with_hash_tagged_store_keys_works_through_the_proxy() {
    if !common::have_tool("redis-server") {
        return;
    }
    let cluster = Cluster::builtin(3);
    let redis = common::start_redis(common::free_port());
    let mut c = Compare::open(cluster.proxy.port, redis.port, "2");
    let mut r = Rng::new(7);
    for args in random::points(&mut r, "{g}pts", 600) {
        c.step("setup", &args);
    }
    let session = [
        "GEOADD {g}pts 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
        "GEOSEARCH {g}pts FROMMEMBER Palermo BYRADIUS 300 km ASC WITHDIST WITHCOORD",
        "GEOSEARCHSTORE {g}near {g}pts FROMLONLAT 13 41 BYBOX 400 300 km STOREDIST",
        "ZRANGE {g}near 0 -1 WITHSCORES",
        "GEORADIUS {g}pts 13 41 150 km COUNT 20 DESC STORE {g}r",
        "ZRANGE {g}r 0 -1 WITHSCORES",
        "GEORADIUSBYMEMBER {g}pts Palermo 500 km STOREDIST {g}d",
        "ZRANGE {g}d 0 -1 WITHSCORES",
        "GEORADIUS_RO {g}pts 13 41 100 km WITHHASH COUNT 5",
        "GEOPOS {g}pts Palermo m1 nosuch",
        "GEOHASH {g}pts Palermo m1",
        "GEODIST {g}pts Palermo m1 km",
    ];
    for step in session {
        c.step("proxy", &split(step));
    }
    for _ in 0..150 {
        c.step("proxy", &random::search(&mut r, "{g}pts", 600));
    }
    let mut admin = Raw::connect(cluster.proxy.port);
    let home = admin.call(&["CLUSTER", "KEYNODE", "{g}pts"]);
    let far = (0..1000)
        .map(|i| format!("far{i}"))
        .find(|k| admin.call(&["CLUSTER", "KEYNODE", k]) != home)
        .expect("a key on another node");
    for req in [
        vec![
            "GEORADIUS",
            "{g}pts",
            "13",
            "41",
            "100",
            "km",
            "STORE",
            &far,
        ],
        vec![
            "GEOSEARCHSTORE",
            &far,
            "{g}pts",
            "FROMLONLAT",
            "13",
            "41",
            "BYRADIUS",
            "9",
            "km",
        ],
    ] {
        let reply = admin.call(&req);
        assert!(reply.contains("same slot"), "{req:?}: {reply}");
        assert_eq!(admin.call(&["EXISTS", &far]), ":0\r\n");
    }
    c.finish("through the proxy");
    cluster.proxy.assert_no_panic();
    for n in &cluster.nodes {
        n.assert_no_panic();
    }
}
