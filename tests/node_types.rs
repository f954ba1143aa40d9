//! The built-in node's collection types over real TCP: what the
//! side-by-side comparison with redis-server (7.0) cannot check — Redis
//! 7.2 behaviour the node follows (ZRANK WITHSCORE, list and small-set
//! encodings), DUMP/RESTORE/MIGRATE of every type between nodes, memory
//! accounting and eviction of collections, and redis-benchmark's default
//! suite. Nodes are real processes on free loopback ports.

mod common;

use common::{free_port, have_tool, start_node, DieWithTest, Proc, Raw, BIN};
use std::process::{Command, Stdio};

fn node() -> Proc {
    start_node(free_port())
}

/// The bulk payload inside a `$n\r\n…\r\n` reply.
fn bulk_body(reply: &[u8]) -> Vec<u8> {
    let start = reply.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    reply[start..reply.len() - 2].to_vec()
}

#[test]
fn zrank_withscore_replies_as_redis_7_2_does() {
    let n = node();
    let mut c = Raw::connect(n.port);
    c.check(&["ZADD", "z", "1", "a", "2.5", "b"], ":2\r\n");
    c.check(
        &["ZRANK", "z", "b", "WITHSCORE"],
        "*2\r\n:1\r\n$3\r\n2.5\r\n",
    );
    c.check(
        &["ZREVRANK", "z", "b", "WITHSCORE"],
        "*2\r\n:0\r\n$3\r\n2.5\r\n",
    );
    c.check(&["ZRANK", "z", "zz", "WITHSCORE"], "*-1\r\n");
    c.check(&["ZRANK", "nokey", "a", "WITHSCORE"], "*-1\r\n");
    c.check(&["ZRANK", "z", "a", "FOO"], "-ERR syntax error\r\n");
    c.check(
        &["ZRANK", "z", "a", "WITHSCORE", "x"],
        "-ERR wrong number of arguments for 'zrank' command\r\n",
    );
    c.call(&["HELLO", "3"]);
    c.check(&["ZRANK", "z", "a", "WITHSCORE"], "*2\r\n:0\r\n,1\r\n");
    c.check(&["ZRANK", "z", "zz", "WITHSCORE"], "_\r\n");
}

#[test]
fn list_and_set_encodings_follow_the_configured_thresholds() {
    let n = node();
    let mut c = Raw::connect(n.port);
    c.check(&["RPUSH", "l", "a", "b", "c", "d"], ":4\r\n");
    c.check(&["OBJECT", "ENCODING", "l"], "$8\r\nlistpack\r\n");
    c.check(&["CONFIG", "SET", "list-max-listpack-size", "4"], "+OK\r\n");
    c.check(&["RPUSH", "l", "e"], ":5\r\n");
    c.check(&["OBJECT", "ENCODING", "l"], "$9\r\nquicklist\r\n");
    // Back to a listpack only once it fits in half the limit.
    c.check(&["RPOP", "l", "2"], "*2\r\n$1\r\ne\r\n$1\r\nd\r\n");
    c.check(&["OBJECT", "ENCODING", "l"], "$9\r\nquicklist\r\n");
    c.check(&["RPOP", "l"], "$1\r\nc\r\n");
    c.check(&["OBJECT", "ENCODING", "l"], "$8\r\nlistpack\r\n");
    c.check(&["RPUSH", "big", &"x".repeat(9000)], ":1\r\n");
    c.check(
        &["CONFIG", "SET", "list-max-listpack-size", "-2"],
        "+OK\r\n",
    );
    c.check(&["LPUSH", "big", "y"], ":2\r\n");
    c.check(&["OBJECT", "ENCODING", "big"], "$9\r\nquicklist\r\n");

    c.check(&["SADD", "s", "1", "2"], ":2\r\n");
    c.check(&["OBJECT", "ENCODING", "s"], "$6\r\nintset\r\n");
    c.check(&["SADD", "s", "x"], ":1\r\n");
    c.check(&["OBJECT", "ENCODING", "s"], "$8\r\nlistpack\r\n");
    // A listpack set keeps insertion order (the intset's order first).
    c.check(
        &["SMEMBERS", "s"],
        "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\nx\r\n",
    );
    c.check(
        &["CONFIG", "SET", "set-max-listpack-entries", "3"],
        "+OK\r\n",
    );
    c.check(&["SADD", "s", "y"], ":1\r\n");
    c.check(&["OBJECT", "ENCODING", "s"], "$9\r\nhashtable\r\n");
    c.check(
        &["CONFIG", "GET", "set-max-listpack-entries"],
        "*2\r\n$24\r\nset-max-listpack-entries\r\n$1\r\n3\r\n",
    );
    c.check(&["SADD", "long", &"v".repeat(65)], ":1\r\n");
    c.check(&["OBJECT", "ENCODING", "long"], "$9\r\nhashtable\r\n");
}

/// Builds one key of every type on `c`, each with a TTL.
fn fill_every_type(c: &mut Raw) {
    c.check(&["HSET", "h", "f1", "v1", "f2", "v\r\n2"], ":2\r\n");
    c.check(&["RPUSH", "l", "a", "", "c"], ":3\r\n");
    c.check(&["SADD", "si", "3", "1", "2"], ":3\r\n");
    c.check(&["SADD", "ss", "x", "y"], ":2\r\n");
    c.check(&["ZADD", "z", "1.5", "m", "-inf", "n"], ":2\r\n");
    c.check(&["SET", "str", "plain"], "+OK\r\n");
    for k in ["h", "l", "si", "ss", "z", "str"] {
        c.check(&["EXPIRE", k, "100"], ":1\r\n");
    }
}

/// What each key of [`fill_every_type`] reads back as.
fn read_every_type(c: &mut Raw) -> Vec<String> {
    vec![
        c.call(&["HGETALL", "h"]),
        c.call(&["LRANGE", "l", "0", "-1"]),
        c.call(&["SMEMBERS", "si"]),
        c.call(&["SORT", "ss", "ALPHA"]),
        c.call(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        c.call(&["GET", "str"]),
        c.call(&["OBJECT", "ENCODING", "si"]),
        c.call(&["TYPE", "ss"]),
    ]
}

fn assert_ttls_kept(c: &mut Raw) {
    for k in ["h", "l", "si", "ss", "z", "str"] {
        let ttl = c.int(&["TTL", k]);
        assert!((90..=100).contains(&ttl), "{k}: ttl {ttl}");
    }
}

#[test]
fn dump_and_restore_carry_every_type_and_its_ttl_between_nodes() {
    let (a, b) = (node(), node());
    let (mut ca, mut cb) = (Raw::connect(a.port), Raw::connect(b.port));
    fill_every_type(&mut ca);
    for k in ["h", "l", "si", "ss", "z", "str"] {
        let payload = bulk_body(&ca.call_bytes(&[b"DUMP", k.as_bytes()]));
        let pttl = ca.int(&["PTTL", k]).to_string();
        let restore: Vec<&[u8]> = vec![b"RESTORE", k.as_bytes(), pttl.as_bytes(), &payload];
        assert_eq!(cb.call_bytes(&restore), b"+OK\r\n", "{k}");
        assert_eq!(
            cb.call_bytes(&restore),
            b"-BUSYKEY Target key name already exists.\r\n"
        );
        // Any corrupted byte is refused with Redis's error.
        for i in [0, 4, 5, payload.len() / 2, payload.len() - 1] {
            let mut bad = payload.clone();
            bad[i] ^= 0x20;
            let r = cb.call_bytes(&[b"RESTORE", b"bad", b"0", &bad]);
            assert_eq!(r, b"-ERR DUMP payload version or checksum are wrong\r\n");
        }
    }
    assert_eq!(read_every_type(&mut ca), read_every_type(&mut cb));
    assert_ttls_kept(&mut cb);
    cb.check(&["EXISTS", "bad"], ":0\r\n");
}

#[test]
fn migrate_moves_every_type_with_its_ttl() {
    let (a, b) = (node(), node());
    let (mut ca, mut cb) = (Raw::connect(a.port), Raw::connect(b.port));
    fill_every_type(&mut ca);
    let want = read_every_type(&mut ca);
    let port = b.port.to_string();
    let keys = ["h", "l", "si", "ss", "z", "str"];
    let mut args = vec![
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "COPY",
        "REPLACE",
        "KEYS",
    ];
    args.extend(keys);
    ca.check(&args, "+OK\r\n");
    assert_eq!(read_every_type(&mut cb), want);
    assert_ttls_kept(&mut cb);
    // Change the copies at the target, then move for real: REPLACE wins
    // and the source copies go.
    cb.check(&["HSET", "h", "extra", "1"], ":1\r\n");
    args.retain(|a| *a != "COPY");
    ca.check(&args, "+OK\r\n");
    assert_eq!(read_every_type(&mut cb), want);
    ca.check(&["DBSIZE"], ":0\r\n");
}

#[test]
fn memory_accounting_counts_every_element_and_returns_to_zero() {
    let n = node();
    let mut c = Raw::connect(n.port);
    let base = c.info_field("memory", "used_memory");
    for (kind, add) in [
        ("hash", &["HSET", "k", "F", "vvvvvvvvvvvvvvvvvvvv"][..]),
        (
            "list",
            &["RPUSH", "k", "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"][..],
        ),
        ("set", &["SADD", "k", "F"][..]),
        ("zset", &["ZADD", "k", "1", "F"][..]),
    ] {
        let mut last = 0;
        for i in 0..2000 {
            let field = format!("member-{i:06}");
            let args: Vec<&str> = add
                .iter()
                .map(|a| if *a == "F" { field.as_str() } else { a })
                .collect();
            c.call(&args);
            if i == 0 {
                last = c.int(&["MEMORY", "USAGE", "k"]);
            }
        }
        let usage = c.int(&["MEMORY", "USAGE", "k"]);
        // At least the bytes of 2000 elements, and not wildly more.
        assert!(usage > last + 2000 * 13, "{kind}: {last} -> {usage}");
        assert!(usage < 2000 * 200, "{kind}: {usage}");
        let used = c.info_field("memory", "used_memory");
        assert!(
            used >= base + usage as u64,
            "{kind}: used {used}, base {base}, key {usage}"
        );
        c.check(&["DEL", "k"], ":1\r\n");
        assert_eq!(c.info_field("memory", "used_memory"), base, "{kind}");
    }
}

/// Resident set size of a process, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

#[test]
fn big_hashes_under_a_small_maxmemory_stay_bounded() {
    const MAXMEMORY: u64 = 8 * 1024 * 1024;
    let port = free_port();
    let mut n = Proc::spawn(
        Command::new(BIN)
            .args([
                "node",
                "--port",
                &port.to_string(),
                "--maxmemory",
                &MAXMEMORY.to_string(),
            ])
            .stdout(Stdio::null()),
        port,
        "node",
    );
    n.wait_ready();
    let mut c = Raw::connect(port);
    let value = "x".repeat(100);
    // 300 hashes of 1000 fields of ~110 bytes: ~33 MB of data, four times
    // the limit. Pipelined in bounded batches of 100 commands.
    let (hashes, fields_per_cmd) = (300, 50);
    for h in 0..hashes {
        for batch in 0..(1000 / fields_per_cmd) {
            let key = format!("hash:{h}");
            let names: Vec<String> = (0..fields_per_cmd)
                .map(|f| format!("field:{:04}", batch * fields_per_cmd + f))
                .collect();
            let mut args: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
            for name in &names {
                args.push(name.as_bytes());
                args.push(value.as_bytes());
            }
            c.send(&args);
        }
        for _ in 0..(1000 / fields_per_cmd) {
            let r = c.reply();
            assert!(r.starts_with(b":"), "{}", String::from_utf8_lossy(&r));
        }
    }
    let used = c.info_field("memory", "used_memory");
    // One HSET may land after eviction made room: allow one command's worth.
    assert!(used <= MAXMEMORY + 64 * 1024, "used_memory {used}");
    assert!(c.info_field("stats", "evicted_keys") > 100);
    let keys = c.int(&["DBSIZE"]);
    assert!((10..hashes).contains(&keys), "{keys} hashes left");
    // The accounting is honest: the process holds about what it reports.
    let rss = rss_bytes(n.pid());
    eprintln!("maxmemory {MAXMEMORY}: used_memory {used}, rss {rss}, {keys} hashes left");
    assert!(
        rss < 48 * 1024 * 1024,
        "rss {rss} with maxmemory {MAXMEMORY}"
    );
    // The most recent hash is whole.
    assert_eq!(c.int(&["HLEN", &format!("hash:{}", hashes - 1)]), 1000);
}

#[test]
fn redis_benchmark_default_suite_runs_without_errors() {
    if !have_tool("redis-benchmark") {
        return;
    }
    let n = node();
    let out = Command::new("timeout")
        .args([
            "300",
            "redis-benchmark",
            "-p",
            &n.port.to_string(),
            "-q",
            "-n",
            "2000",
            "--csv",
        ])
        .output_dying()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let errors = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "redis-benchmark failed: {text} {errors}"
    );
    for t in [
        "SET",
        "GET",
        "INCR",
        "LPUSH",
        "RPUSH",
        "LPOP",
        "RPOP",
        "SADD",
        "HSET",
        "SPOP",
        "ZADD",
        "ZPOPMIN",
        "LRANGE_600",
        "MSET",
    ] {
        assert!(text.contains(&format!("\"{t}")), "no {t} row in {text}");
    }
    assert!(!text.to_lowercase().contains("error"), "{text}");
    assert!(!errors.to_lowercase().contains("error"), "{errors}");
}

/// One CLUSTER RINGINFO field, as the proxy reports it.
fn cluster_field(c: &mut Raw, key: &str) -> String {
    let info = c.call(&["CLUSTER", "RINGINFO"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

#[test]
fn adding_a_node_moves_collections_of_every_type_with_their_ttls() {
    let cluster = common::Cluster::builtin(3);
    let mut c = Raw::connect(cluster.proxy.port);
    let n = 200;
    let read = |c: &mut Raw, i: usize| {
        vec![
            c.call(&["HGETALL", &format!("h:{i}")]),
            c.call(&["LRANGE", &format!("l:{i}"), "0", "-1"]),
            c.call(&["SMEMBERS", &format!("s:{i}")]),
            c.call(&["ZRANGE", &format!("z:{i}"), "0", "-1", "WITHSCORES"]),
        ]
    };
    for i in 0..n {
        let v = i.to_string();
        c.check(&["HSET", &format!("h:{i}"), "f", &v, "g", "x"], ":2\r\n");
        c.check(&["RPUSH", &format!("l:{i}"), "a", &v], ":2\r\n");
        c.check(
            &["SADD", &format!("s:{i}"), "1", &v, "1000"],
            if i == 1 || i == 1000 {
                ":2\r\n"
            } else {
                ":3\r\n"
            },
        );
        c.check(&["ZADD", &format!("z:{i}"), "1.5", "m", &v, "n"], ":2\r\n");
        for k in ["h", "l", "s", "z"] {
            c.check(&["EXPIRE", &format!("{k}:{i}"), "1000"], ":1\r\n");
        }
    }
    let before: Vec<Vec<String>> = (0..n).map(|i| read(&mut c, i)).collect();
    let extra = start_node(free_port());
    c.check(
        &["CLUSTER", "ADDNODE", &extra.addr(), "NAME", "node4"],
        "+OK\r\n",
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while cluster_field(&mut c, "state") != "ok" {
        assert!(
            std::time::Instant::now() < deadline,
            "migration did not finish"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let moved = Raw::connect(extra.port).int(&["DBSIZE"]);
    assert!(
        moved > 4 * n as i64 / 10,
        "only {moved} keys moved to the new node"
    );
    assert_eq!(
        cluster_field(&mut c, "migration_keys_copied"),
        moved.to_string()
    );
    for (i, want) in before.iter().enumerate() {
        assert_eq!(&read(&mut c, i), want, "key set {i}");
        for k in ["h", "l", "s", "z"] {
            let ttl = c.int(&["TTL", &format!("{k}:{i}")]);
            assert!((900..=1000).contains(&ttl), "{k}:{i} ttl {ttl}");
        }
    }
    // Every moved key is a collection with its type intact.
    let mut direct = Raw::connect(extra.port);
    let keys = direct.call(&["KEYS", "*"]);
    for k in keys.lines().filter(|l| l.contains(':')) {
        let want = match &k[..1] {
            "h" => "+hash\r\n",
            "l" => "+list\r\n",
            "s" => "+set\r\n",
            _ => "+zset\r\n",
        };
        direct.check(&["TYPE", k], want);
    }
}

#[test]
fn huge_negative_random_counts_are_refused_not_allocated() {
    let n = node();
    let mut c = Raw::connect(n.port);
    c.check(&["SADD", "s", "a"], ":1\r\n");
    c.check(&["HSET", "h", "f", "v"], ":1\r\n");
    c.check(&["ZADD", "z", "1", "m"], ":1\r\n");
    let err = "-ERR count is too large: at most 16777216 repeated picks per call\r\n";
    c.check(&["SRANDMEMBER", "s", "-9223372036854775807"], err);
    c.check(&["HRANDFIELD", "h", "-100000000", "WITHVALUES"], err);
    c.check(&["ZRANDMEMBER", "z", "-100000000"], err);
    assert_eq!(c.int(&["SCARD", "s"]), 1);
    c.check(
        &["SRANDMEMBER", "s", "-3"],
        "*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n",
    );
}

#[test]
fn scans_of_large_collections_return_every_element_once() {
    let n = node();
    let mut c = Raw::connect(n.port);
    for i in 0..1200 {
        let m = format!("m{i}");
        c.call(&["HSET", "h", &m, "v"]);
        c.call(&["SADD", "s", &m]);
        c.call(&["ZADD", "z", &i.to_string(), &m]);
    }
    c.check(&["OBJECT", "ENCODING", "h"], "$9\r\nhashtable\r\n");
    c.check(&["OBJECT", "ENCODING", "s"], "$9\r\nhashtable\r\n");
    c.check(&["OBJECT", "ENCODING", "z"], "$8\r\nskiplist\r\n");
    for (cmd, key, stride) in [("HSCAN", "h", 2), ("SSCAN", "s", 1), ("ZSCAN", "z", 2)] {
        let (mut cursor, mut seen, mut calls) = ("0".to_string(), Vec::new(), 0);
        loop {
            let reply = c.call(&[cmd, key, &cursor, "COUNT", "50"]);
            let lines: Vec<&str> = reply.split("\r\n").collect();
            cursor = lines[2].to_string();
            // Element names are every `stride`-th bulk string after the header.
            let items: Vec<&str> = lines[4..].iter().skip(1).step_by(2).copied().collect();
            seen.extend(items.iter().step_by(stride).map(|s| s.to_string()));
            calls += 1;
            assert!(calls < 1000, "{cmd} does not finish");
            if cursor == "0" {
                break;
            }
        }
        seen.sort();
        let before = seen.len();
        seen.dedup();
        assert_eq!((before, seen.len()), (1200, 1200), "{cmd}");
        assert!(calls > 10, "{cmd} returned everything in {calls} calls");
    }
}
