//! The built-in node and a real redis-server, side by side, for the rest of
//! the string family: bitmaps, BITFIELD, LCS, HyperLogLog and CONFIG. Every
//! reply must be byte-for-byte the same, under RESP2 and RESP3, errors
//! included; HLL values must be the same bytes (GET). A property test runs
//! random bitmap sequences on both. Skips with a printed reason when
//! `redis-server` is not on PATH, unless `SHARDIS_REQUIRE_REDIS=1`.

#[path = "node_vs_redis_strings/cases.rs"]
mod cases;
mod common;
#[path = "node_vs_redis_strings/props.rs"]
mod props;

use cases::CASES;
use common::compare::pair;
use common::Raw;
use proptest::prelude::*;

/// Binary-safe calls with any argument type, returning the raw reply.
trait Call {
    fn any<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8>;
}

impl Call for Raw {
    fn any<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
        self.call_bytes(&args)
    }
}

/// The policy both servers are reset to before each case (the node's own
/// default is allkeys-lru, Redis's noeviction).
const RESET: &[&[&str]] = &[
    &["FLUSHALL"],
    &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
];

fn shown(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn compare_cases(proto: &str) -> Vec<String> {
    let Some((node, redis)) = pair() else {
        return Vec::new();
    };
    let mut mismatches = Vec::new();
    for case in CASES {
        let (mut ours, mut theirs) = (Raw::connect(node.port), Raw::connect(redis.port));
        for c in [&mut ours, &mut theirs] {
            c.any(&["HELLO", proto]);
            for r in RESET {
                c.any(r);
            }
        }
        for args in *case {
            let (a, b) = (ours.any(args), theirs.any(args));
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

#[test]
fn string_family_replies_match_redis_server_in_resp2_and_resp3() {
    let mut all = compare_cases("2");
    all.extend(compare_cases("3"));
    assert!(
        all.is_empty(),
        "{} replies differ:\n{}",
        all.len(),
        all.join("\n")
    );
}

/// PFADD in batches of `batch` elements named `{prefix}{i}`, over `range`.
fn pfadd_range(c: &mut Raw, key: &str, prefix: &str, range: std::ops::Range<u64>) {
    let mut i = range.start;
    while i < range.end {
        let end = (i + 1000).min(range.end);
        let mut args = vec!["PFADD".to_string(), key.to_string()];
        args.extend((i..end).map(|n| format!("{prefix}{n}")));
        c.any(&args);
        i = end;
    }
}

/// The same inserts give the same bytes (sparse, then dense after the
/// promotion) and the same PFCOUNT, single and union, and PFMERGE of a
/// sparse and a dense HLL agrees too, also with a small
/// `hll-sparse-max-bytes`.
#[test]
fn hyperloglog_values_and_counts_are_byte_equal_to_redis() {
    let Some((node, redis)) = pair() else {
        return;
    };
    let (mut ours, mut theirs) = (Raw::connect(node.port), Raw::connect(redis.port));
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
            pfadd_range(c, "h", "el:", done..n);
        }
        done = n;
        let get = ["GET", "h"];
        same(format!("GET after {n}"), ours.any(&get), theirs.any(&get));
        let count = ["PFCOUNT", "h"];
        same(
            format!("PFCOUNT after {n}"),
            ours.any(&count),
            theirs.any(&count),
        );
        same(
            format!("GET after PFCOUNT {n}"),
            ours.any(&get),
            theirs.any(&get),
        );
    }
    for c in [&mut ours, &mut theirs] {
        c.any(&["CONFIG", "SET", "hll-sparse-max-bytes", "200"]);
        pfadd_range(c, "small", "x", 0..150);
        pfadd_range(c, "sparse", "y", 0..50);
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
        same(format!("{args:?}"), ours.any(args), theirs.any(args));
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// PFCOUNT stays within Redis's documented standard error (1.04/sqrt(16384)
/// = 0.81%) from 10^5 to 10^6 distinct elements: every checkpoint within
/// three standard errors, and the mean absolute error within two.
#[test]
fn hyperloglog_error_stays_within_the_standard_error() {
    let node = common::start_node(common::free_port());
    let port = node.port;
    let mut c = Raw::connect(port);
    let sigma = 1.04 / (16384f64).sqrt();
    let mut errors = Vec::new();
    let mut done = 0;
    for n in (1..=10u64).map(|k| k * 100_000) {
        pfadd_range(&mut c, "h", "acc:", done..n);
        done = n;
        let reply = c.any(&["PFCOUNT", "h"]);
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

/// Random sequences of SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP and BITFIELD
/// give identical replies and identical values on the node and on
/// redis-server (bounded: 48 sequences of up to 40 commands).
#[test]
fn random_bitmap_sequences_match_redis_server() {
    let Some((node, redis)) = pair() else {
        return;
    };
    // The runner takes a `Fn`; the connections are borrowed one case at a time.
    let conns = std::cell::RefCell::new((Raw::connect(node.port), Raw::connect(redis.port)));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let ran = std::cell::Cell::new(0usize);
    let result = runner.run(
        &prop::collection::vec(props::bit_command(), 1..40),
        |cmds| {
            let mut guard = conns.borrow_mut();
            let (ours, theirs) = &mut *guard;
            let diff = (|| {
                ours.any(&["FLUSHALL"]);
                theirs.any(&["FLUSHALL"]);
                let finals = ["a", "b", "c"].map(|k| vec!["GET".to_string(), k.to_string()]);
                for args in cmds.iter().chain(finals.iter()) {
                    let (a, b) = (ours.any(args), theirs.any(args));
                    if a != b {
                        return Some(format!(
                            "{args:?}: node {:?} redis {:?}",
                            shown(&a),
                            shown(&b)
                        ));
                    }
                }
                None
            })();
            prop_assert!(diff.is_none(), "{}", diff.unwrap_or_default());
            ran.set(ran.get() + cmds.len());
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(ran.get() >= 48, "only {} commands ran", ran.get());
}

/// After `CONFIG SET proto-max-bulk-len 1mb`, a larger argument is a
/// protocol error on both servers, with the same reply, and the same
/// argument fits again once the limit is raised.
#[test]
fn proto_max_bulk_len_bounds_requests_like_redis() {
    use std::io::Write;
    let Some((node, redis)) = pair() else {
        return;
    };
    let big = vec![b'v'; 1536 * 1024];
    let mut replies = Vec::new();
    for port in [node.port, redis.port] {
        let mut c = Raw::connect(port);
        c.any(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
        let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut req = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", big.len()).into_bytes();
        req.extend_from_slice(&big);
        req.extend_from_slice(b"\r\n");
        // The server may close before reading everything: ignore write errors.
        let _ = sock.write_all(&req);
        replies.push(common::read_to_close(&mut sock));
        c.any(&["CONFIG", "SET", "proto-max-bulk-len", "512mb"]);
        let ok = c.any(&[&b"SET"[..], b"k", &big]);
        assert_eq!(ok, b"+OK\r\n");
    }
    assert_eq!(shown(&replies[0]), shown(&replies[1]));
    assert!(
        replies[0].starts_with(b"-ERR Protocol error"),
        "{}",
        shown(&replies[0])
    );
}

/// INFO's `rdb_changes_since_last_save` grows as Redis's does across
/// SETBIT and BITFIELD: only a write that created, grew or changed the
/// string counts (Redis's own bitops test), and a refused write does not.
#[test]
fn setbit_and_bitfield_count_a_change_only_when_they_make_one_as_redis() {
    let Some((node, redis)) = pair() else {
        return;
    };
    let steps: &[&[&str]] = &[
        &["SETBIT", "foo", "0", "0"],
        &["BITFIELD", "foo2", "SET", "i5", "0", "0"],
        &["SETBIT", "foo", "0", "0"],
        &["BITFIELD", "foo2", "SET", "i5", "0", "0"],
        &["SETBIT", "foo", "0", "1"],
        &["SETBIT", "foo", "0", "1"],
        &["SETBIT", "foo", "0", "0"],
        &["BITFIELD", "foo2", "SET", "i5", "0", "1"],
        &["BITFIELD", "foo2", "SET", "i5", "0", "1"],
        &["BITFIELD", "foo2", "GET", "i5", "0"],
        &["BITFIELD", "foo3", "INCRBY", "i5", "0", "1"],
        &["BITFIELD", "foo3", "INCRBY", "i5", "0", "1"],
        &["SETBIT", "foo", "90", "0"],
        &["BITFIELD", "foo2", "SET", "i5", "90", "0"],
        &["SET", "s", "v"],
        &["INCR", "n"],
        &["SETBIT", "s", "7", "0"],
        &["LPUSH", "s", "x"],
    ];
    let deltas = |port: u16| {
        let mut c = Raw::connect(port);
        c.call(&["FLUSHALL"]);
        let mut last = c.info_field("persistence", "rdb_changes_since_last_save");
        steps
            .iter()
            .map(|s| {
                c.call(s);
                let now = c.info_field("persistence", "rdb_changes_since_last_save");
                let d = now - last;
                last = now;
                format!("{s:?} +{d}")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(deltas(node.port), deltas(redis.port));
}
