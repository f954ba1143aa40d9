//! The built-in node and a real redis-server, side by side: every command in
//! the table must get byte-for-byte the same reply from both. Skips with a
//! printed reason when `redis-server` is not on PATH, unless
//! `SHARDIS_REQUIRE_REDIS=1`, which makes that a failure.

mod common;
#[path = "node_vs_redis/harness.rs"]
mod harness;
#[path = "node_vs_redis/hashes.rs"]
mod hashes;
#[path = "node_vs_redis/keys.rs"]
mod keys;
#[path = "node_vs_redis/lists.rs"]
mod lists;
#[path = "node_vs_redis/sets.rs"]
mod sets;
#[path = "node_vs_redis/zsets.rs"]
mod zsets;

use harness::{apply_marker, normalize, Conn};
use shardis::backend::{run, NodeConfig};

/// Each case starts from an empty keyspace on both servers. Replies that
/// legitimately differ (versions, ids, times, DUMP payloads, key order of
/// multi-key walks) are left out.
const CASES: &[&[&[&str]]] = &[
    &[
        &["PING"],
        &["PING", "hello"],
        &["PING", "a", "b"],
        &["ECHO", "x"],
        &["ECHO"],
    ],
    &[
        &["foo"],
        &["foo", "a", "b", "c"],
        &["GET"],
        &["GET", "a", "b"],
        &["MSET", "a"],
        &["MSETNX", "a", "1", "b"],
    ],
    &[
        &["SET", "k", "v"],
        &["GET", "k"],
        &["GET", "nokey"],
        &["TYPE", "k"],
        &["TYPE", "nokey"],
        &["STRLEN", "k"],
    ],
    &[
        &["SET", "k", "v", "EX", "0"],
        &["SET", "k", "v", "EX", "-1"],
        &["SET", "k", "v", "EX", "abc"],
        &["SET", "k", "v", "NX", "XX"],
        &["SET", "k", "v", "EX", "10", "PX", "10"],
        &["SET", "k", "v", "KEEPTTL", "EX", "10"],
        &["SET", "k", "v", "EX", "9223372036854775807"],
        &["SET", "k", "v", "PX", "9223372036854775807"],
        &["SET", "k", "v", "FOO"],
        &["SET", "k", "v", "EX"],
    ],
    &[
        &["SET", "k", "v", "GET"],
        &["SET", "k", "w", "NX"],
        &["SET", "k", "w", "NX", "GET"],
        &["SET", "k", "x", "XX", "GET"],
        &["SET", "j", "x", "XX"],
        &["SET", "k", "y", "EX", "100"],
        &["TTL", "k"],
        &["SET", "k", "z", "KEEPTTL"],
        &["TTL", "k"],
        &["SET", "k", "z"],
        &["TTL", "k"],
    ],
    &[
        &["SETNX", "k", "1"],
        &["SETNX", "k", "2"],
        &["SETEX", "k", "0", "v"],
        &["SETEX", "k", "abc", "v"],
        &["SETEX", "k", "100", "v"],
        &["PSETEX", "k", "0", "v"],
        &["PSETEX", "k", "100000", "v"],
        &["GETSET", "k", "new"],
        &["TTL", "k"],
        &["GETSET", "nokey", "x"],
        &["GETDEL", "k"],
        &["GETDEL", "k"],
    ],
    &[
        &["SET", "k", "v"],
        &["GETEX", "k", "FOO"],
        &["GETEX", "k", "EX", "0"],
        &["GETEX", "k", "EX", "abc"],
        &["GETEX", "k", "EX"],
        &["GETEX", "k", "PERSIST", "EX", "1"],
        &["GETEX", "nokey", "EX", "abc"],
        &["GETEX", "k", "EX", "100"],
        &["TTL", "k"],
        &["GETEX", "k", "PERSIST"],
        &["TTL", "k"],
        &["GETEX", "k", "PXAT", "1"],
        &["EXISTS", "k"],
    ],
    &[
        &["MSET", "a", "1", "b", "2"],
        &["MGET", "a", "nokey", "b"],
        &["MSETNX", "a", "9", "c", "3"],
        &["MSETNX", "c", "3", "d", "4"],
        &["MGET", "a", "c", "d"],
        &["MGET"],
    ],
    &[
        &["APPEND", "k", "hello"],
        &["APPEND", "k", " world"],
        &["APPEND", "k", ""],
        &["GETRANGE", "k", "0", "4"],
        &["GETRANGE", "k", "-5", "-1"],
        &["GETRANGE", "k", "-1", "-5"],
        &["GETRANGE", "k", "5", "1"],
        &["GETRANGE", "k", "0", "100"],
        &["GETRANGE", "k", "a", "1"],
        &["GETRANGE", "nokey", "0", "1"],
        &["SUBSTR", "k", "0", "2"],
        &["SETRANGE", "k", "6", "WORLD"],
        &["GET", "k"],
        &["SETRANGE", "k", "-1", "x"],
        &["SETRANGE", "k", "536870912", "x"],
        &["SETRANGE", "nokey", "0", ""],
        &["SETRANGE", "nokey", "abc", "x"],
        &["SETRANGE", "pad", "3", "x"],
        &["GET", "pad"],
    ],
    &[
        &["INCR", "n"],
        &["INCRBY", "n", "10"],
        &["DECR", "n"],
        &["DECRBY", "n", "5"],
        &["INCRBY", "n", "abc"],
        &["DECRBY", "n", "-9223372036854775808"],
        &["SET", "n", "9223372036854775807"],
        &["INCR", "n"],
        &["SET", "n", "-9223372036854775808"],
        &["DECR", "n"],
        &["SET", "s", "abc"],
        &["INCR", "s"],
        &["SET", "s", " 1"],
        &["INCR", "s"],
        &["SET", "s", "01"],
        &["INCR", "s"],
        &["SET", "s", "+1"],
        &["INCR", "s"],
    ],
    &[
        &["INCRBYFLOAT", "f", "0.1"],
        &["INCRBYFLOAT", "f", "0.2"],
        &["INCRBYFLOAT", "f", "1e20"],
        &["INCRBYFLOAT", "f", "inf"],
        &["INCRBYFLOAT", "f", " 1"],
        &["INCRBYFLOAT", "f", "abc"],
        &["SET", "g", "3.0"],
        &["INCRBYFLOAT", "g", "1.5e-7"],
        &["INCRBYFLOAT", "g", "-3.00000015"],
        &["INCRBYFLOAT", "g", "10.5"],
        &["SET", "s", "abc"],
        &["INCRBYFLOAT", "s", "1"],
    ],
    &[
        &["SET", "k", "v"],
        &["EXISTS", "k", "k", "nokey"],
        &["TOUCH", "k", "nokey"],
        &["PERSIST", "k"],
        &["TTL", "k"],
        &["PTTL", "nokey"],
        &["EXPIRE", "k", "abc"],
        &["EXPIRE", "k", "10", "FOO"],
        &["EXPIRE", "k", "abc", "FOO"],
        &["EXPIRE", "k", "10", "NX", "XX"],
        &["EXPIRE", "k", "10", "GT", "LT"],
        &["EXPIRE", "k", "9223372036854775807"],
        &["EXPIRE", "k", "100", "XX"],
        &["EXPIRE", "k", "100", "GT"],
        &["EXPIRE", "k", "100", "LT"],
        &["TTL", "k"],
        &["EXPIRE", "k", "50", "GT"],
        &["EXPIRE", "k", "200", "GT"],
        &["EXPIRE", "k", "300", "NX"],
        &["TTL", "k"],
        &["PEXPIRE", "k", "500000", "LT"],
        &["TTL", "k"],
        &["EXPIREAT", "k", "4102444800"],
        &["EXPIRETIME", "k"],
        &["PEXPIRETIME", "k"],
        &["PERSIST", "k"],
        &["EXPIRETIME", "k"],
        &["PEXPIREAT", "k", "1"],
        &["EXISTS", "k"],
        &["EXPIRE", "nokey", "10"],
    ],
    &[
        &["RENAME", "nokey", "x"],
        &["SET", "a", "1"],
        &["RENAME", "a", "a"],
        &["RENAME", "a", "b"],
        &["GET", "b"],
        &["EXISTS", "a"],
        &["SET", "c", "3", "EX", "100"],
        &["RENAMENX", "c", "b"],
        &["RENAMENX", "c", "d"],
        &["TTL", "d"],
        &["RENAMENX", "nokey", "e"],
        &["COPY", "b", "b"],
        &["COPY", "b", "d"],
        &["COPY", "b", "d", "REPLACE"],
        &["GET", "d"],
        &["COPY", "nokey", "z"],
        &["COPY", "b", "z", "FOO"],
        &["OBJECT", "ENCODING", "b"],
        &["SET", "s", "hello"],
        &["OBJECT", "ENCODING", "s"],
        &["SET", "s", "0123456789012345678901234567890123456789012345"],
        &["OBJECT", "ENCODING", "s"],
        &["OBJECT", "ENCODING", "nokey"],
        &["OBJECT", "REFCOUNT", "b"],
        &["OBJECT", "REFCOUNT", "s"],
        &["OBJECT", "FREQ", "s"],
        &["OBJECT", "FOO", "s"],
    ],
    &[
        &["DEL"],
        &["DEL", "nokey"],
        &["SET", "a", "1"],
        &["SET", "b", "2"],
        &["DEL", "a", "b", "c"],
        &["UNLINK", "a"],
    ],
    &[
        &["SET", "k", "v"],
        &["SCAN", "abc"],
        &["SCAN", "0", "COUNT", "0"],
        &["SCAN", "0", "COUNT", "-1"],
        &["SCAN", "0", "COUNT", "abc"],
        &["SCAN", "0", "MATCH"],
        &["SCAN", "0", "FOO", "bar"],
        &["SCAN", "0"],
        &["SCAN", "0", "MATCH", "k*"],
        &["SCAN", "0", "MATCH", "x*"],
        &["SCAN", "0", "TYPE", "string"],
        &["SCAN", "0", "TYPE", "hash"],
        &["SCAN", "18446744073709551616"],
        &["KEYS", "*"],
        &["KEYS", "[k]"],
        &["KEYS", "nomatch*"],
        &["KEYS"],
        &["RANDOMKEY"],
        &["DBSIZE"],
        &["DBSIZE", "x"],
    ],
    &[
        &["SET", "k", "v"],
        &["RESTORE", "k", "0", "xx"],
        &["RESTORE", "k2", "0", "xx"],
        &["RESTORE", "k2", "-1", "xx"],
        &["RESTORE", "k2", "0", "xx", "FOO"],
        &["DUMP", "nokey"],
        &["MIGRATE", "127.0.0.1", "1", "nokey", "0", "100"],
        &[
            "MIGRATE",
            "127.0.0.1",
            "1",
            "nokey",
            "0",
            "100",
            "KEYS",
            "a",
        ],
        &["MIGRATE", "127.0.0.1", "1", "", "0", "100", "KEYS", "nokey"],
        &["MIGRATE", "127.0.0.1", "1", "k", "0", "100", "FOO"],
    ],
    &[
        &["SELECT", "0"],
        &["SELECT", "abc"],
        &["SELECT", "1", "2"],
        &["HELLO", "4"],
        &["HELLO", "1"],
        &["HELLO", "abc"],
        &["HELLO", "3", "SETNAME"],
        &["HELLO", "3", "AUTH", "a"],
        &["HELLO", "2", "FOO"],
        &["HELLO", "3", "SETNAME", "x y"],
        &["CLIENT", "SETNAME", "x y"],
        &["CLIENT", "SETNAME", "ok"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", ""],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", "a", "b"],
        &["CLIENT", "FOO"],
        &["CLIENT", "NO-EVICT", "on"],
    ],
    &[
        &["CONFIG", "GET", "save"],
        &["CONFIG", "GET", "appendonly"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "GET"],
        &["CONFIG", "GET", "nosuchparameter"],
        &["CONFIG", "SET", "maxmemory", "abc"],
        &["CONFIG", "SET", "foo", "1"],
        &["CONFIG", "SET", "maxmemory", "100mb"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["TIME", "x"],
        &["FLUSHALL", "FOO"],
        &["FLUSHALL", "SYNC", "x"],
        &["FLUSHDB", "ASYNC"],
        &["FLUSHALL", "SYNC"],
    ],
    &[
        &["HELLO", "3"],
        &["GET", "nokey"],
        &["MGET", "a", "nokey"],
        &["SET", "x", "1", "GET"],
        &["GETDEL", "nokey"],
        &["CONFIG", "GET", "appendonly"],
        &["TTL", "nokey"],
        &["RANDOMKEY"],
    ],
];

#[tokio::test]
async fn replies_match_redis_server_byte_for_byte() {
    if !common::have_tool("redis-server") {
        return;
    }
    let redis = common::start_redis(common::free_port());
    let listener = common::bind_free_tokio();
    let node_port = listener.local_addr().unwrap().port();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(listener, NodeConfig::default(), async {
        let _ = stopped.await;
    }));
    let mut mismatches = Vec::new();
    let all = [
        CASES,
        hashes::CASES,
        lists::CASES,
        sets::CASES,
        zsets::CASES,
        keys::CASES,
    ];
    for case in all.iter().flat_map(|c| c.iter()) {
        let (mut ours, mut theirs) = (Conn::open(node_port).await, Conn::open(redis.port).await);
        ours.call(&["FLUSHALL"]).await;
        theirs.call(&["FLUSHALL"]).await;
        for step in *case {
            let (marker, args) = match step[0] {
                m @ ("~" | "~2" | "#") => (Some(m), &step[1..]),
                _ => (None, *step),
            };
            let (a, b) = (ours.call(args).await, theirs.call(args).await);
            let (a, b) = (normalize(args, a), normalize(args, b));
            let (a, b) = (apply_marker(marker, a), apply_marker(marker, b));
            if a != b {
                mismatches.push(format!(
                    "{args:?}\n  node:  {:?}\n  redis: {:?}",
                    String::from_utf8_lossy(&a),
                    String::from_utf8_lossy(&b)
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} replies differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// Collections past every compact threshold (and, for sorted sets, over
/// several internal chunks) answer range, rank and removal queries as
/// redis-server does.
#[tokio::test]
async fn large_collections_match_redis_server() {
    if !common::have_tool("redis-server") {
        return;
    }
    let redis = common::start_redis(common::free_port());
    let listener = common::bind_free_tokio();
    let node_port = listener.local_addr().unwrap().port();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(listener, NodeConfig::default(), async {
        let _ = stopped.await;
    }));
    let (mut ours, mut theirs) = (Conn::open(node_port).await, Conn::open(redis.port).await);
    let mut setup: Vec<Vec<String>> = Vec::new();
    let mut x: u64 = 7;
    for chunk in 0..6 {
        let mut zadd = vec!["ZADD".to_string(), "z".into()];
        let mut rpush = vec!["RPUSH".to_string(), "l".into()];
        let mut hset = vec!["HSET".to_string(), "h".into()];
        for i in 0..500 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Few distinct scores, so ties are ordered by member bytes.
            zadd.push(((x >> 40) % 700).to_string());
            zadd.push(format!("m{}", (x >> 20) % 100_000));
            rpush.push(format!("item{}", chunk * 500 + i));
            hset.push(format!("f{}", chunk * 500 + i));
            hset.push(i.to_string());
        }
        setup.extend([zadd, rpush, hset]);
    }
    let queries: &[&[&str]] = &[
        &["ZCARD", "z"],
        &["ZRANGE", "z", "0", "9", "WITHSCORES"],
        &["ZRANGE", "z", "1000", "1020"],
        &["ZRANGE", "z", "-30", "-1", "WITHSCORES"],
        &["ZRANGE", "z", "0", "15", "REV", "WITHSCORES"],
        &[
            "ZRANGE",
            "z",
            "100",
            "(300",
            "BYSCORE",
            "LIMIT",
            "700",
            "20",
            "WITHSCORES",
        ],
        &[
            "ZRANGE", "z", "(500", "100", "BYSCORE", "REV", "LIMIT", "10", "20",
        ],
        &[
            "ZREVRANGEBYSCORE",
            "z",
            "+inf",
            "-inf",
            "LIMIT",
            "2500",
            "30",
        ],
        &["ZCOUNT", "z", "250", "(251"],
        &["ZRANK", "z", "m4242"],
        &["ZREVRANK", "z", "m4242"],
        &["ZSCORE", "z", "m4242"],
        &["ZREMRANGEBYRANK", "z", "500", "1700"],
        &["ZRANGE", "z", "480", "520", "WITHSCORES"],
        &["ZREMRANGEBYSCORE", "z", "300", "400"],
        &["ZCARD", "z"],
        &["ZPOPMIN", "z", "3"],
        &["ZPOPMAX", "z", "3"],
        &["ZRANGE", "z", "-10", "-1"],
        &["OBJECT", "ENCODING", "z"],
        &["LLEN", "l"],
        &["LRANGE", "l", "1490", "1510"],
        &["LINDEX", "l", "-1234"],
        &["LSET", "l", "2000", "x"],
        &["LREM", "l", "0", "item2999"],
        &["LTRIM", "l", "100", "-100"],
        &["LRANGE", "l", "-5", "-1"],
        &["LPOS", "l", "x"],
        &["HLEN", "h"],
        &["HGET", "h", "f2999"],
        &["HINCRBY", "h", "f17", "5"],
        &["HMGET", "h", "f17", "nofield", "f1500"],
        &["OBJECT", "ENCODING", "h"],
        &["HDEL", "h", "f1", "f2", "f3"],
        &["HLEN", "h"],
    ];
    let mut mismatches = Vec::new();
    for args in setup.iter() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(ours.call(&args).await, theirs.call(&args).await);
    }
    for args in queries {
        let (a, b) = (ours.call(args).await, theirs.call(args).await);
        if a != b {
            mismatches.push(format!(
                "{args:?}\n  node:  {:?}\n  redis: {:?}",
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b)
            ));
        }
    }
    let (a, b) = (
        apply_marker(Some("~2"), ours.call(&["HGETALL", "h"]).await),
        apply_marker(Some("~2"), theirs.call(&["HGETALL", "h"]).await),
    );
    assert!(a == b, "HGETALL of a large hash differs");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
