//! What reaches a replica of a built-in node and how: expiry as absolute
//! times (a replica hides an expired key but leaves its removal to the
//! primary), scripts, functions and MULTI/EXEC by their effects, blocking
//! pops as the pops they made, FLUSHALL; and a replica pointed at a
//! redis-server keeps retrying with its link reported down.

mod common;
#[path = "node_replication/support.rs"]
mod support;

use common::{eventually, free_port, have_tool, skip, start_node, start_redis, Raw};
use std::time::Duration;
use support::*;

#[test]
fn expiry_reaches_the_replica_as_an_absolute_time_and_a_del() {
    let (pp, rp) = (free_port(), free_port());
    let _primary = start_node(pp);
    let _replica = start_replica(rp, &format!("127.0.0.1:{pp}"));
    wait_synced(pp, rp, 30);
    let mut p = Raw::connect(pp);
    let mut r = Raw::connect(rp);
    p.check(&["SET", "short", "v", "PX", "300"], "+OK\r\n");
    p.check(&["SET", "long", "v", "EX", "1000"], "+OK\r\n");
    p.check(&["SET", "e", "v"], "+OK\r\n");
    p.check(&["EXPIRE", "e", "500"], ":1\r\n");
    p.check(&["SET", "g", "v"], "+OK\r\n");
    p.check(&["GETEX", "g", "PX", "123456"], "$1\r\nv\r\n");
    p.check(&["SETEX", "sx", "100", "v"], "+OK\r\n");
    p.check(&["SET", "gone", "v"], "+OK\r\n");
    p.check(&["PEXPIREAT", "gone", "1"], ":1\r\n");
    wait_synced(pp, rp, 10);
    for k in ["short", "long", "e", "g", "sx"] {
        assert_eq!(
            p.call(&["PEXPIRETIME", k]),
            r.call(&["PEXPIRETIME", k]),
            "{k}"
        );
    }
    r.check(&["EXISTS", "gone"], ":0\r\n");
    std::thread::sleep(Duration::from_millis(400));
    // Expired: hidden on the replica even before the primary's DEL.
    r.check(&["GET", "short"], "$-1\r\n");
    p.check(&["GET", "short"], "$-1\r\n");
    wait_synced(pp, rp, 10);
    assert_same_keyspace(pp, rp);
}

#[test]
fn scripts_functions_and_transactions_replicate_by_their_effects() {
    let (pp, rp) = (free_port(), free_port());
    let _primary = start_node(pp);
    let _replica = start_replica(rp, &format!("127.0.0.1:{pp}"));
    wait_synced(pp, rp, 30);
    let mut p = Raw::connect(pp);
    p.check(
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], 'a'); redis.call('INCR', KEYS[2]); return redis.call('SPOP', KEYS[3])",
            "3",
            "s1",
            "s2",
            "nosuch",
        ],
        "$-1\r\n",
    );
    p.check(&["SADD", "set", "a", "b", "c", "d", "e"], ":5\r\n");
    p.call(&["SPOP", "set", "2"]);
    p.call(&["EVAL", "return redis.call('SPOP', KEYS[1])", "1", "set"]);
    p.call(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('bump', function(keys) return redis.call('INCRBY', keys[1], 5) end)",
    ]);
    p.check(&["FCALL", "bump", "1", "fc"], ":5\r\n");
    p.check(&["MULTI"], "+OK\r\n");
    p.check(&["SET", "m1", "x"], "+QUEUED\r\n");
    p.check(&["EXPIRE", "m1", "100"], "+QUEUED\r\n");
    p.check(&["RPUSH", "ml", "a", "b"], "+QUEUED\r\n");
    p.check(&["EXEC"], "*3\r\n+OK\r\n:1\r\n:2\r\n");
    p.check(&["RPUSH", "q", "1", "2", "3"], ":3\r\n");
    p.check(&["BLPOP", "q", "0"], "*2\r\n$1\r\nq\r\n$1\r\n1\r\n");
    p.check(&["ZADD", "z", "1", "a", "2", "b"], ":2\r\n");
    p.check(
        &["BZPOPMAX", "z", "0"],
        "*3\r\n$1\r\nz\r\n$1\r\nb\r\n$1\r\n2\r\n",
    );
    p.call(&["XADD", "st", "*", "f", "v"]);
    p.call(&["XGROUP", "CREATE", "st", "g", "0"]);
    p.call(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "st", ">"]);
    p.call(&["INCRBYFLOAT", "fl", "0.1"]);
    wait_synced(pp, rp, 10);
    assert_same_keyspace(pp, rp);
    let mut r = Raw::connect(rp);
    assert_eq!(
        r.call(&["FUNCTION", "LIST"]),
        p.call(&["FUNCTION", "LIST"]),
        "the library reached the replica"
    );
    for k in ["st", "m1"] {
        assert_eq!(r.call(&["DUMP", k]), p.call(&["DUMP", k]), "{k}");
    }
    assert_eq!(
        r.call(&["XINFO", "GROUPS", "st"]),
        p.call(&["XINFO", "GROUPS", "st"])
    );
    p.check(&["FLUSHALL"], "+OK\r\n");
    wait_synced(pp, rp, 10);
    r.check(&["DBSIZE"], ":0\r\n");
}

#[test]
fn a_replica_that_joins_later_gets_the_libraries_and_a_read_only_replica_refuses_script_writes() {
    let (pp, rp) = (free_port(), free_port());
    let _primary = start_node(pp);
    let mut p = Raw::connect(pp);
    p.call(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function{function_name='get1', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}",
    ]);
    p.check(&["SET", "k", "v"], "+OK\r\n");
    let _replica = start_replica(rp, &format!("127.0.0.1:{pp}"));
    wait_synced(pp, rp, 30);
    let mut r = Raw::connect(rp);
    r.check(&["FCALL_RO", "get1", "1", "k"], "$1\r\nv\r\n");
    r.check(
        &["EVAL", "return redis.call('GET', KEYS[1])", "1", "k"],
        "$1\r\nv\r\n",
    );
    let e = r.call(&["EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k"]);
    assert!(
        e.starts_with("-READONLY You can't write against a read only replica."),
        "{e}"
    );
    r.check(&["CONFIG", "SET", "replica-read-only", "no"], "+OK\r\n");
    r.check(&["SET", "local", "1"], "+OK\r\n");
    r.check(
        &["CONFIG", "GET", "slave-read-only"],
        "*2\r\n$15\r\nslave-read-only\r\n$2\r\nno\r\n",
    );
}

#[test]
fn replicaof_a_redis_server_keeps_retrying_with_the_link_down() {
    if !have_tool("redis-server") {
        return skip(
            "redis-server is not installed",
            "apt-get install redis-server",
        );
    }
    let (rs, np) = (free_port(), free_port());
    let _redis = start_redis(rs);
    let node = start_replica(np, &format!("127.0.0.1:{rs}"));
    // redis-server sends its RDB file after repl-diskless-sync-delay (5 s).
    eventually(20, "the node names what is wrong", || {
        node.stderr_tail(50).contains("not a built-in shardis node")
    });
    assert_eq!(field(np, "replication", "master_link_status"), "down");
    assert_eq!(field(np, "replication", "role"), "slave");
}

#[test]
fn replicaof_changes_and_errors_answer_as_redis_does() {
    let (pp, rp) = (free_port(), free_port());
    let _primary = start_node(pp);
    let _node = start_node(rp);
    let mut r = Raw::connect(rp);
    r.check(&["REPLICAOF", "NO", "ONE"], "+OK\r\n");
    r.check(
        &["REPLICAOF", "127.0.0.1", "x"],
        "-ERR Invalid master port\r\n",
    );
    r.check(&["REPLICAOF", "127.0.0.1", &pp.to_string()], "+OK\r\n");
    r.check(
        &["REPLICAOF", "127.0.0.1", &pp.to_string()],
        "+OK Already connected to specified master\r\n",
    );
    wait_synced(pp, rp, 30);
    r.check(&["SLAVEOF", "NO", "ONE"], "+OK\r\n");
    r.check(&["SET", "k", "v"], "+OK\r\n");
    assert!(r.call(&["ROLE"]).starts_with("*3\r\n$6\r\nmaster\r\n"));
}
