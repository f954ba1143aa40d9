//! The built-in node and a real redis-server, side by side, for the stream
//! commands: every reply byte for byte the same under RESP2 and RESP3,
//! errors included (replies holding times compared with their integers
//! masked, see `cases.rs`); random streams whose node layout (what
//! `MAXLEN ~` / `MINID ~` trim and XINFO's `radix-tree-*` report) must be
//! Redis's; and XREAD / XREADGROUP BLOCK woken by another client. Skips
//! with a printed reason when `redis-server` is not on PATH, unless
//! `SHARDIS_REQUIRE_REDIS=1`.

#[path = "node_vs_redis_streams/cases.rs"]
mod cases;
mod common;
#[path = "node_vs_redis_geo/random.rs"]
#[allow(dead_code)]
mod random;

use common::compare::{pair, split, Compare};
use common::Raw;
use random::Rng;
use std::time::Duration;

fn bytes(args: &[String]) -> Vec<&[u8]> {
    args.iter().map(|a| a.as_bytes()).collect()
}

#[test]
fn stream_replies_match_redis_server_in_resp2_and_resp3() {
    let Some((node, redis)) = pair() else {
        return;
    };
    for proto in ["2", "3"] {
        let mut c = Compare::open_empty(node.port, redis.port, proto);
        for case in cases::CASES {
            c.line("", "FLUSHALL");
            for step in *case {
                c.line(&format!("RESP{proto}"), step);
            }
        }
        c.finish(&format!("stream cases, RESP{proto}"));
    }
    node.assert_no_panic();
}

/// A random value: short text, an integer (listpacks store those
/// smaller) or a long run crossing listpack size classes.
fn value(r: &mut Rng) -> String {
    match r.below(6) {
        0 => (r.below(2_000_000_000) as i64 - 1_000_000_000).to_string(),
        1 => "y".repeat([63, 64, 127, 128, 4000][r.below(5)]),
        _ => "x".repeat(1 + r.below(200)),
    }
}

/// Random entries of one to three fields (some sharing the first entry's
/// fields, some not), interleaved with approximate and exact trims, XDELs
/// and XINFO STREAM, so node boundaries, tombstones and trims are compared.
#[test]
fn random_streams_keep_redis_node_layout_and_trims() {
    let Some((node, redis)) = pair() else {
        return;
    };
    let mut c = Compare::open_empty(node.port, redis.port, "2");
    let mut r = Rng::new(11);
    let fields = ["f", "g", "123", "-5"];
    for i in 1..=1500u64 {
        let mut step = format!("XADD s {}-{}", i / 3 + 1, i % 3);
        for _ in 0..1 + r.below(3) {
            step.push_str(&format!(" {} {}", fields[r.below(4)], value(&mut r)));
        }
        c.line("add", &step);
        let ms = i / 3 + 1;
        match r.below(40) {
            0 => c.line("trim", &format!("XTRIM s MAXLEN ~ {}", 10 + r.below(300))),
            1 => c.line(
                "trim",
                &format!("XTRIM s MINID ~ {}", 1 + r.below(ms as usize)),
            ),
            2 => c.line("trim", &format!("XTRIM s MAXLEN = {}", 50 + r.below(300))),
            3 | 4 => {
                let (a, b) = (1 + r.below(ms as usize), r.below(3));
                c.line(
                    "del",
                    &format!("XDEL s {a}-{b} {}-0", 1 + r.below(ms as usize)),
                );
            }
            5 => c.line(
                "limit",
                &format!("XTRIM s MAXLEN ~ 5 LIMIT {}", r.below(150)),
            ),
            _ => {}
        }
        if i % 25 == 0 {
            c.line("info", "XINFO STREAM s");
            c.line("len", "XLEN s");
        }
    }
    c.line("range", "XRANGE s - + COUNT 50");
    c.line("range", "XREVRANGE s + - COUNT 50");
    c.finish("random streams");
    node.assert_no_panic();
}

/// Random consumer-group traffic on one stream (three groups, three
/// consumers): reads new and old entries, acks, claims (with FORCE,
/// RETRYCOUNT, LASTID), XAUTOCLAIM, deletes, trims, SETID with ENTRIESREAD
/// (so lags go negative) and every report on them. Replies holding idle
/// or delivery times are compared with integers masked.
#[test]
fn random_consumer_group_traffic_matches_redis_server() {
    let Some((node, redis)) = pair() else {
        return;
    };
    for (proto, seed) in [("2", 3), ("3", 4)] {
        let mut c = Compare::open_empty(node.port, redis.port, proto);
        let mut r = Rng::new(seed);
        let mut ms = 1;
        for i in 0..1500 {
            let g = r.below(3);
            let who = ["a", "b", "c"][r.below(3)];
            let id = |r: &mut Rng| format!("{}-{}", r.below(ms + 1), r.below(2));
            let step = match r.below(100) {
                0..=29 => {
                    ms += [0, 1, 1, 2][r.below(4)];
                    format!("XADD s {ms}-* f {i}")
                }
                30..=39 => format!(
                    "XGROUP CREATE s g{g} {} MKSTREAM",
                    ["0", "$", "1-0"][r.below(3)]
                ),
                40..=54 => format!(
                    "XREADGROUP GROUP g{g} {who} COUNT {} {} STREAMS s {}",
                    1 + r.below(5),
                    ["", "NOACK"][r.below(2)],
                    [">", ">", ">", "0", "5-0"][r.below(5)]
                ),
                55..=61 => format!("XACK s g{g} {} {} {}", id(&mut r), id(&mut r), id(&mut r)),
                62..=67 => format!("XCLAIM s g{g} {who} 0 {} {} JUSTID", id(&mut r), id(&mut r)),
                68..=71 => {
                    let opt = ["", "FORCE", "RETRYCOUNT 3", "LASTID 9-0"][r.below(4)];
                    format!("~XCLAIM s g{g} {who} 0 {} {} {opt}", id(&mut r), id(&mut r))
                }
                72..=76 => format!(
                    "XAUTOCLAIM s g{g} {who} 0 {} COUNT {} JUSTID",
                    ["0", "(0-0", "3"][r.below(3)],
                    1 + r.below(4)
                ),
                77..=79 => format!("XDEL s {} {}", id(&mut r), id(&mut r)),
                80..=82 => format!(
                    "XTRIM s {}",
                    ["MAXLEN 20", "MINID 9", "MAXLEN ~ 5"][r.below(3)]
                ),
                83..=86 => "XINFO GROUPS s".to_string(),
                87..=89 => format!("~XINFO CONSUMERS s g{g}"),
                90..=92 => format!("XPENDING s g{g}"),
                93..=94 => format!("~XPENDING s g{g} - + 10 {}", ["", "a", "b"][r.below(3)]),
                95..=96 => format!(
                    "XGROUP SETID s g{g} {} {}",
                    ["0", "$", "4-0"][r.below(3)],
                    ["", "ENTRIESREAD 30", "ENTRIESREAD -1", "ENTRIESREAD 2"][r.below(4)]
                ),
                97 => format!("XGROUP DELCONSUMER s g{g} {who}"),
                _ => "~XINFO STREAM s FULL".to_string(),
            };
            c.line(&format!("RESP{proto}"), &step);
        }
        c.finish(&format!("random group traffic, RESP{proto}"));
    }
    node.assert_no_panic();
}

/// Blocks one client, runs `then` on another, and returns the blocked
/// client's reply (and every reply of `then`).
fn blocked(port: u16, proto: &str, setup: &[&str], block: &str, then: &[&str]) -> Vec<Vec<u8>> {
    let (mut a, mut b) = (Raw::connect(port), Raw::connect(port));
    for c in [&mut a, &mut b] {
        c.call(&["HELLO", proto]);
    }
    let mut out = vec![a.call_bytes(&[b"FLUSHALL"])];
    for s in setup {
        out.push(a.call_bytes(&bytes(&split(s))));
    }
    b.send(&bytes(&split(block)));
    std::thread::sleep(Duration::from_millis(150));
    for s in then {
        out.push(a.call_bytes(&bytes(&split(s))));
    }
    out.push(b.reply());
    out
}

#[test]
fn blocked_stream_readers_wake_like_redis_server() {
    let Some((node, redis)) = pair() else {
        return;
    };
    let grp = "XGROUP CREATE s g $ MKSTREAM";
    let rg = "XREADGROUP GROUP g c BLOCK 0 STREAMS s >";
    let scenarios: &[(&[&str], &str, &[&str])] = &[
        (
            &["XADD s 1 f v"],
            "XREAD BLOCK 0 STREAMS s $",
            &["XADD s 2 a b"],
        ),
        (
            &["XADD s 1 f v"],
            "XREAD BLOCK 0 STREAMS n s 0 $",
            &["XADD n 5 a b"],
        ),
        (
            &["XADD s 1 f v"],
            "XREAD BLOCK 0 STREAMS s 99",
            &["XADD s 5 f v", "XADD s 100 f v"],
        ),
        (
            &["XADD s 1 f v"],
            "XREAD BLOCK 0 STREAMS s $",
            &["DEL s", "XADD s 667 f v"],
        ),
        (&["XADD s 1 f v"], "XREAD BLOCK 100 STREAMS s $", &[]),
        (&[grp], rg, &["XADD s 2 a b", "XADD s 3 a b"]),
        (&[grp], rg, &["XGROUP DESTROY s g"]),
        (&[grp], rg, &["DEL s"]),
        (&[grp], rg, &["MULTI", "DEL s", "SADD s x", "EXEC"]),
        (&[grp], "XREADGROUP GROUP g c BLOCK 100 STREAMS s >", &[]),
        (
            &[grp],
            "XREADGROUP GROUP g c COUNT 1 BLOCK 0 NOACK STREAMS s >",
            &[
                "MULTI",
                "XADD s 2 a b",
                "XADD s 3 a b",
                "EXEC",
                "XPENDING s g",
                "XINFO GROUPS s",
            ],
        ),
    ];
    for proto in ["2", "3"] {
        for (setup, block, then) in scenarios {
            let ours = blocked(node.port, proto, setup, block, then);
            let theirs = blocked(redis.port, proto, setup, block, then);
            assert_eq!(
                ours.iter()
                    .map(|r| String::from_utf8_lossy(r))
                    .collect::<Vec<_>>(),
                theirs
                    .iter()
                    .map(|r| String::from_utf8_lossy(r))
                    .collect::<Vec<_>>(),
                "RESP{proto}: {block} then {then:?}"
            );
        }
    }
    node.assert_no_panic();
}
