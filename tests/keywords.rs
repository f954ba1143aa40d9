//! Commands whose keys are found by keyword or sit after a subcommand, over
//! redis-server nodes: SORT … STORE and GEORADIUS … STORE land on the
//! destination's owner or are refused, SORT's BY/GET patterns must stay on
//! the sorted key's node, and the stream consumer-group commands route.

mod common;

use common::*;
use redis::Commands;

/// The redis-server process that owns `key` (by the proxy's `CLUSTER KEYNODE`).
fn owner<'a>(c: &'a Cluster, con: &mut redis::Connection, key: &str) -> &'a Proc {
    let name = keynode(con, key);
    let i: usize = name.strip_prefix("node").unwrap().parse().unwrap();
    &c.nodes[i - 1]
}

/// A key named `{prefix}{i}` owned by a different node than `other`.
fn key_elsewhere(c: &Cluster, con: &mut redis::Connection, prefix: &str, other: &str) -> String {
    let home = owner(c, con, other).port;
    (0..1000)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| owner(c, con, k).port != home)
        .unwrap()
}

fn held_by(c: &Cluster, key: &str) -> Vec<u16> {
    c.nodes
        .iter()
        .filter(|n| connect(n.port).exists::<_, bool>(key).unwrap())
        .map(|n| n.port)
        .collect()
}

fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    let r: redis::RedisResult<redis::Value> = redis::cmd(args[0]).arg(&args[1..]).query(con);
    r.unwrap_err().to_string()
}

#[test]
fn sort_store_lands_on_the_destinations_owner_or_is_refused() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    let mut con = c.client();
    let _: () = con.rpush("src", &[3, 1, 2]).unwrap();
    let dst = key_elsewhere(&c, &mut con, "dst", "src");
    let e = err(&mut con, &["SORT", "src", "STORE", &dst]);
    assert!(e.contains("same slot"), "{e}");
    assert!(held_by(&c, &dst).is_empty(), "no node got {dst}");
    let e = err(
        &mut con,
        &["SORT", "src", "ALPHA", "STORE", "x", "STORE", &dst],
    );
    assert!(e.contains("same slot"), "the last STORE counts: {e}");

    // Hash-tagged together: stored, on its owner only.
    let _: () = con.rpush("{t}src", &[3, 1, 2]).unwrap();
    let n: i64 = redis::cmd("SORT")
        .arg("{t}src")
        .arg("STORE")
        .arg("{t}dst")
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(
        held_by(&c, "{t}dst"),
        vec![owner(&c, &mut con, "{t}dst").port]
    );
    let v: Vec<i64> = con.lrange("{t}dst", 0, -1).unwrap();
    assert_eq!(v, vec![1, 2, 3]);

    // BY / GET patterns: hash-tagged with the sorted key, or not reading keys.
    for (k, w) in [("1", "30"), ("2", "10"), ("3", "20")] {
        let _: () = con.set(format!("{{t}}w_{k}"), w).unwrap();
        let _: () = con
            .hset(format!("{{t}}o_{k}"), "name", format!("n{k}"))
            .unwrap();
    }
    let v: Vec<String> = redis::cmd("SORT")
        .arg(&["{t}src", "BY", "{t}w_*", "GET", "#", "GET", "{t}o_*->name"])
        .query(&mut con)
        .unwrap();
    assert_eq!(v, vec!["2", "n2", "3", "n3", "1", "n1"]);
    let v: Vec<String> = redis::cmd("SORT_RO")
        .arg(&["src", "BY", "nosort", "GET", "#"])
        .query(&mut con)
        .unwrap();
    assert_eq!(v.len(), 3);
    let e = err(&mut con, &["SORT", "src", "BY", "w_*"]);
    assert!(e.contains("BY option of SORT denied"), "{e}");
    let e = err(&mut con, &["SORT_RO", "{t}src", "GET", "o_*->name"]);
    assert!(e.contains("GET option of SORT denied"), "{e}");
    let home = owner(&c, &mut con, "{t}src").port;
    let other_tag = (0..1000)
        .map(|i| format!("{{x{i}}}"))
        .find(|k| owner(&c, &mut con, k).port != home)
        .unwrap();
    let e = err(
        &mut con,
        &["SORT", "{t}src", "BY", &format!("{other_tag}w_*")],
    );
    assert!(e.contains("same slot"), "a tag on another node: {e}");
}

#[test]
fn georadius_store_lands_on_the_destinations_owner_or_is_refused() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    let mut con = c.client();
    let _: () = redis::cmd("GEOADD")
        .arg(&[
            "{g}pts",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ])
        .query(&mut con)
        .unwrap();
    let n: i64 = redis::cmd("GEORADIUS")
        .arg(&["{g}pts", "15", "37", "200", "km", "STORE", "{g}near"])
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        held_by(&c, "{g}near"),
        vec![owner(&c, &mut con, "{g}near").port]
    );
    let n: i64 = redis::cmd("GEORADIUSBYMEMBER")
        .arg(&["{g}pts", "Palermo", "200", "km", "STOREDIST", "{g}dist"])
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        held_by(&c, "{g}dist"),
        vec![owner(&c, &mut con, "{g}dist").port]
    );
    let far = key_elsewhere(&c, &mut con, "far", "{g}pts");
    let e = err(
        &mut con,
        &[
            "GEORADIUS",
            "{g}pts",
            "15",
            "37",
            "200",
            "km",
            "STORE",
            &far,
        ],
    );
    assert!(e.contains("same slot"), "{e}");
    assert!(held_by(&c, &far).is_empty());
    let e = err(
        &mut con,
        &[
            "GEOSEARCHSTORE",
            &far,
            "{g}pts",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "200",
            "km",
        ],
    );
    assert!(e.contains("same slot"), "{e}");
    let n: i64 = redis::cmd("GEOSEARCHSTORE")
        .arg(&[
            "{g}s",
            "{g}pts",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "200",
            "km",
        ])
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 2);
}

#[test]
fn stream_consumer_groups_work_through_the_proxy() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    let mut con = c.client();
    for s in ["orders", "events"] {
        for i in 0..3 {
            let _: String = redis::cmd("XADD")
                .arg(&[s, "*", "n", &i.to_string()])
                .query(&mut con)
                .unwrap();
        }
        let _: () = redis::cmd("XGROUP")
            .arg(&["CREATE", s, "g", "0"])
            .query(&mut con)
            .unwrap();
    }
    let r: redis::Value = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP", "g", "alice", "COUNT", "10", "STREAMS", "orders", ">",
        ])
        .query(&mut con)
        .unwrap();
    let ids = stream_ids(&r);
    assert_eq!(ids.len(), 3, "{r:?}");
    let pending: (i64, Option<String>, Option<String>, redis::Value) = redis::cmd("XPENDING")
        .arg(&["orders", "g"])
        .query(&mut con)
        .unwrap();
    assert_eq!(pending.0, 3);
    let acked: i64 = redis::cmd("XACK")
        .arg("orders")
        .arg("g")
        .arg(&ids)
        .query(&mut con)
        .unwrap();
    assert_eq!(acked, 3);
    let pending: (i64, Option<String>, Option<String>, redis::Value) = redis::cmd("XPENDING")
        .arg(&["orders", "g"])
        .query(&mut con)
        .unwrap();
    assert_eq!(pending.0, 0);
    let groups: redis::Value = redis::cmd("XINFO")
        .arg(&["GROUPS", "orders"])
        .query(&mut con)
        .unwrap();
    assert!(format!("{groups:?}").contains("\"g\"") || format!("{groups:?}").contains("g"));
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&["GROUP", "g", "bob", "COUNT", "1", "STREAMS", "events", ">"])
        .query(&mut con)
        .unwrap();
    let claimed: redis::Value = redis::cmd("XAUTOCLAIM")
        .arg(&["events", "g", "carol", "0", "0-0"])
        .query(&mut con)
        .unwrap();
    assert_eq!(stream_ids(&claimed).len(), 1, "{claimed:?}");
    let n: i64 = redis::cmd("XGROUP")
        .arg(&["DESTROY", "events", "g"])
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 1);
    let r: redis::Value = redis::cmd("XREAD")
        .arg(&["COUNT", "2", "STREAMS", "orders", "0"])
        .query(&mut con)
        .unwrap();
    assert_eq!(stream_ids(&r).len(), 2);
    // With BLOCK, on a pinned connection: entries are there, so no wait.
    let r: redis::Value = redis::cmd("XREAD")
        .arg(&["COUNT", "2", "BLOCK", "0", "STREAMS", "orders", "0"])
        .query(&mut con)
        .unwrap();
    assert_eq!(stream_ids(&r).len(), 2);
    let e = err(&mut con, &["XREAD", "STREAMS", "orders", "events", "0"]);
    assert!(e.contains("Unbalanced 'xread' list of streams"), "{e}");
    // A subcommand without a key touches no data: a node answers it as
    // Redis does, and the connection goes on.
    for cmd in ["XGROUP", "OBJECT"] {
        let help: Vec<String> = redis::cmd(cmd).arg("HELP").query(&mut con).unwrap();
        assert!(
            help[0].starts_with(&format!("{cmd} <subcommand>")),
            "{help:?}"
        );
    }
    let n: i64 = redis::cmd("XLEN").arg("orders").query(&mut con).unwrap();
    assert_eq!(n, 3);
}

/// Every stream entry id in a reply (`[[stream, [[id, fields]…]]…]` or
/// XAUTOCLAIM's `[cursor, [[id, fields]…], deleted]`).
fn stream_ids(v: &redis::Value) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(v: &redis::Value, out: &mut Vec<String>) {
        if let redis::Value::Array(items) = v {
            if let [redis::Value::BulkString(id), redis::Value::Array(_)] = items.as_slice() {
                let id = String::from_utf8_lossy(id).to_string();
                if id.contains('-') {
                    out.push(id);
                    return;
                }
            }
            for i in items {
                walk(i, out);
            }
        }
    }
    walk(v, &mut out);
    out
}
