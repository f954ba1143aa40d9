//! The operator's questions over RESP: SLOWLOG, CLUSTER HOTKEYS, the
//! hot-shard tripwire in CLUSTER RINGINFO, and CLUSTER PLAN's dry run checked
//! against the change it predicts.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redis::{Commands, Value};

fn field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        .trim()
        .to_string()
}

fn bulk(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

#[test]
fn slowlog_keeps_redis_shape_with_the_serving_node() {
    let nodes: Vec<Proc> = (0..3).map(|_| start_node(free_port())).collect();
    let c = Cluster::over(nodes, "[slowlog]\nlog_slower_than_us = 0\nmax_len = 5\n");
    let mut con = c.client();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("ops-test")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut con).unwrap();
    let owner = keynode(&mut con, "user:7");
    let long = "v".repeat(200);
    let _: () = con.set("user:7", &long).unwrap();
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1)
        .query(&mut con)
        .unwrap();
    let Value::Array(e) = &entries[0] else {
        panic!("{entries:?}")
    };
    assert_eq!(
        e.len(),
        7,
        "id, timestamp, µs, args, addr, name, node: {e:?}"
    );
    assert!(matches!(e[0], Value::Int(_)));
    let Value::Int(ts) = e[1] else { panic!() };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - ts).abs() < 60);
    assert!(matches!(e[2], Value::Int(us) if us >= 0));
    let Value::Array(args) = &e[3] else { panic!() };
    assert_eq!(bulk(&args[0]), "SET");
    assert_eq!(bulk(&args[1]), "user:7");
    assert_eq!(
        bulk(&args[2]),
        format!("{}... (72 more bytes)", &long[..128])
    );
    assert!(bulk(&e[4]).starts_with("127.0.0.1:"));
    assert_eq!(bulk(&e[5]), "ops-test");
    assert_eq!(bulk(&e[6]), owner);

    // Bounded by max_len; newest first; RESET empties it.
    for i in 0..20 {
        let _: Option<String> = con.get(format!("k{i}")).unwrap();
    }
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut con).unwrap();
    assert_eq!(len, 5);
    let all: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(&mut con)
        .unwrap();
    assert_eq!(all.len(), 5);
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut con).unwrap();
    // RESET itself is the only entry after it.
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut con).unwrap();
    assert!(len <= 1, "{len}");
    // An MGET over several nodes names how many served it.
    let keys: Vec<String> = (0..30).map(|i| format!("spread:{i}")).collect();
    let _: Vec<Option<String>> = con.mget(&keys).unwrap();
    let last: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1)
        .query(&mut con)
        .unwrap();
    let Value::Array(e) = &last[0] else { panic!() };
    assert_eq!(bulk(&e[6]), "3 nodes");
}

#[test]
fn slowlog_leaves_fast_requests_out_and_answers_errors_like_redis() {
    let nodes: Vec<Proc> = (0..2).map(|_| start_node(free_port())).collect();
    let c = Cluster::over(nodes, "[slowlog]\nlog_slower_than_us = 5000000\n");
    let mut con = c.client();
    for i in 0..50 {
        let _: Option<String> = con.get(format!("k{i}")).unwrap();
    }
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut con).unwrap();
    assert_eq!(len, 0);
    let port = c.proxy.port;
    for (req, want) in [
        (
            "*2\r\n$7\r\nSLOWLOG\r\n$4\r\nnope\r\n",
            "-ERR unknown subcommand 'nope'. Try SLOWLOG HELP.\r\n",
        ),
        (
            "*3\r\n$7\r\nSLOWLOG\r\n$3\r\nLEN\r\n$1\r\n1\r\n",
            "-ERR wrong number of arguments for 'slowlog|len' command\r\n",
        ),
        (
            "*3\r\n$7\r\nSLOWLOG\r\n$3\r\nGET\r\n$2\r\n-2\r\n",
            "-ERR count should be greater than or equal to -1\r\n",
        ),
        (
            "*1\r\n$7\r\nSLOWLOG\r\n",
            "-ERR wrong number of arguments for 'slowlog' command\r\n",
        ),
    ] {
        assert_eq!(
            String::from_utf8_lossy(&raw(port, req.as_bytes(), want.len())),
            want
        );
    }
}

#[test]
fn hotkeys_and_the_hot_shard_tripwire_find_a_hammered_key() {
    let nodes: Vec<Proc> = (0..4).map(|_| start_node(free_port())).collect();
    let c = Cluster::over(nodes, "");
    let mut con = c.client();
    let owner = keynode(&mut con, "hot:key");
    let _: () = con.set("hot:key", "x").unwrap();
    // Up to 8 000 GETs of one key among 800 of others, pipelined in batches.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut info = String::new();
    for round in 0..40 {
        let mut p = redis::pipe();
        for i in 0..200 {
            p.get("hot:key");
            if i % 10 == 0 {
                p.get(format!("cold:{round}:{i}"));
            }
        }
        let _: Vec<Option<String>> = p.query(&mut con).unwrap();
        info = cluster_info(&mut con);
        if round >= 12 && field(&info, "hot_shard") != "none" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        assert!(Instant::now() < deadline);
    }
    let hot = field(&info, "hot_shard");
    assert!(
        hot.starts_with(&format!("{owner}(share=")),
        "owner {owner}, hot_shard {hot}"
    );

    let top: Vec<(String, i64)> = redis::cmd("CLUSTER")
        .arg("HOTKEYS")
        .arg(3)
        .query(&mut con)
        .unwrap();
    assert!(!top.is_empty() && top.len() <= 3, "{top:?}");
    assert_eq!(top[0].0, "hot:key", "{top:?}");
    // Sampled 1 in 16, decaying 10 % a second: a rough estimate, but far above any cold key.
    assert!(top[0].1 >= 1_000, "{top:?}");
    assert!(
        top.iter().skip(1).all(|(_, n)| *n < top[0].1 / 4),
        "{top:?}"
    );
    let err = redis::cmd("CLUSTER")
        .arg("HOTKEYS")
        .arg(0)
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

fn plan(con: &mut redis::Connection, args: &[&str]) -> String {
    redis::cmd("CLUSTER")
        .arg("PLAN")
        .arg(args)
        .query(con)
        .unwrap()
}

#[test]
fn plan_predicts_what_addnode_copies_and_changes_nothing() {
    let nodes: Vec<Proc> = (0..3).map(|_| start_node(free_port())).collect();
    let c = Cluster::over(
        nodes,
        "[migration]\ncopy_rate = \"unlimited\"\nmax_keys_per_sec = 20000\n",
    );
    let mut con = c.client();
    let n = 6_000;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let pairs: Vec<(String, String)> = chunk
            .iter()
            .map(|i| (format!("user:{i}"), "v".repeat(i % 100)))
            .collect();
        let _: () = con.mset(&pairs).unwrap();
    }
    let spare = start_node(free_port());
    let before: Vec<i64> = c.nodes.iter().map(|x| dbsize(x.port)).collect();
    let epoch = field(&cluster_info(&mut con), "epoch");

    let p = plan(&mut con, &["ADDNODE", &spare.addr(), "NAME", "node4"]);
    assert_eq!(field(&p, "epoch"), epoch);
    assert_eq!(field(&p, "keys_total"), n.to_string());
    let predicted: u64 = field(&p, "keys_to_move").parse().unwrap();
    // About a quarter of the keys move to a fourth node of equal weight.
    assert!((n as u64 / 8..n as u64 / 2).contains(&predicted), "{p}");
    let bytes: f64 = field(&p, "bytes_to_move").parse().unwrap();
    assert!(bytes > predicted as f64 * 6.0, "{p}");
    assert!(
        field(&p, "copy_rate_source").starts_with("configured"),
        "{p}"
    );
    let eta: f64 = field(&p, "estimated_duration_s").parse().unwrap();
    assert!((eta - predicted as f64 / 20_000.0).abs() < 0.06, "{p}");
    assert_eq!(
        p.lines().filter(|l| l.starts_with("from:")).count(),
        3,
        "{p}"
    );

    // Nothing changed: same epoch, same key counts, the spare still empty.
    assert_eq!(field(&cluster_info(&mut con), "epoch"), epoch);
    assert_eq!(
        c.nodes.iter().map(|x| dbsize(x.port)).collect::<Vec<_>>(),
        before
    );
    assert_eq!(dbsize(spare.port), 0);

    // The real change copies exactly the predicted keys (the count is exact for a quiet keyspace).
    add_node(&mut con, &spare.addr(), "node4");
    let deadline = Instant::now() + Duration::from_secs(120);
    let info = loop {
        let info = cluster_info(&mut con);
        if field(&info, "state") == "ok" {
            break info;
        }
        assert!(Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        field(&info, "migration_keys_copied"),
        predicted.to_string(),
        "{info}\n{p}"
    );
    assert_eq!(dbsize(spare.port) as u64, predicted);

    // Removing a node moves every key it owns.
    let p = plan(&mut con, &["REMOVENODE", "node1"]);
    assert_eq!(
        field(&p, "keys_to_move"),
        dbsize(c.nodes[0].port).to_string(),
        "{p}"
    );
    assert!(
        field(&p, "moved_fraction").parse::<f64>().unwrap() > 0.1,
        "{p}"
    );
}

#[test]
fn plan_refuses_bad_requests_with_clear_errors() {
    let c = Cluster::builtin(2);
    let mut con = c.client();
    for (args, want) in [
        (vec!["ADDNODE", "nowhere"], "invalid node address"),
        (vec!["ADDNODE", "127.0.0.1:1", "WEIGHT"], "syntax error"),
        (vec!["ADDNODE", &c.nodes[0].addr()], "already in the ring"),
        (vec!["REMOVENODE", "nosuch"], "no node named"),
        (vec!["FROBNICATE"], "usage: CLUSTER PLAN"),
        (vec![], "usage: CLUSTER PLAN"),
    ] {
        let err = redis::cmd("CLUSTER")
            .arg("PLAN")
            .arg(&args)
            .query::<String>(&mut con)
            .unwrap_err();
        assert!(err.to_string().contains(want), "{args:?}: {err}");
    }
}

#[test]
fn shardis_up_serves_the_admin_api_by_default() {
    if std::net::TcpListener::bind("127.0.0.1:7070").is_err() {
        skip_busy(
            "127.0.0.1:7070 is in use, so `up` would serve without it",
            "stop what listens on 127.0.0.1:7070",
        );
        return;
    }
    let up = Up::start(2, &[]);
    let port = up.port();
    let info = cluster_info(&mut connect(port));
    let admin = field(&info, "admin_listen");
    if admin != "127.0.0.1:7070" {
        // Another `shardis up` took the default port between the check and the start.
        assert_eq!(admin, "-", "{info}");
        skip_busy(
            "127.0.0.1:7070 was taken meanwhile",
            "stop what listens on 127.0.0.1:7070",
        );
        return;
    }
    let r = common::http::get(&admin, "/cluster");
    assert_eq!(r.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["nodes"].as_array().unwrap().len(), 2);
}
