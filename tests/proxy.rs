//! The proxy end to end over real TCP: 10 nodes, real clients, exact replies.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use redis::Commands;

fn seed_scenario(c: &Cluster) {
    let mut con = c.client();
    let _: () = con.set("user:42", r#"{"name":"ada"}"#).unwrap();
    let v: String = con.get("user:42").unwrap();
    assert_eq!(v, r#"{"name":"ada"}"#);
    let n: i64 = con.del("user:42").unwrap();
    assert_eq!(n, 1);
    let v: Option<String> = con.get("user:42").unwrap();
    assert_eq!(v, None);
}

/// Each key exists on exactly one node: its owner per CLUSTER KEYNODE.
fn each_key_lives_only_on_its_owner(c: &Cluster) {
    let mut con = c.client();
    let mut nodes: Vec<redis::Connection> = c.nodes.iter().map(|n| connect(n.port)).collect();
    let mut per_node = vec![0usize; nodes.len()];
    for i in 0..300 {
        let key = format!("owner:{i}");
        let _: () = con.set(&key, i).unwrap();
        let owner = keynode(&mut con, &key);
        let idx: usize = owner.trim_start_matches("node").parse::<usize>().unwrap() - 1;
        per_node[idx] += 1;
        for (j, n) in nodes.iter_mut().enumerate() {
            let v: Option<i64> = n.get(&key).unwrap();
            if j == idx {
                assert_eq!(v, Some(i), "{key} missing on its owner node{}", j + 1);
            } else {
                assert_eq!(
                    v,
                    None,
                    "{key} also stored on node{} (owner node{})",
                    j + 1,
                    idx + 1
                );
            }
        }
    }
    assert!(
        per_node.iter().all(|&n| n > 0),
        "every node owns some of 300 keys: {per_node:?}"
    );
}

fn multi_key_commands_split_and_merge(c: &Cluster) {
    let mut con = c.client();
    let keys: Vec<String> = (0..50).map(|i| format!("mk:{i}")).collect();
    let pairs: Vec<(String, String)> = keys.iter().map(|k| (k.clone(), format!("v-{k}"))).collect();
    let _: () = con.mset(&pairs).unwrap();
    let mut ask: Vec<String> = keys.clone();
    ask.insert(10, "mk:missing".into());
    let vals: Vec<Option<String>> = con.mget(&ask).unwrap();
    for (k, v) in ask.iter().zip(&vals) {
        if k == "mk:missing" {
            assert_eq!(v, &None);
        } else {
            assert_eq!(
                v.as_deref(),
                Some(format!("v-{k}").as_str()),
                "mget order for {k}"
            );
        }
    }
    let n: i64 = redis::cmd("EXISTS").arg(&ask).query(&mut con).unwrap();
    assert_eq!(n, 50);
    let n: i64 = redis::cmd("TOUCH")
        .arg(&keys[..10])
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 10);
    let n: i64 = con.del(&ask).unwrap();
    assert_eq!(n, 50);
    let n: i64 = redis::cmd("EXISTS").arg(&keys).query(&mut con).unwrap();
    assert_eq!(n, 0);
}

fn fan_out_commands_aggregate(c: &Cluster) {
    let mut con = c.client();
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    for i in 0..200 {
        let _: () = con.set(format!("fan:{i}"), i).unwrap();
    }
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 200);
    let mut keys: Vec<String> = con.keys("fan:*").unwrap();
    keys.sort();
    assert_eq!(keys.len(), 200);
    // SCAN walks node after node and returns every key.
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0u64;
    let mut rounds = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(50)
            .query(&mut con)
            .unwrap();
        seen.extend(batch);
        rounds += 1;
        assert!(rounds < 10_000);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 200);
    let k: Option<String> = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
    assert!(k.unwrap().starts_with("fan:"));
    let info: String = redis::cmd("INFO").query(&mut con).unwrap();
    assert!(
        info.contains("redis_mode:standalone")
            && info.contains("loading:0")
            && info.contains("role:master")
    );
    assert!(info.contains("db0:keys=200,"), "{info}");
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 0);
}

fn pipelined_replies_come_back_in_order(c: &Cluster) {
    let mut s = TcpStream::connect(("127.0.0.1", c.proxy.port)).unwrap();
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..2000 {
        let k = format!("pipe:{i}");
        let v = format!("{i}");
        req.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
        req.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len()).as_bytes());
        want.extend_from_slice(b"+OK\r\n");
        want.extend_from_slice(format!("${}\r\n{v}\r\n", v.len()).as_bytes());
    }
    s.write_all(&req).unwrap();
    let got = read_n(&mut s, want.len()).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "pipelined replies out of order");
}

#[test]
fn builtin_cluster_serves_the_seed_scenario_and_routes_every_key_to_its_owner() {
    let c = Cluster::builtin(10);
    seed_scenario(&c);
    each_key_lives_only_on_its_owner(&c);
    multi_key_commands_split_and_merge(&c);
    fan_out_commands_aggregate(&c);
    pipelined_replies_come_back_in_order(&c);
}

#[test]
fn redis_server_cluster_serves_the_same_scenario() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(10);
    seed_scenario(&c);
    each_key_lives_only_on_its_owner(&c);
    multi_key_commands_split_and_merge(&c);
    fan_out_commands_aggregate(&c);
    pipelined_replies_come_back_in_order(&c);
    // Data types the built-in node lacks route by key to redis-server.
    let mut con = c.client();
    let _: () = con.hset("h", "f", "v").unwrap();
    let v: String = con.hget("h", "f").unwrap();
    assert_eq!(v, "v");
    let _: () = con.rpush("l", &["a", "b"]).unwrap();
    let l: Vec<String> = con.lrange("l", 0, -1).unwrap();
    assert_eq!(l, vec!["a", "b"]);
    let _: () = con.zadd("z", "m", 1).unwrap();
    let n: i64 = con.zcard("z").unwrap();
    assert_eq!(n, 1);
    let n: i64 = con.pfadd("hll", "x").unwrap();
    assert_eq!(n, 1);
}

#[test]
fn redis_cli_and_redis_benchmark_work_against_the_proxy() {
    if !have_tool("redis-server") || !have_tool("redis-cli") || !have_tool("redis-benchmark") {
        return;
    }
    let c = Cluster::redis(10);
    let port = c.proxy.port.to_string();
    let cli = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output_dying()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    };
    assert_eq!(cli(&["SET", "user:42", r#"{"name":"ada"}"#]), "OK");
    assert_eq!(cli(&["GET", "user:42"]), r#"{"name":"ada"}"#);
    assert_eq!(cli(&["DEL", "user:42"]), "1");
    let out = std::process::Command::new("redis-benchmark")
        .args([
            "-p",
            &port,
            "-t",
            "set,get,incr,mset",
            "-n",
            "20000",
            "-P",
            "16",
            "-q",
            "--csv",
        ])
        .output_dying()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "redis-benchmark failed: {text}");
    for t in ["SET", "GET", "INCR", "MSET"] {
        assert!(text.contains(&format!("\"{t}")), "no {t} row in {text}");
    }
    assert!(!text.to_lowercase().contains("error"), "{text}");
}

#[test]
fn protocol_errors_close_only_that_client() {
    let c = Cluster::builtin(2);
    let cases: &[(&[u8], &[u8])] = &[
        (
            b"*x\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\nPING\r\n",
            b"-ERR Protocol error: expected '$', got 'P'\r\n",
        ),
        (
            b"SET k \"abc\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"*1\r\n$4\r\nPINGxx",
            b"-ERR Protocol error: bulk string not terminated by CRLF\r\n",
        ),
    ];
    for (req, want) in cases {
        let mut s = TcpStream::connect(("127.0.0.1", c.proxy.port)).unwrap();
        s.write_all(req).unwrap();
        let got = read_to_close(&mut s);
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    }
    // A huge inline line without newline is refused, not buffered forever.
    let mut s = TcpStream::connect(("127.0.0.1", c.proxy.port)).unwrap();
    s.write_all(&vec![b'a'; 70 * 1024]).unwrap();
    assert_eq!(
        read_to_close(&mut s),
        b"-ERR Protocol error: too big inline request\r\n"
    );
    // Others keep working.
    let mut con = c.client();
    let _: () = con.set("still", "ok").unwrap();
}

#[test]
fn unknown_and_refused_commands_get_errors_and_the_connection_stays_open() {
    let c = Cluster::builtin(2);
    let mut s = TcpStream::connect(("127.0.0.1", c.proxy.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let exchanges: &[(&[u8], &[u8])] = &[
        (b"*2\r\n$3\r\nFOO\r\n$3\r\nbar\r\n", b"-ERR unknown command 'FOO', with args beginning with: 'bar' \r\n"),
        (b"*1\r\n$3\r\nGET\r\n", b"-ERR wrong number of arguments for 'get' command\r\n"),
        (b"*3\r\n$6\r\nCLIENT\r\n$19\r\nMAINT_NOTIFICATIONS\r\n$2\r\non\r\n", b"-ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP.\r\n"),
        (b"*1\r\n$4\r\nEXEC\r\n", b"-ERR EXEC without MULTI\r\n"),
        (b"*3\r\n$4\r\nMOVE\r\n$1\r\nk\r\n$1\r\n1\r\n", b"-ERR 'move' is not supported by shardis: MOVE is not supported: the proxy serves database 0 only\r\n"),
        (b"*1\r\n$5\r\nWATCH\r\n", b"-ERR wrong number of arguments for 'watch' command\r\n"),
        (b"*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n", b"-ERR DB index is out of range (shardis serves database 0 only)\r\n"),
        (b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n", b"+OK\r\n"),
        (b"*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$3\r\nfoo\r\n", b":12182\r\n"),
        (b"*5\r\n$6\r\nMSETNX\r\n$4\r\naaaa\r\n$1\r\n1\r\n$4\r\nzzzz\r\n$1\r\n2\r\n", b""),
        (b"*2\r\n$4\r\nECHO\r\n$3\r\na\x00b\r\n", b"$3\r\na\x00b\r\n"),
        (b"PING\r\n", b"+PONG\r\n"),
        (b"\r\n\r\nPING hi\r\n", b"$2\r\nhi\r\n"),
        (b"*1\r\n$4\r\nQUIT\r\n", b"+OK\r\n"),
    ];
    for (req, want) in exchanges {
        s.write_all(req).unwrap();
        if want.is_empty() {
            // MSETNX across nodes is refused; within one node it runs.
            let mut line = Vec::new();
            let mut b = [0u8; 1];
            while !line.ends_with(b"\r\n") {
                std::io::Read::read_exact(&mut s, &mut b).unwrap();
                line.push(b[0]);
            }
            let line = String::from_utf8_lossy(&line);
            assert!(
                line.starts_with("-CROSSSLOT") || line.starts_with(":1"),
                "{line}"
            );
            continue;
        }
        let got = read_n(&mut s, want.len()).unwrap();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    }
    assert_eq!(read_to_close(&mut s), b"", "QUIT closes the connection");
}

#[test]
fn hello_3_switches_the_client_and_its_upstream_to_resp3() {
    let c = Cluster::builtin(3);
    let mut s = TcpStream::connect(("127.0.0.1", c.proxy.port)).unwrap();
    s.write_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n").unwrap();
    let head = read_n(&mut s, 4).unwrap();
    assert_eq!(&head, b"%7\r\n", "HELLO 3 replies with a map");
    // Drain the rest of the HELLO map, then a null must be RESP3's `_`.
    let mut rest = Vec::new();
    let mut b = [0u8; 1];
    while !rest.ends_with(b"modules\r\n*0\r\n") {
        std::io::Read::read_exact(&mut s, &mut b).unwrap();
        rest.push(b[0]);
    }
    s.write_all(b"*2\r\n$3\r\nGET\r\n$12\r\nnothing:here\r\n*3\r\n$3\r\nSET\r\n$2\r\nk3\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$2\r\nk3\r\n")
        .unwrap();
    let want = b"_\r\n+OK\r\n$1\r\nv\r\n";
    assert_eq!(read_n(&mut s, want.len()).unwrap(), want);
    s.write_all(b"*2\r\n$5\r\nHELLO\r\n$1\r\n4\r\n").unwrap();
    let want = b"-NOPROTO unsupported protocol version\r\n";
    assert_eq!(read_n(&mut s, want.len()).unwrap(), want);
}

#[test]
fn binary_safe_keys_and_values_round_trip() {
    let c = Cluster::builtin(3);
    let mut con = c.client();
    let key: Vec<u8> = (0u8..=255).collect();
    let val: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let _: () = con.set(&key, &val).unwrap();
    let got: Vec<u8> = con.get(&key).unwrap();
    assert_eq!(got, val);
}

#[test]
fn redis_py_works_unchanged_over_resp2_and_resp3() {
    let Some(lib) = redis_py(8) else {
        return;
    };
    let c = Cluster::builtin(10);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/redis_py.py");
    let out = std::process::Command::new("python3")
        .args([script, &c.proxy.port.to_string()])
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
