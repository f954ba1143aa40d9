//! The built-in node and a real redis-server, side by side: every command in
//! the table must get byte-for-byte the same reply from both. Skips with a
//! printed reason when `redis-server` is not on PATH, unless
//! `SHARDIS_REQUIRE_REDIS=1`, which makes that a failure.

mod common;

use shardis::backend::{run, NodeConfig};
use std::time::Duration;
use tokio::net::TcpListener;

const READ_TIMEOUT: Duration = Duration::from_secs(5);

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

/// A RESP connection that reads whole replies (the crate's client).
struct Conn(shardis::client::Conn);

impl Conn {
    async fn open(port: u16) -> Conn {
        let addr = format!("127.0.0.1:{port}");
        Conn(
            shardis::client::Conn::connect(&addr, READ_TIMEOUT)
                .await
                .unwrap(),
        )
    }

    async fn call(&mut self, args: &[&str]) -> Vec<u8> {
        match self.0.call_str(args).await {
            Ok(r) => r.to_vec(),
            Err(e) => panic!("no reply to {args:?}: {e}"),
        }
    }
}

/// HELLO's reply carries the version and client id, which differ by design;
/// compare everything else.
fn normalize(args: &[&str], reply: Vec<u8>) -> Vec<u8> {
    if !args[0].eq_ignore_ascii_case("hello") || reply.starts_with(b"-") {
        return reply;
    }
    let text = String::from_utf8_lossy(&reply).into_owned();
    let mut lines: Vec<String> = text.split("\r\n").map(String::from).collect();
    for i in 0..lines.len() {
        if lines[i] == "version" || lines[i] == "id" {
            lines[i + 1] = "<elided>".into();
            if lines[i] == "version" {
                lines[i + 2] = "<elided>".into();
            }
        }
    }
    lines.join("\r\n").into_bytes()
}

#[tokio::test]
async fn replies_match_redis_server_byte_for_byte() {
    if !common::have_tool("redis-server") {
        return;
    }
    let redis = common::start_redis(common::free_port());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node_port = listener.local_addr().unwrap().port();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(listener, NodeConfig::default(), async {
        let _ = stopped.await;
    }));
    let mut mismatches = Vec::new();
    for case in CASES {
        let (mut ours, mut theirs) = (Conn::open(node_port).await, Conn::open(redis.port).await);
        ours.call(&["FLUSHALL"]).await;
        theirs.call(&["FLUSHALL"]).await;
        for args in *case {
            let (a, b) = (ours.call(args).await, theirs.call(args).await);
            let (a, b) = (normalize(args, a), normalize(args, b));
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
