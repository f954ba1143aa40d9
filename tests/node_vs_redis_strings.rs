//! The built-in node and a real redis-server, side by side, for the rest of
//! the string family: bitmaps, BITFIELD, LCS, HyperLogLog and CONFIG. Every
//! reply must be byte-for-byte the same, under RESP2 and RESP3, errors
//! included; HLL values must be the same bytes (GET). A property test runs
//! random bitmap sequences on both. Skips with a printed reason when
//! `redis-server` is not on PATH, unless `SHARDIS_REQUIRE_REDIS=1`.

mod common;

use common::conn::Conn;
use proptest::prelude::*;
use shardis::backend::{run, NodeConfig};
use tokio::net::TcpListener;

/// Each case starts from an empty keyspace on both servers.
const CASES: &[&[&[&str]]] = &[
    // SETBIT / GETBIT
    &[
        &["SETBIT", "b", "7", "1"],
        &["SETBIT", "b", "7", "0"],
        &["SETBIT", "b", "100", "1"],
        &["GET", "b"],
        &["STRLEN", "b"],
        &["GETBIT", "b", "100"],
        &["GETBIT", "b", "101"],
        &["GETBIT", "b", "100000"],
        &["GETBIT", "nokey", "0"],
        &["SETBIT", "b", "-1", "1"],
        &["SETBIT", "b", "abc", "1"],
        &["SETBIT", "b", "4294967296", "1"],
        &["SETBIT", "b", "1", "2"],
        &["SETBIT", "b", "1", "-1"],
        &["SETBIT", "b", "1", "x"],
        &["SETBIT", "b", "abc", "x"],
        &["GETBIT", "b", "-1"],
        &["GETBIT", "b", "4294967296"],
        &["GETBIT", "b", "4294967295"],
        &["GETBIT", "nokey", "x"],
        &["SETBIT", "b"],
        &["GETBIT", "b", "1", "2"],
        &["SET", "s", "foo", "EX", "100"],
        &["SETBIT", "s", "0", "1"],
        &["GET", "s"],
        &["TTL", "s"],
    ],
    // BITCOUNT
    &[
        &["SET", "k", "foobar"],
        &["BITCOUNT", "k"],
        &["BITCOUNT", "k", "0", "0"],
        &["BITCOUNT", "k", "1", "1"],
        &["BITCOUNT", "k", "1", "1", "BYTE"],
        &["BITCOUNT", "k", "5", "30", "BIT"],
        &["BITCOUNT", "k", "5", "30", "bit"],
        &["BITCOUNT", "k", "-1", "-1"],
        &["BITCOUNT", "k", "-2", "-1", "BIT"],
        &["BITCOUNT", "k", "-1", "-2"],
        &["BITCOUNT", "k", "-1", "-2", "FOO"],
        &["BITCOUNT", "k", "-100", "100"],
        &["BITCOUNT", "k", "3", "1"],
        &["BITCOUNT", "k", "0", "-100"],
        &["BITCOUNT", "k", "10", "20"],
        &["BITCOUNT", "k", "0", "1000", "BIT"],
        &["BITCOUNT", "k", "47", "47", "BIT"],
        &["BITCOUNT", "k", "0"],
        &["BITCOUNT", "k", "0", "1", "BIT", "x"],
        &["BITCOUNT", "k", "a", "1"],
        &["BITCOUNT", "k", "0", "a"],
        &["BITCOUNT", "k", "0", "1", "FOO"],
        &["BITCOUNT", "nokey"],
        &["BITCOUNT", "nokey", "0"],
        &["BITCOUNT", "nokey", "a", "b"],
        &["BITCOUNT"],
        &["SET", "e", ""],
        &["BITCOUNT", "e"],
        &["BITCOUNT", "e", "0", "-1", "BIT"],
        &["SET", "n", "12345"],
        &["BITCOUNT", "n"],
    ],
    // BITPOS
    &[
        &["SET", "k", "\u{0}\u{7f}\u{ff}\u{f0}"],
        &["BITPOS", "k", "1"],
        &["BITPOS", "k", "0"],
        &["BITPOS", "k", "1", "2"],
        &["BITPOS", "k", "0", "2"],
        &["BITPOS", "k", "0", "2", "-1"],
        &["BITPOS", "k", "0", "2", "2"],
        &["BITPOS", "k", "0", "3", "3"],
        &["BITPOS", "k", "0", "2", "-1", "BYTE"],
        &["BITPOS", "k", "1", "7", "15", "BIT"],
        &["BITPOS", "k", "1", "0", "8", "BIT"],
        &["BITPOS", "k", "0", "9", "15", "BIT"],
        &["BITPOS", "k", "0", "16", "23", "BIT"],
        &["BITPOS", "k", "0", "16", "27", "BIT"],
        &["BITPOS", "k", "0", "-4", "-1", "BIT"],
        &["BITPOS", "k", "1", "-100", "-90", "BIT"],
        &["BITPOS", "k", "1", "5", "2"],
        &["BITPOS", "k", "0", "100"],
        &["BITPOS", "k", "1", "100"],
        &["BITPOS", "k", "2"],
        &["BITPOS", "k", "-1"],
        &["BITPOS", "k", "x"],
        &["BITPOS", "k", "1", "x"],
        &["BITPOS", "k", "1", "0", "x"],
        &["BITPOS", "k", "1", "0", "1", "FOO"],
        &["BITPOS", "k", "1", "x", "1", "FOO"],
        &["BITPOS", "k", "1", "0", "x", "FOO"],
        &["BITPOS", "k", "1", "0", "1", "BIT", "x"],
        &["BITPOS", "nokey", "0"],
        &["BITPOS", "nokey", "1"],
        &["BITPOS", "nokey", "1", "x", "y", "z", "w"],
        &["BITPOS", "nokey", "2"],
        &["SET", "ones", "\u{ff}\u{ff}"],
        &["BITPOS", "ones", "0"],
        &["BITPOS", "ones", "0", "0"],
        &["BITPOS", "ones", "0", "0", "-1"],
        &["BITPOS", "ones", "0", "0", "-1", "BIT"],
        &["BITPOS", "ones", "0", "3", "-1", "BIT"],
        &["SET", "e", ""],
        &["BITPOS", "e", "0"],
        &["BITPOS", "e", "1"],
        &["BITPOS", "e", "0", "0", "-1", "BIT"],
    ],
    // BITOP
    &[
        &["SET", "a", "abc"],
        &["SET", "b", "x"],
        &["BITOP", "AND", "d", "a", "b"],
        &["GET", "d"],
        &["BITOP", "or", "d", "a", "b", "nokey"],
        &["GET", "d"],
        &["BITOP", "XOR", "d", "a", "b"],
        &["GET", "d"],
        &["BITOP", "NOT", "d", "a"],
        &["GET", "d"],
        &["BITOP", "NOT", "d", "a", "b"],
        &["BITOP", "NAND", "d", "a"],
        &["BITOP", "AND", "d"],
        &["BITOP", "AND", "d", "a", "nokey"],
        &["GET", "d"],
        &["SET", "d", "v", "EX", "100"],
        &["BITOP", "AND", "d", "nokey", "nokey2"],
        &["EXISTS", "d"],
        &["SET", "d", "v", "EX", "100"],
        &["BITOP", "OR", "d", "a"],
        &["TTL", "d"],
        &["BITOP", "OR", "a", "a", "b"],
        &["GET", "a"],
        &["SET", "e", ""],
        &["BITOP", "NOT", "d", "e"],
        &["EXISTS", "d"],
    ],
    // BITFIELD
    &[
        &["BITFIELD", "bf", "SET", "i8", "0", "100", "GET", "i8", "0"],
        &["BITFIELD", "bf", "INCRBY", "i8", "0", "100"],
        &[
            "BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i8", "0", "100",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "i8", "0", "1",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "WRAP", "INCRBY", "u2", "100", "1", "INCRBY", "u2",
            "100", "3",
        ],
        &[
            "BITFIELD", "bf", "GET", "u4", "0", "GET", "i4", "4", "GET", "u63", "0", "GET", "i64",
            "0",
        ],
        &[
            "BITFIELD", "bf", "SET", "u8", "#1", "255", "GET", "u8", "#1", "GET", "i16", "#0",
        ],
        &[
            "BITFIELD",
            "bf",
            "SET",
            "i64",
            "3",
            "-9223372036854775808",
            "GET",
            "i64",
            "3",
        ],
        &["BITFIELD", "bf", "INCRBY", "i64", "3", "-1"],
        &[
            "BITFIELD",
            "bf",
            "OVERFLOW",
            "SAT",
            "INCRBY",
            "i64",
            "3",
            "-1",
            "INCRBY",
            "i64",
            "3",
            "9223372036854775807",
        ],
        &[
            "BITFIELD",
            "bf",
            "SET",
            "u63",
            "1",
            "9223372036854775807",
            "INCRBY",
            "u63",
            "1",
            "1",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "SAT", "SET", "u8", "0", "-1", "SET", "i8", "0", "200",
            "SET", "i8", "0", "-200",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "FAIL", "SET", "u8", "0", "256", "SET", "u8", "0", "255",
            "SET", "i4", "0", "8",
        ],
        &[
            "BITFIELD", "bf", "OVERFLOW", "WRAP", "SET", "u8", "0", "257", "SET", "i4", "0", "9",
            "INCRBY", "u1", "0", "-1",
        ],
        &["GET", "bf"],
        &[
            "BITFIELD", "new", "OVERFLOW", "FAIL", "INCRBY", "u8", "40", "300",
        ],
        &["GET", "new"],
        &["BITFIELD", "none", "GET", "u8", "0"],
        &["EXISTS", "none"],
        &["BITFIELD", "none"],
        &["BITFIELD", "bf", "GET", "u64", "0"],
        &["BITFIELD", "bf", "GET", "i65", "0"],
        &["BITFIELD", "bf", "GET", "i0", "0"],
        &["BITFIELD", "bf", "GET", "x8", "0"],
        &["BITFIELD", "bf", "GET", "I8", "0"],
        &["BITFIELD", "bf", "GET", "u8", "-1"],
        &["BITFIELD", "bf", "GET", "u8", "#-1"],
        &["BITFIELD", "bf", "GET", "u8", "4294967296"],
        &["BITFIELD", "bf", "GET", "u8", "#536870912"],
        &["BITFIELD", "bf", "GET", "u8"],
        &["BITFIELD", "bf", "SET", "u8", "0"],
        &["BITFIELD", "bf", "SET", "u8", "0", "x"],
        &["BITFIELD", "bf", "INCRBY", "u8", "0", "1.5"],
        &["BITFIELD", "bf", "OVERFLOW", "FOO", "GET", "u8", "0"],
        &["BITFIELD", "bf", "OVERFLOW"],
        &["BITFIELD", "bf", "FOO", "u8", "0"],
        &["BITFIELD", "bf", "GET", "u8", "0", "FOO"],
        &["BITFIELD", "bf", "GET", "u8", "0", "SET", "x", "0", "1"],
        &["BITFIELD_RO", "bf", "GET", "u8", "0", "GET", "i5", "#3"],
        &["BITFIELD_RO", "bf", "SET", "u8", "0", "1"],
        &[
            "BITFIELD_RO",
            "bf",
            "INCRBY",
            "u8",
            "0",
            "1",
            "GET",
            "x",
            "0",
        ],
        &["BITFIELD_RO", "nokey", "GET", "u8", "0"],
        &["BITFIELD_RO", "bf"],
        &["BITFIELD_RO"],
        &["SET", "t", "abc", "EX", "100"],
        &["BITFIELD", "t", "SET", "u8", "0", "65"],
        &["TTL", "t"],
    ],
    // LCS
    &[
        &["MSET", "a", "ohmytext", "b", "mynewtext"],
        &["LCS", "a", "b"],
        &["LCS", "a", "b", "LEN"],
        &["LCS", "a", "b", "IDX"],
        &["LCS", "a", "b", "IDX", "WITHMATCHLEN"],
        &["LCS", "a", "b", "IDX", "MINMATCHLEN", "4"],
        &["LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
        &["LCS", "a", "b", "idx", "minmatchlen", "-5", "withmatchlen"],
        &["LCS", "a", "b", "LEN", "IDX"],
        &["LCS", "a", "b", "MINMATCHLEN"],
        &["LCS", "a", "b", "MINMATCHLEN", "x"],
        &["LCS", "a", "b", "FOO"],
        &["LCS", "a", "b", "LEN", "WITHMATCHLEN"],
        &["LCS", "a", "nokey"],
        &["LCS", "a", "nokey", "IDX"],
        &["LCS", "nokey", "nokey2", "LEN"],
        &["LCS", "a"],
        &["MSET", "x", "aaaabbbbccccaaaa", "y", "abcabcaabbccaa"],
        &["LCS", "x", "y"],
        &["LCS", "x", "y", "IDX", "WITHMATCHLEN"],
        &["LCS", "y", "x", "IDX", "WITHMATCHLEN"],
        &[
            "MSET",
            "p",
            "GTCGTTCGGAATGCCGTTGCTCTGTAAA",
            "q",
            "ACCGGTCGAGTGCGCGGAAGCCGGCCGAA",
        ],
        &["LCS", "p", "q"],
        &["LCS", "p", "q", "IDX", "MINMATCHLEN", "2", "WITHMATCHLEN"],
        &["CONFIG", "SET", "proto-max-bulk-len", "1mb"],
        &["SETRANGE", "big", "600", "x"],
        &["SETRANGE", "big2", "600", "y"],
        &["LCS", "big", "big2", "LEN"],
        &["CONFIG", "SET", "proto-max-bulk-len", "512mb"],
    ],
    // HyperLogLog
    &[
        &["PFADD", "h"],
        &["GET", "h"],
        &["PFADD", "h"],
        &["PFADD", "h", "a", "b", "c"],
        &["GET", "h"],
        &["PFADD", "h", "a"],
        &["PFCOUNT", "h"],
        &["GET", "h"],
        &["PFADD", "h", "d"],
        &["GET", "h"],
        &["PFCOUNT", "h", "nokey"],
        &["PFCOUNT", "nokey"],
        &["PFCOUNT", "nokey", "nokey2"],
        &["PFADD", "h2", "x", "y", "a"],
        &["PFCOUNT", "h", "h2"],
        &["PFMERGE", "m", "h", "h2"],
        &["GET", "m"],
        &["PFCOUNT", "m"],
        &["PFMERGE", "m"],
        &["PFMERGE", "h2", "h"],
        &["GET", "h2"],
        &["PFMERGE", "new"],
        &["GET", "new"],
        &["SET", "s", "hello"],
        &["PFADD", "s", "a"],
        &["PFCOUNT", "s"],
        &["PFCOUNT", "h", "s"],
        &["PFMERGE", "s", "h"],
        &["PFMERGE", "h", "s"],
        &["SET", "n", "12345678901234567"],
        &["PFADD", "n", "a"],
        &[
            "SET",
            "fake",
            "HYLL\u{1}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{80}\u{0}",
        ],
        &["PFCOUNT", "fake"],
        &["PFADD", "fake", "a", "b"],
        &[
            "SET",
            "fake2",
            "HYLL\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}",
        ],
        &["PFCOUNT", "fake2"],
        &[
            "SET",
            "fake3",
            "HYLL\u{2}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{7f}\u{ff}",
        ],
        &["PFADD", "fake3", "a"],
        &["PFADD"],
        &["PFCOUNT"],
        &["PFMERGE"],
    ],
    // CONFIG
    &[
        &["CONFIG", "SET", "maxmemory-policy", "foo"],
        &["CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LFU"],
        &["CONFIG", "GET", "maxmemory-policy"],
        &["CONFIG", "GET", "MAXMEMORY-POLICY"],
        &[
            "CONFIG",
            "SET",
            "maxmemory-policy",
            "volatile-ttl",
            "maxmemory-samples",
            "10",
        ],
        &["CONFIG", "GET", "maxmemory-samples"],
        &["CONFIG", "SET", "maxmemory-samples", "0"],
        &["CONFIG", "SET", "maxmemory-samples", "65"],
        &["CONFIG", "SET", "maxmemory-samples", "2147483648"],
        &["CONFIG", "SET", "maxmemory-samples", "x"],
        &[
            "CONFIG",
            "SET",
            "maxmemory-samples",
            "5",
            "maxmemory-samples",
            "6",
        ],
        &["CONFIG", "SET", "maxmemory-samples", "5", "nosuch", "6"],
        &["CONFIG", "SET", "maxmemory-samples", "x", "nosuch", "6"],
        &["CONFIG", "SET", "NoSuch", "6"],
        &["CONFIG", "SET", "databases", "4"],
        &["CONFIG", "SET", "maxmemory", "-1"],
        &["CONFIG", "SET", "maxmemory", "1gb"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["CONFIG", "SET", "proto-max-bulk-len", "1000"],
        &["CONFIG", "SET", "proto-max-bulk-len", "2mb"],
        &["CONFIG", "GET", "proto-max-bulk-len"],
        &["SETBIT", "b", "16777216", "1"],
        &["SETBIT", "b", "16777215", "1"],
        &["BITFIELD", "b", "GET", "u8", "#2097152"],
        &["STRLEN", "b"],
        &["SETRANGE", "s", "2097151", "x"],
        &["SETRANGE", "s", "2097152", "x"],
        &["APPEND", "s", "y"],
        &["CONFIG", "SET", "proto-max-bulk-len", "536870912"],
        &["CONFIG", "SET", "hll-sparse-max-bytes", "x"],
        &["CONFIG", "SET", "hll-sparse-max-bytes", "3kb"],
        &["CONFIG", "GET", "hll-sparse-max-bytes"],
        &["CONFIG", "SET", "hll-sparse-max-bytes", "3000"],
        &["CONFIG", "SET", "hash-max-ziplist-entries", "256"],
        &["CONFIG", "GET", "hash-max-listpack-entries"],
        &["CONFIG", "GET", "hash-max-ziplist-entries"],
        &["CONFIG", "SET", "hash-max-listpack-entries", "128"],
        &["CONFIG", "SET", "hash-max-listpack-value", "1k"],
        &["CONFIG", "GET", "hash-max-listpack-value"],
        &["CONFIG", "SET", "hash-max-listpack-value", "64"],
        &["CONFIG", "SET", "zset-max-listpack-entries", "-1"],
        &["CONFIG", "GET", "zset-max-ziplist-value"],
        &["CONFIG", "SET", "list-max-listpack-size", "-3"],
        &["CONFIG", "GET", "list-max-ziplist-size"],
        &["CONFIG", "SET", "list-max-listpack-size", "-2"],
        &["CONFIG", "GET", "set-max-intset-entries"],
        &["CONFIG", "SET", "set-max-intset-entries", "x"],
        &["CONFIG", "SET", "timeout", "-1"],
        &["CONFIG", "SET", "timeout", "0"],
        &["CONFIG", "SET", "appendonly", "maybe"],
        &["CONFIG", "SET", "appendonly", "no"],
        &["CONFIG", "SET", "save", "x"],
        &["CONFIG", "SET", "save", "100 1 x"],
        &["CONFIG", "SET", "save", ""],
        &["CONFIG", "GET", "save"],
        &["CONFIG", "SET", "lfu-log-factor", "-1"],
        &["CONFIG", "SET", "lfu-decay-time", "x"],
        &["CONFIG", "GET", "lfu-log-factor"],
        &["CONFIG", "SET", "maxmemory"],
        &["CONFIG", "SET", "maxmemory", "1", "x"],
        &["CONFIG", "FOO"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    ],
    // LFU: OBJECT FREQ needs an LFU policy.
    &[
        &["SET", "k", "v"],
        &["OBJECT", "FREQ", "k"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        &["SET", "k2", "v"],
        &["OBJECT", "FREQ", "k2"],
        &["OBJECT", "FREQ", "nokey"],
        &["OBJECT", "IDLETIME", "k2"],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    ],
];

/// The policy both servers are reset to before each case (the node's own
/// default is allkeys-lru, Redis's noeviction).
const RESET: &[&[&str]] = &[
    &["FLUSHALL"],
    &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
];

/// A node in this process and a redis-server, both listening.
async fn pair() -> Option<(u16, common::Proc, tokio::sync::oneshot::Sender<()>)> {
    if !common::have_tool("redis-server") {
        return None;
    }
    let redis = common::start_redis(common::free_port());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node_port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(listener, NodeConfig::default(), async {
        let _ = stopped.await;
    }));
    Some((node_port, redis, stop))
}

fn shown(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn compare_cases(proto: &str) -> Vec<String> {
    let Some((node_port, redis, _stop)) = pair().await else {
        return Vec::new();
    };
    let mut mismatches = Vec::new();
    for case in CASES {
        let (mut ours, mut theirs) = (Conn::open(node_port).await, Conn::open(redis.port).await);
        for c in [&mut ours, &mut theirs] {
            c.call(&["HELLO", proto]).await;
            for r in RESET {
                c.call(r).await;
            }
        }
        for args in *case {
            let (a, b) = (ours.call(args).await, theirs.call(args).await);
            if a != b {
                mismatches.push(format!(
                    "RESP{proto} {args:?}\n  node:  {:?}\n  redis: {:?}",
                    shown(&a),
                    shown(&b)
                ));
            }
        }
    }
    mismatches
}

#[tokio::test]
async fn string_family_replies_match_redis_server_in_resp2_and_resp3() {
    let mut all = compare_cases("2").await;
    all.extend(compare_cases("3").await);
    assert!(
        all.is_empty(),
        "{} replies differ:\n{}",
        all.len(),
        all.join("\n")
    );
}

/// PFADD in batches of `batch` elements named `{prefix}{i}`, over `range`.
async fn pfadd_range(c: &mut Conn, key: &str, prefix: &str, range: std::ops::Range<u64>) {
    let mut i = range.start;
    while i < range.end {
        let end = (i + 1000).min(range.end);
        let mut args = vec!["PFADD".to_string(), key.to_string()];
        args.extend((i..end).map(|n| format!("{prefix}{n}")));
        c.call(&args).await;
        i = end;
    }
}

/// The same inserts give the same bytes (sparse, then dense after the
/// promotion) and the same PFCOUNT, single and union, and PFMERGE of a
/// sparse and a dense HLL agrees too, also with a small
/// `hll-sparse-max-bytes`.
#[tokio::test]
async fn hyperloglog_values_and_counts_are_byte_equal_to_redis() {
    let Some((node_port, redis, _stop)) = pair().await else {
        return;
    };
    let (mut ours, mut theirs) = (Conn::open(node_port).await, Conn::open(redis.port).await);
    let mut mismatches = Vec::new();
    let mut same = |what: String, a: Vec<u8>, b: Vec<u8>| {
        if a != b {
            mismatches.push(format!(
                "{what}: node {} bytes, redis {} bytes",
                a.len(),
                b.len()
            ));
        }
    };
    let checkpoints = [1u64, 10, 100, 300, 600, 1000, 2000, 5000, 20_000, 100_000];
    let mut done = 0;
    for &n in &checkpoints {
        for c in [&mut ours, &mut theirs] {
            pfadd_range(c, "h", "el:", done..n).await;
        }
        done = n;
        let get = ["GET", "h"];
        same(
            format!("GET after {n}"),
            ours.call(&get).await,
            theirs.call(&get).await,
        );
        let count = ["PFCOUNT", "h"];
        same(
            format!("PFCOUNT after {n}"),
            ours.call(&count).await,
            theirs.call(&count).await,
        );
        same(
            format!("GET after PFCOUNT {n}"),
            ours.call(&get).await,
            theirs.call(&get).await,
        );
    }
    for c in [&mut ours, &mut theirs] {
        c.call(&["CONFIG", "SET", "hll-sparse-max-bytes", "200"])
            .await;
        pfadd_range(c, "small", "x", 0..150).await;
        pfadd_range(c, "sparse", "y", 0..50).await;
    }
    for args in [
        &["GET", "small"][..],
        &["GET", "sparse"],
        &["PFCOUNT", "h", "small", "sparse", "nokey"],
        &["PFMERGE", "m1", "sparse", "small"],
        &["GET", "m1"],
        &["PFMERGE", "m2", "sparse"],
        &["GET", "m2"],
        &["PFMERGE", "sparse", "h"],
        &["GET", "sparse"],
        &["PFCOUNT", "sparse"],
        &["CONFIG", "SET", "hll-sparse-max-bytes", "3000"],
    ] {
        same(
            format!("{args:?}"),
            ours.call(args).await,
            theirs.call(args).await,
        );
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// PFCOUNT stays within Redis's documented standard error (1.04/sqrt(16384)
/// = 0.81%) from 10^5 to 10^6 distinct elements: every checkpoint within
/// three standard errors, and the mean absolute error within two.
#[tokio::test]
async fn hyperloglog_error_stays_within_the_standard_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(run(listener, NodeConfig::default(), async {
        let _ = stopped.await;
    }));
    let mut c = Conn::open(port).await;
    let sigma = 1.04 / (16384f64).sqrt();
    let mut errors = Vec::new();
    let mut done = 0;
    for n in (1..=10u64).map(|k| k * 100_000) {
        pfadd_range(&mut c, "h", "acc:", done..n).await;
        done = n;
        let reply = c.call(&["PFCOUNT", "h"]).await;
        let est: f64 = String::from_utf8_lossy(&reply[1..reply.len() - 2])
            .parse()
            .unwrap();
        let err = (est - n as f64) / n as f64;
        assert!(
            err.abs() < 3.0 * sigma,
            "n={n} estimate={est} error={err:.4}"
        );
        eprintln!("n={n} estimate={est} error={err:+.5}");
        errors.push(err.abs());
    }
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    assert!(
        mean < 2.0 * sigma,
        "mean absolute error {mean:.4} (sigma {sigma:.4})"
    );
}

/// One random bitmap command over three small keys.
fn bit_command() -> impl Strategy<Value = Vec<String>> {
    let key = prop::sample::select(vec!["a", "b", "c"]);
    // Short keys (mostly under 8 bytes) so ranges often fall entirely in
    // set or clear bits, and values that set whole fields to ones.
    let off = prop_oneof![3 => 0u64..64, 1 => 0u64..200];
    let idx = -12i64..12;
    let val = prop_oneof![
        prop::sample::select(vec![-1i64, 0, 1, 255, i64::MAX, i64::MIN]),
        -300i64..300,
        any::<i64>()
    ];
    let unit = prop::sample::select(vec!["", "BYTE", "BIT"]);
    let ty = prop_oneof![
        (1u32..=64).prop_map(|b| format!("i{b}")),
        (1u32..=63).prop_map(|b| format!("u{b}"))
    ];
    let ow = prop::sample::select(vec!["WRAP", "SAT", "FAIL"]);
    let op = prop::sample::select(vec!["AND", "OR", "XOR", "NOT"]);
    prop_oneof![
        (
            key.clone(),
            off.clone(),
            prop_oneof![1 => Just(0u8), 3 => Just(1u8)]
        )
            .prop_map(|(k, o, v)| vec![
                "SETBIT".into(),
                k.into(),
                o.to_string(),
                v.to_string()
            ]),
        (key.clone(), off.clone()).prop_map(|(k, o)| vec![
            "GETBIT".into(),
            k.into(),
            o.to_string()
        ]),
        (key.clone(), idx.clone(), idx.clone(), unit.clone()).prop_map(|(k, s, e, u)| {
            let mut v = vec!["BITCOUNT".into(), k.into(), s.to_string(), e.to_string()];
            if !u.is_empty() {
                v.push(u.into());
            }
            v
        }),
        (
            key.clone(),
            0u8..2,
            prop::option::of((idx.clone(), prop::option::of((idx, unit))))
        )
            .prop_map(|(k, b, range)| {
                let mut v = vec!["BITPOS".into(), k.into(), b.to_string()];
                if let Some((s, end)) = range {
                    v.push(s.to_string());
                    if let Some((e, u)) = end {
                        v.push(e.to_string());
                        if !u.is_empty() {
                            v.push(u.into());
                        }
                    }
                }
                v
            }),
        (op, key.clone(), prop::collection::vec(key.clone(), 1..4)).prop_map(|(op, d, srcs)| {
            let srcs = if op == "NOT" {
                srcs[..1].to_vec()
            } else {
                srcs
            };
            let mut v = vec!["BITOP".into(), op.into(), d.into()];
            v.extend(srcs.into_iter().map(String::from));
            v
        }),
        (
            key,
            prop::collection::vec((ow, ty, off, val, 0u8..3, any::<bool>()), 1..4)
        )
            .prop_map(|(k, ops)| {
                let mut v = vec!["BITFIELD".into(), k.into()];
                for (ow, ty, o, val, kind, hash) in ops {
                    let bits: u64 = ty[1..].parse().unwrap();
                    let o = if hash {
                        format!("#{}", o / bits.max(1))
                    } else {
                        o.to_string()
                    };
                    v.extend(["OVERFLOW".into(), ow.to_string()]);
                    match kind {
                        0 => v.extend(["GET".into(), ty, o]),
                        1 => v.extend(["SET".into(), ty, o, val.to_string()]),
                        _ => v.extend(["INCRBY".into(), ty, o, val.to_string()]),
                    }
                }
                v
            }),
    ]
}

/// Random sequences of SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP and BITFIELD
/// give identical replies and identical values on the node and on
/// redis-server (bounded: 48 sequences of up to 40 commands).
#[test]
fn random_bitmap_sequences_match_redis_server() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let Some((node_port, redis, _stop)) = rt.block_on(pair()) else {
        return;
    };
    // The runner takes a `Fn`; the connections are borrowed one case at a time.
    let conns = std::cell::RefCell::new(
        rt.block_on(async { (Conn::open(node_port).await, Conn::open(redis.port).await) }),
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let ran = std::cell::Cell::new(0usize);
    let result = runner.run(&prop::collection::vec(bit_command(), 1..40), |cmds| {
        let mut guard = conns.borrow_mut();
        let (ours, theirs) = &mut *guard;
        let diff = rt.block_on(async {
            ours.call(&["FLUSHALL"]).await;
            theirs.call(&["FLUSHALL"]).await;
            let finals = ["a", "b", "c"].map(|k| vec!["GET".to_string(), k.to_string()]);
            for args in cmds.iter().chain(finals.iter()) {
                let (a, b) = (ours.call(args).await, theirs.call(args).await);
                if a != b {
                    return Some(format!(
                        "{args:?}: node {:?} redis {:?}",
                        shown(&a),
                        shown(&b)
                    ));
                }
            }
            None
        });
        prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
        ran.set(ran.get() + cmds.len());
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(ran.get() >= 48, "only {} commands ran", ran.get());
}

/// After `CONFIG SET proto-max-bulk-len 1mb`, a larger argument is a
/// protocol error on both servers, with the same reply, and the same
/// argument fits again once the limit is raised.
#[tokio::test]
async fn proto_max_bulk_len_bounds_requests_like_redis() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Some((node_port, redis, _stop)) = pair().await else {
        return;
    };
    let big = vec![b'v'; 1536 * 1024];
    let mut replies = Vec::new();
    for port in [node_port, redis.port] {
        let mut c = Conn::open(port).await;
        c.call(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"])
            .await;
        let mut sock = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let mut req = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", big.len()).into_bytes();
        req.extend_from_slice(&big);
        req.extend_from_slice(b"\r\n");
        // The server may close before reading everything: ignore write errors.
        let _ = sock.write_all(&req).await;
        let mut got = Vec::new();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            sock.read_to_end(&mut got),
        )
        .await
        .expect("the connection is closed after the error");
        replies.push(got);
        c.call(&["CONFIG", "SET", "proto-max-bulk-len", "512mb"])
            .await;
        let ok = c.call(&[&b"SET"[..], b"k", &big]).await;
        assert_eq!(ok, b"+OK\r\n");
    }
    assert_eq!(shown(&replies[0]), shown(&replies[1]));
    assert!(
        replies[0].starts_with(b"-ERR Protocol error"),
        "{}",
        shown(&replies[0])
    );
}
