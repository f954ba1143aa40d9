//! Walking the keyspace through the proxy: SCAN returns every key present for
//! the whole walk (10^5 keys, built-in nodes and redis-server, MATCH / COUNT /
//! TYPE, across ADDNODE and REMOVENODE), bad cursors get clear errors, real
//! clients' scan iterators work, and RANDOMKEY draws from every node.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use common::*;
use redis::Commands;

/// Keys loaded for the full walks.
const KEYS: usize = 100_000;

/// Writes `n` keys `{prefix}{i}` with pipelined MSETs of 1000 pairs.
fn load(con: &mut redis::Connection, prefix: &str, n: usize) {
    let mut pipe = redis::pipe();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let pairs: Vec<(String, usize)> =
            chunk.iter().map(|i| (format!("{prefix}{i}"), *i)).collect();
        pipe.mset(&pairs).ignore();
    }
    let _: () = pipe.query(con).unwrap();
}

fn expected(prefix: &str, n: usize) -> HashSet<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// One SCAN step; `opts` are the arguments after the cursor.
fn step(con: &mut redis::Connection, cursor: &str, opts: &[&str]) -> (String, Vec<String>) {
    redis::cmd("SCAN").arg(cursor).arg(opts).query(con).unwrap()
}

/// A whole walk: the keys returned and the number of steps.
fn walk(con: &mut redis::Connection, opts: &[&str]) -> (Vec<String>, usize) {
    let deadline = Instant::now() + Duration::from_secs(300);
    let (mut cursor, mut keys, mut steps) = ("0".to_string(), Vec::new(), 0);
    loop {
        let (next, batch) = step(con, &cursor, opts);
        keys.extend(batch);
        steps += 1;
        assert!(
            steps < 1_000_000 && Instant::now() < deadline,
            "the walk does not end"
        );
        if next == "0" {
            return (keys, steps);
        }
        cursor = next;
    }
}

fn missing(want: &HashSet<String>, got: &[String]) -> usize {
    let got: HashSet<&String> = got.iter().collect();
    want.iter().filter(|k| !got.contains(k)).count()
}

/// The full walks both kinds of node must pass: plain, COUNT, MATCH, TYPE.
fn every_key_is_walked(c: &Cluster) {
    let mut con = c.client();
    load(&mut con, "k:", KEYS);
    load(&mut con, "other:", 1000);
    let want = expected("k:", KEYS);
    let all: HashSet<String> = want.union(&expected("other:", 1000)).cloned().collect();

    let (keys, steps) = walk(&mut con, &[]);
    assert_eq!(missing(&all, &keys), 0, "a plain walk missed keys");
    assert!(keys.len() >= all.len());
    eprintln!("COUNT 10 (default): {} keys in {steps} steps", keys.len());

    let (keys, steps) = walk(&mut con, &["COUNT", "1000"]);
    assert_eq!(missing(&all, &keys), 0, "a COUNT 1000 walk missed keys");
    eprintln!("COUNT 1000: {} keys in {steps} steps", keys.len());

    let (keys, _) = walk(&mut con, &["MATCH", "other:*", "COUNT", "500"]);
    let got: HashSet<String> = keys.into_iter().collect();
    assert_eq!(
        got,
        expected("other:", 1000),
        "MATCH returns exactly the matching keys"
    );

    let (keys, _) = walk(&mut con, &["TYPE", "string", "COUNT", "1000"]);
    assert_eq!(missing(&all, &keys), 0, "TYPE string returns every string");
    let (keys, _) = walk(&mut con, &["COUNT", "1000", "TYPE", "hash"]);
    assert!(
        keys.iter().all(|k| k.starts_with("h:")),
        "TYPE hash returns only hashes"
    );
}

#[test]
fn a_scan_walk_returns_every_key_of_builtin_nodes() {
    let c = Cluster::builtin(4);
    every_key_is_walked(&c);
}

#[test]
fn a_scan_walk_returns_every_key_of_redis_servers() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(4);
    let mut con = c.client();
    for i in 0..50 {
        let _: () = con.hset(format!("h:{i}"), "f", i).unwrap();
    }
    every_key_is_walked(&c);
    let (keys, _) = walk(&mut con, &["TYPE", "hash"]);
    let got: HashSet<String> = keys.into_iter().collect();
    assert_eq!(
        got,
        expected("h:", 50),
        "TYPE hash returns exactly the hashes"
    );
}

#[test]
fn bad_cursors_are_refused_with_invalid_cursor() {
    let c = Cluster::builtin(2);
    let mut con = c.client();
    load(&mut con, "k:", 100);
    // A cursor naming node 5 of a 2-node ring, tag 1; garbage; negative; too big.
    let node5 = (5u64 << 8) | 2;
    for bad in [
        node5.to_string(),
        "x".into(),
        "-1".into(),
        "256".into(),
        u64::MAX.to_string(),
    ] {
        let r: redis::RedisResult<(String, Vec<String>)> =
            redis::cmd("SCAN").arg(&bad).query(&mut con);
        assert!(
            r.unwrap_err().to_string().contains("invalid cursor"),
            "cursor {bad}"
        );
    }
    // The connection goes on, and a continuing cursor is never 0.
    let (next, _) = step(&mut con, "0", &["COUNT", "1"]);
    assert_ne!(next, "0");
}

/// A node that answers every SCAN with a cursor wider than 35 bits.
fn node_with_wide_cursors() -> (u16, std::thread::JoinHandle<()>) {
    let listener = common::bind_free();
    let port = listener.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        // One connection per upstream: serve at most a few, each bounded in time.
        let end = Instant::now() + Duration::from_secs(30);
        listener.set_nonblocking(true).unwrap();
        let mut served = Vec::new();
        while Instant::now() < end && served.len() < 8 {
            match listener.accept() {
                Ok((s, _)) => served.push(std::thread::spawn(move || serve_wide(s, end))),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    (port, h)
}

fn serve_wide(s: std::net::TcpStream, end: Instant) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    while Instant::now() < end {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(_) => continue,
        }
        let Some(n) = line
            .strip_prefix('*')
            .and_then(|n| n.trim().parse::<usize>().ok())
        else {
            continue;
        };
        let mut args = Vec::new();
        for _ in 0..n * 2 {
            let mut l = String::new();
            if r.read_line(&mut l).unwrap_or(0) == 0 {
                return;
            }
            args.push(l.trim().to_uppercase());
        }
        let reply: &[u8] = match args.get(1).map(String::as_str) {
            Some("SCAN") => b"*2\r\n$12\r\n999999999999\r\n*1\r\n$1\r\na\r\n",
            Some("PING") => b"+PONG\r\n",
            _ => b"+OK\r\n",
        };
        if w.write_all(reply).is_err() {
            return;
        }
    }
}

#[test]
fn a_node_cursor_wider_than_its_bits_is_an_error_naming_the_node() {
    let (port, _h) = node_with_wide_cursors();
    let (_proxy, _dir) = {
        let (p, d) = start_proxy(&[format!("127.0.0.1:{port}")], "");
        (p, d)
    };
    let mut con = connect(_proxy.port);
    let r: redis::RedisResult<(String, Vec<String>)> = redis::cmd("SCAN").arg(0).query(&mut con);
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("node1") && e.contains("999999999999") && e.contains("35 bits"),
        "{e}"
    );
}

fn cluster_state(con: &mut redis::Connection) -> String {
    ring_field(&cluster_info(con), "state")
}

/// Keys for the topology-change walks, and a copy rate slow enough that the
/// copy phase spans several SCAN steps.
const CHANGE_KEYS: usize = 20_000;
const SLOW_COPY: &str = "[migration]\nmax_keys_per_sec = 2000\nbatch = 100\n";

/// Walks until about half the keys were seen, runs `change`, takes SCAN
/// steps while the change copies, waits for it to end, finishes the walk:
/// every key (all present throughout) must have been returned.
fn walk_across(c: &Cluster, change: &[String]) {
    let mut con = c.client();
    load(&mut con, "k:", CHANGE_KEYS);
    let want = expected("k:", CHANGE_KEYS);
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    let deadline = Instant::now() + Duration::from_secs(300);
    while seen.len() < CHANGE_KEYS / 2 {
        let (next, batch) = step(&mut con, &cursor, &["COUNT", "50"]);
        seen.extend(batch);
        assert_ne!(next, "0", "the walk ended before the change");
        cursor = next;
    }
    let _: () = redis::cmd("CLUSTER").arg(change).query(&mut con).unwrap();
    let mut during_copy = 0;
    while cluster_state(&mut con) == "copying" && during_copy < 20 {
        let (next, batch) = step(&mut con, &cursor, &["COUNT", "50"]);
        seen.extend(batch);
        during_copy += 1;
        assert_ne!(next, "0");
        cursor = next;
    }
    assert!(during_copy > 0, "no SCAN step ran during the copy phase");
    wait_state_ok(&mut con, 120);
    loop {
        let (next, batch) = step(&mut con, &cursor, &["COUNT", "50"]);
        seen.extend(batch);
        assert!(Instant::now() < deadline, "the walk does not end");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(
        missing(&want, &seen),
        0,
        "keys present throughout were skipped"
    );
    eprintln!(
        "{:?}: {} steps during the copy, {} keys returned for {CHANGE_KEYS}",
        change,
        during_copy,
        seen.len()
    );
}

#[test]
fn a_scan_walk_across_addnode_returns_every_key() {
    let nodes: Vec<Proc> = (0..4).map(|_| start_node(free_port())).collect();
    let c = Cluster::over(nodes, SLOW_COPY);
    let extra = start_node(free_port());
    walk_across(
        &c,
        &[
            "ADDNODE".into(),
            extra.addr(),
            "NAME".into(),
            "node5".into(),
        ],
    );
    let moved: i64 = redis::cmd("DBSIZE")
        .query(&mut connect(extra.port))
        .unwrap();
    assert!(moved > 0, "the new node took keys");
}

#[test]
fn a_scan_walk_across_removenode_returns_every_key() {
    let nodes: Vec<Proc> = (0..4).map(|_| start_node(free_port())).collect();
    let c = Cluster::over(nodes, SLOW_COPY);
    // The first node: already walked, its keys move to nodes walked or not.
    walk_across(&c, &["REMOVENODE".into(), "node1".into()]);
    let left: i64 = redis::cmd("DBSIZE")
        .query(&mut connect(c.nodes[0].port))
        .unwrap();
    assert_eq!(left, 0, "the removed node was emptied");
}

#[test]
fn redis_py_scan_iter_and_redis_cli_scan_walk_every_key() {
    let c = Cluster::builtin(4);
    let mut con = c.client();
    load(&mut con, "k:", 20_000);
    load(&mut con, "other:", 500);
    if let Some(lib) = redis_py(8) {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/redis_py_scan.py"
        );
        let out = std::process::Command::new("python3")
            .args([script, &c.proxy.port.to_string(), "k:", "20000"])
            .env("PYTHONPATH", lib)
            .output_dying()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if have_tool("redis-cli") {
        let out = std::process::Command::new("redis-cli")
            .args([
                "-p",
                &c.proxy.port.to_string(),
                "--scan",
                "--pattern",
                "other:*",
            ])
            .output_dying()
            .unwrap();
        assert!(out.status.success());
        let got: HashSet<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(got, expected("other:", 500), "redis-cli --scan --pattern");
    }
}

#[test]
fn randomkey_returns_keys_of_every_node() {
    let c = Cluster::builtin(2);
    let mut con = c.client();
    // Two keys on two different nodes.
    let owner = |con: &mut redis::Connection, k: &str| -> String {
        redis::cmd("CLUSTER")
            .arg("KEYNODE")
            .arg(k)
            .query(con)
            .unwrap()
    };
    let a = "a".to_string();
    let b = (0..1000)
        .map(|i| format!("b{i}"))
        .find(|k| owner(&mut con, k) != owner(&mut con, &a))
        .unwrap();
    let _: () = con.set(&a, 1).unwrap();
    let _: () = con.set(&b, 2).unwrap();
    let mut got = HashSet::new();
    for _ in 0..200 {
        let k: String = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
        got.insert(k);
    }
    assert_eq!(got, HashSet::from([a, b]));
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let k: Option<String> = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
    assert_eq!(k, None);
}
