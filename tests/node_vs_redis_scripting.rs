//! The built-in node and a real redis-server, side by side, for Lua
//! scripting and functions: EVAL and its family, SCRIPT, FUNCTION and
//! FCALL at every argument shape, the conversion rules, the sandbox, the
//! cjson/bit/struct/cmsgpack libraries, a rate limiter and a lock release
//! script; every reply byte for byte the same under RESP2 and RESP3,
//! errors included. Then through a proxy over built-in nodes: EVAL routed
//! by its key, keys on two nodes refused, SCRIPT LOAD and FUNCTION LOAD
//! reaching every node. Skips with a printed reason when `redis-server`
//! is not on PATH, unless `SHARDIS_REQUIRE_REDIS=1`.

#[path = "node_vs_redis_scripting/cases.rs"]
mod cases;
mod common;
#[path = "node_vs_redis_scripting/functions.rs"]
mod functions;

use common::compare::{pair, Compare};
use common::{Cluster, Raw};

/// Empties the keyspace, the script cache and the libraries.
fn reset(c: &mut Compare) {
    for cmd in [
        &["FLUSHALL"][..],
        &["SCRIPT", "FLUSH"],
        &["FUNCTION", "FLUSH"],
    ] {
        c.both(cmd);
    }
}

/// Each case from an empty node.
fn cases(c: &mut Compare, what: &str, cases: &[&[&[&str]]]) {
    for case in cases {
        reset(c);
        for step in *case {
            c.step(what, step);
        }
    }
}

#[test]
fn eval_and_script_match_redis_server_in_resp2_and_resp3() {
    let Some((node, redis)) = pair() else {
        return;
    };
    for proto in ["2", "3"] {
        let mut c = Compare::open(node.port, redis.port, proto);
        cases(&mut c, &format!("RESP{proto}"), cases::EVAL);
        c.finish(&format!("EVAL cases, RESP{proto}"));
    }
    node.assert_no_panic();
}

#[test]
fn script_libraries_match_redis_server() {
    let Some((node, redis)) = pair() else {
        return;
    };
    for proto in ["2", "3"] {
        let mut c = Compare::open(node.port, redis.port, proto);
        cases(&mut c, &format!("RESP{proto}"), cases::LIBS);
        c.finish(&format!("library cases, RESP{proto}"));
    }
    node.assert_no_panic();
}

#[test]
fn functions_match_redis_server_in_resp2_and_resp3() {
    let Some((node, redis)) = pair() else {
        return;
    };
    for proto in ["2", "3"] {
        let mut c = Compare::open(node.port, redis.port, proto);
        cases(&mut c, &format!("RESP{proto}"), functions::FUNCTIONS);
        c.finish(&format!("FUNCTION cases, RESP{proto}"));
    }
    node.assert_no_panic();
}

/// A fixed-window rate limiter (INCR, EXPIRE on the first hit, refuse
/// past the limit) and the classic lock release script.
const RATE_LIMITER: &str = "local n = redis.call('incr', KEYS[1])\n\
    if n == 1 then redis.call('expire', KEYS[1], ARGV[2]) end\n\
    if n > tonumber(ARGV[1]) then return {0, n} end\n\
    return {1, n}";
const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then\n\
    return redis.call('del', KEYS[1])\nelse\n  return 0\nend";

#[test]
fn a_rate_limiter_and_a_lock_behave_as_on_redis_server() {
    let Some((node, redis)) = pair() else {
        return;
    };
    let mut c = Compare::open(node.port, redis.port, "2");
    reset(&mut c);
    for _ in 0..7 {
        c.step(
            "limiter",
            &["EVAL", RATE_LIMITER, "1", "rl:user1", "5", "60"],
        );
    }
    c.step("limiter", &["TTL", "rl:user1"]);
    let sha = c.step("limiter", &["SCRIPT", "LOAD", RATE_LIMITER]);
    let sha = String::from_utf8_lossy(&sha)
        .lines()
        .nth(1)
        .unwrap_or("")
        .to_string();
    for _ in 0..3 {
        c.step("limiter", &["EVALSHA", &sha, "1", "rl:user2", "2", "60"]);
    }
    for step in [
        &["SET", "lock", "token-a", "NX", "PX", "30000"][..],
        &["SET", "lock", "token-b", "NX", "PX", "30000"],
        &["EVAL", RELEASE, "1", "lock", "token-b"],
        &["GET", "lock"],
        &["EVAL", RELEASE, "1", "lock", "token-a"],
        &["EXISTS", "lock"],
        &["EVAL", RELEASE, "1", "lock", "token-a"],
    ] {
        c.step("lock", step);
    }
    c.finish("rate limiter and lock");
    node.assert_no_panic();
}

#[test]
fn function_dump_restores_on_a_node() {
    let node = common::start_node(common::free_port());
    let mut r = Raw::connect(node.port);
    let lib = "#!lua name=d1\nredis.register_function('d1f', function(k, a) return 'd1' end)";
    r.check(&["FUNCTION", "LOAD", lib], "$2\r\nd1\r\n");
    let dump = r.call_bytes(&[b"FUNCTION", b"DUMP"]);
    let eol = dump.windows(2).position(|w| w == b"\r\n").unwrap();
    let payload = dump[eol + 2..dump.len() - 2].to_vec();
    let restore = |r: &mut Raw, policy: Option<&str>| {
        let mut args: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", &payload];
        if let Some(p) = policy {
            args.push(p.as_bytes());
        }
        String::from_utf8_lossy(&r.call_bytes(&args)).into_owned()
    };
    assert_eq!(restore(&mut r, None), "-ERR Library d1 already exists\r\n");
    assert_eq!(restore(&mut r, Some("REPLACE")), "+OK\r\n");
    r.check(&["FUNCTION", "FLUSH"], "+OK\r\n");
    r.check(&["FCALL", "d1f", "0"], "-ERR Function not found\r\n");
    assert_eq!(restore(&mut r, None), "+OK\r\n");
    r.check(&["FCALL", "d1f", "0"], "$2\r\nd1\r\n");
    assert_eq!(restore(&mut r, Some("FLUSH")), "+OK\r\n");
    let mut bad = payload.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let reply = r.call_bytes(&[b"FUNCTION", b"RESTORE", &bad]);
    assert_eq!(
        reply,
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    );
    node.assert_no_panic();
}

/// A key the proxy places on each node of `cluster`.
fn key_per_node(admin: &mut Raw, nodes: usize) -> Vec<String> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for i in 0..10_000 {
        let k = format!("k{i}");
        let home = admin.call(&["CLUSTER", "KEYNODE", &k]);
        if !seen.iter().any(|(h, _)| *h == home) {
            seen.push((home, k));
        }
        if seen.len() == nodes {
            break;
        }
    }
    assert_eq!(seen.len(), nodes, "a key on every node");
    seen.into_iter().map(|(_, k)| k).collect()
}

#[test]
fn scripts_and_functions_reach_every_node_through_the_proxy() {
    let cluster = Cluster::builtin(3);
    let mut p = Raw::connect(cluster.proxy.port);
    let keys = key_per_node(&mut p, 3);
    let set = "return redis.call('set', KEYS[1], ARGV[1])";
    for k in &keys {
        p.check(&["EVAL", set, "1", k, "v"], "+OK\r\n");
        p.check(&["GET", k], "$1\r\nv\r\n");
    }
    let reply = p.call(&["EVAL", set, "2", &keys[0], &keys[1], "v"]);
    assert!(reply.starts_with("-CROSSSLOT"), "{reply}");
    let sha = p.call(&["SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"]);
    let sha = sha.lines().nth(1).unwrap().to_string();
    for k in &keys {
        p.check(&["EVALSHA", &sha, "1", k], "$1\r\nv\r\n");
    }
    let lib = "#!lua name=px\nredis.register_function('pxget', function(k, a) return redis.call('get', k[1]) end)";
    p.check(&["FUNCTION", "LOAD", lib], "$2\r\npx\r\n");
    for k in &keys {
        p.check(&["FCALL", "pxget", "1", k], "$1\r\nv\r\n");
        p.check(
            &["FCALL_RO", "pxget", "1", k],
            "-ERR Can not execute a script with write flag using *_ro command.\r\n",
        );
    }
    for n in &cluster.nodes {
        let mut direct = Raw::connect(n.port);
        direct.check(&["SCRIPT", "EXISTS", &sha], "*1\r\n:1\r\n");
        direct.check(&["FCALL", "pxget", "1", "nokey"], "$-1\r\n");
    }
    cluster.proxy.assert_no_panic();
    for n in &cluster.nodes {
        n.assert_no_panic();
    }
}
