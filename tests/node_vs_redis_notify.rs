//! Keyspace notifications on the built-in node and on a real redis-server
//! 7, side by side: with the same `notify-keyspace-events` mask on both, a
//! second connection subscribed to the pattern `*` must receive exactly the
//! same messages, byte for byte and in the same order, for the same corpus
//! of commands (every write command family, no-op writes that raise
//! nothing, expiry, MULTI/EXEC, a script, a served blocked client).
//!
//! Skips when `redis-server` is missing, unless `SHARDIS_REQUIRE_REDIS=1`;
//! Redis's own "Keyspace notifications" tests, ported, are in
//! `tests/node_notify.rs`.

mod common;

use common::compare::split;
use common::{free_port, have_tool, start_node, start_redis, Raw};
use std::thread::sleep;
use std::time::Duration;

const SENTINEL: &str = "sentinel-5b1e";

/// The corpus: `|`-separated (or blank-separated) commands. `@sleep N`
/// waits N ms; `@block CMD` sends CMD on a third connection without
/// reading; `@served` reads that connection's reply.
const CORPUS: &[&str] = &[
    // Strings.
    "SET s1 v",
    "SET s1 v",
    "SET s1 v NX",
    "SET s1 w XX GET",
    "SET s2 v NX GET",
    "SET s2 v XX",
    "SET s3 v EX 100",
    "SET s3 v KEEPTTL",
    "SETNX s3 x",
    "SETNX s4 x",
    "SETEX s5 100 v",
    "PSETEX s6 100000 v",
    "GETSET s6 w",
    "MSET m1 a m2 b",
    "MSETNX m1 a m3 c",
    "MSETNX m4 a m5 c",
    "APPEND s1 xyz",
    "APPEND s7 xyz",
    "SETRANGE s7 1 Q",
    "SETRANGE s8 0 |",
    "SETRANGE s7 0 |",
    "INCR n1",
    "DECR n1",
    "INCRBY n1 5",
    "DECRBY n1 5",
    "INCRBYFLOAT n2 1.5",
    "INCR s1",
    "GETDEL s1",
    "GETDEL s1",
    "GETEX s2",
    "GETEX s2 PERSIST",
    "GETEX s2 EX 100",
    "GETEX s2 PERSIST",
    "GETEX s2 PX 0",
    "GETEX s2 EXAT 1",
    "SETBIT b1 7 1",
    "SETBIT b1 7 1",
    "BITFIELD b2 GET u8 0",
    "BITFIELD b2 SET u8 0 5 GET u8 0",
    "BITFIELD b2 OVERFLOW FAIL INCRBY u8 0 300",
    "BITOP OR b3 b1 b2",
    "BITOP AND b3 nosuch",
    "BITOP AND b3 nosuch",
    "PFADD h1 a b",
    "PFADD h1 a",
    "PFMERGE h2 h1",
    // Keys.
    "DEL m1 nosuch m2 m1",
    "UNLINK m3 nosuch",
    "EXPIRE n1 100",
    "PEXPIRE n1 100000",
    "EXPIREAT n1 99999999999",
    "PEXPIREAT n1 99999999999999",
    "EXPIRE nosuch 100",
    "EXPIRE n1 100 NX",
    "PERSIST n1",
    "PERSIST n1",
    "EXPIRE n1 -1",
    "EXPIRE n2 0",
    "SET r1 v",
    "RENAME r1 r2",
    "RENAME r2 r2",
    "SET r3 v",
    "RENAME r2 r3",
    "RENAMENX r3 s3",
    "RENAMENX r3 r4",
    "COPY r4 r5",
    "COPY r4 r5",
    "COPY r4 r5 REPLACE",
    "PSETEX e1 50 v",
    "@sleep 300",
    "GET e1",
    "PSETEX e2 50 v",
    "@sleep 60",
    "SET e2 again",
    // Lists.
    "LPUSH l1 a b c",
    "RPUSH l1 d",
    "LPUSHX nosuch a",
    "RPUSHX l1 e",
    "LINSERT l1 BEFORE a x",
    "LINSERT l1 BEFORE nosuch x",
    "LSET l1 0 y",
    "LPOP l1",
    "RPOP l1 2",
    "LPOP nosuch",
    "LPOP l1 0",
    "LREM l1 0 nosuch",
    "LREM l1 1 a",
    "LTRIM nosuch 0 1",
    "LTRIM l1 0 0",
    "LTRIM l1 5 10",
    "RPUSH l2 a b",
    "RPOPLPUSH l2 l3",
    "LMOVE l2 l3 LEFT RIGHT",
    "LMOVE l3 l3 LEFT LEFT",
    "RPOPLPUSH nosuch l3",
    "LMPOP 2 nosuch l3 RIGHT COUNT 5",
    "RPUSH l4 a",
    "BLPOP l4 0",
    "RPUSH l4 a b",
    "BLMOVE l4 l5 RIGHT LEFT 0",
    "BLMPOP 0 1 l4 LEFT",
    "@block BLPOP l6 0",
    "@sleep 100",
    "RPUSH l6 a b",
    "@served",
    "LRANGE l6 0 -1",
    "@block BLMOVE l7 l8 LEFT RIGHT 0",
    "@sleep 100",
    "LPUSH l7 a",
    "@served",
    "@block BZPOPMAX z9 0",
    "@sleep 100",
    "ZADD z9 1 a 2 b",
    "@served",
    "XGROUP CREATE x7 g1 $ MKSTREAM",
    "@block XREADGROUP GROUP g1 dora BLOCK 0 STREAMS x7 >",
    "@sleep 100",
    "XADD x7 1-0 f v",
    "@served",
    // Sets.
    "SADD t1 a b c",
    "SADD t1 a",
    "SREM t1 x",
    "SREM t1 a",
    "SPOP t1",
    "SPOP nosuch",
    "SADD t2 a b",
    "SPOP t2 0",
    "SPOP t2 5",
    "SADD t3 a b",
    "SADD t4 b",
    "SMOVE t3 t4 b",
    "SMOVE t3 t4 x",
    "SMOVE t3 t3 a",
    "SMOVE t3 t5 a",
    "SADD t6 a b",
    "SADD t7 b c",
    "SINTERSTORE t8 t6 t7",
    "SUNIONSTORE t8 t6 t7",
    "SDIFFSTORE t8 t6 t6",
    "SDIFFSTORE t8 t6 t6",
    // Hashes.
    "HSET k1 a 1 b 2",
    "HSET k1 a 1",
    "HMSET k1 c 3",
    "HSETNX k1 a 9",
    "HSETNX k1 d 9",
    "HDEL k1 x",
    "HDEL k1 a b",
    "HINCRBY k1 c 1",
    "HINCRBYFLOAT k1 c 1.5",
    "HDEL k1 c d",
    // Sorted sets.
    "ZADD z1 1 a 2 b",
    "ZADD z1 1 a",
    "ZADD z1 3 a",
    "ZADD z1 XX 1 c",
    "ZADD z1 NX 1 a",
    "ZADD z1 CH 4 a 2 b",
    "ZADD z1 INCR 1 a",
    "ZADD z1 NX INCR 1 a",
    "ZINCRBY z1 1 b",
    "ZREM z1 x",
    "ZREM z1 a",
    "ZADD z2 1 a 2 b 3 c 4 d 5 e",
    "ZREMRANGEBYRANK z2 0 0",
    "ZREMRANGEBYRANK z2 10 20",
    "ZREMRANGEBYSCORE z2 2 2",
    "ZREMRANGEBYLEX z2 [c [c",
    "ZPOPMIN z2",
    "ZPOPMAX z2 5",
    "ZPOPMIN nosuch",
    "ZADD z3 1 a 2 b",
    "ZADD z4 2 b 3 c",
    "ZUNIONSTORE z5 2 z3 z4",
    "ZINTERSTORE z5 2 z3 z4",
    "ZDIFFSTORE z5 2 z3 z3",
    "ZDIFFSTORE z5 2 z3 z3",
    "ZRANGESTORE z6 z3 0 -1",
    "ZMPOP 1 z6 MIN",
    "ZMPOP 1 z6 MAX COUNT 3",
    "BZPOPMIN z3 0",
    "BZMPOP 0 1 z3 MAX",
    // Geo.
    "GEOADD g1 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "GEOADD g1 13.361389 38.115556 Palermo",
    "GEOSEARCHSTORE g2 g1 FROMLONLAT 15 37 BYRADIUS 200 km ASC",
    "GEOSEARCHSTORE g2 g1 FROMLONLAT 0 0 BYRADIUS 1 km ASC",
    "GEORADIUS g1 15 37 200 km STORE g3",
    "GEORADIUSBYMEMBER g1 Palermo 1 km STOREDIST g3",
    // Streams.
    "XADD x1 1-1 f v",
    "XADD x1 2-1 f v",
    "XADD x1 MAXLEN 1 3-1 f v",
    "XADD x1 MAXLEN 5 4-1 f v",
    "XADD x9 NOMKSTREAM 1-1 f v",
    "XTRIM x1 MAXLEN 10",
    "XTRIM x1 MAXLEN 1",
    "XDEL x1 1-1",
    "XDEL x1 4-1",
    "XSETID x1 5-0",
    "XGROUP CREATE x1 g1 0",
    "XGROUP CREATE x2 g1 $ MKSTREAM",
    "XGROUP CREATECONSUMER x1 g1 bob",
    "XGROUP CREATECONSUMER x1 g1 bob",
    "XGROUP SETID x1 g1 0",
    "XADD x1 6-0 f v",
    "XREADGROUP GROUP g1 alice STREAMS x1 >",
    "XREADGROUP GROUP g1 alice STREAMS x1 >",
    "XCLAIM x1 g1 mike 0 6-0",
    "XAUTOCLAIM x1 g1 carol 0 0",
    "XAUTOCLAIM x1 g1 bob 0 0",
    "XGROUP DELCONSUMER x1 g1 lee",
    "XGROUP DELCONSUMER x1 g1 bob",
    "XGROUP DESTROY x1 g1",
    "XGROUP DESTROY x1 g1",
    "XACK x1 g1 6-0",
    // Sorting into a key.
    "RPUSH q1 3 1 2",
    "SORT q1 STORE q2",
    "SORT nosuch STORE q2",
    "SORT nosuch STORE q2",
    // RESTORE of a DUMP taken on the same server.
    "SET d1 hello",
    "@dump d1 d2",
    "@dump d1 d3",
    "@dump-past d1 d2",
    "@dump-past d1 d4",
    // Transactions and scripts run their commands' events.
    "MULTI",
    "SET tx1 a",
    "LPUSH tx2 a",
    "DEL tx1",
    "EXEC",
    "EVAL|redis.call('set', KEYS[1], 'x'); redis.call('lpush', KEYS[2], 'a'); return redis.call('lpop', KEYS[2])|2|ev1|ev2",
    "EVAL|return redis.call('incr', KEYS[1])|1|ev3",
    // Errors raise nothing.
    "LPUSH s3 a",
    "SADD l1 a",
    "INCR s3",
    "FLUSHALL",
];

/// The masks the corpus runs under.
const MASKS: &[&str] = &["KEA", "KEAn", "Kl", "Ex", "En", "gKE", "K$", "Eshz", "Kt"];

/// One server's run of the corpus under `mask`: every frame the `*`
/// subscriber received, and the replies (to show in a mismatch).
fn transcript(port: u16, mask: &str) -> (Vec<String>, Vec<String>) {
    let mut cmd = Raw::connect(port);
    let mut sub = Raw::connect(port);
    let mut third = Raw::connect(port);
    cmd.check(&["FLUSHALL"], "+OK\r\n");
    cmd.check(
        &["CONFIG", "SET", "notify-keyspace-events", mask],
        "+OK\r\n",
    );
    let confirm = sub.call(&["PSUBSCRIBE", "*"]);
    assert!(confirm.contains("psubscribe"), "{confirm}");
    let mut replies = Vec::new();
    for step in CORPUS {
        let args = split(step);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        match a[0] {
            "@sleep" => sleep(Duration::from_millis(a[1].parse().unwrap())),
            "@block" => third.send(&a[1..].iter().map(|s| s.as_bytes()).collect::<Vec<_>>()),
            "@served" => replies.push(text(&third.reply())),
            "@dump-past" => {
                // RESTORE with an absolute TTL already past stores nothing.
                let dump = cmd.call_bytes(&[b"DUMP", a[1].as_bytes()]);
                let payload = bulk_body(&dump);
                let args: [&[u8]; 6] = [
                    b"RESTORE",
                    a[2].as_bytes(),
                    b"1",
                    &payload,
                    b"REPLACE",
                    b"ABSTTL",
                ];
                replies.push(text(&cmd.call_bytes(&args)));
            }
            "@dump" => {
                let dump = cmd.call_bytes(&[b"DUMP", a[1].as_bytes()]);
                let payload = bulk_body(&dump);
                let r = cmd.call_bytes(&[b"RESTORE", a[2].as_bytes(), b"0", &payload]);
                replies.push(text(&r));
                let r = cmd.call_bytes(&[b"RESTORE", a[2].as_bytes(), b"0", &payload, b"REPLACE"]);
                replies.push(text(&r));
            }
            _ => replies.push(format!("{step} -> {}", cmd.call(&a))),
        }
    }
    cmd.check(&["CONFIG", "SET", "notify-keyspace-events", ""], "+OK\r\n");
    sub.send(&[b"PING", SENTINEL.as_bytes()]);
    let pong = format!("*2\r\n$4\r\npong\r\n${}\r\n{SENTINEL}\r\n", SENTINEL.len());
    let mut frames = Vec::new();
    loop {
        let f = sub.reply();
        if f == pong.as_bytes() {
            break;
        }
        frames.push(text(&f));
    }
    (frames, replies)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A bulk reply's body.
fn bulk_body(r: &[u8]) -> Vec<u8> {
    let nl = r.iter().position(|&c| c == b'\n').unwrap();
    let n: usize = std::str::from_utf8(&r[1..nl - 1]).unwrap().parse().unwrap();
    r[nl + 1..nl + 1 + n].to_vec()
}

#[test]
fn notifications_match_redis_server_message_for_message() {
    if !have_tool("redis-server") {
        return;
    }
    let node = start_node(free_port());
    let redis = start_redis(free_port());
    let mut failures = Vec::new();
    for mask in MASKS {
        let (ours, our_replies) = transcript(node.port, mask);
        let (theirs, their_replies) = transcript(redis.port, mask);
        if ours != theirs {
            let at = ours
                .iter()
                .zip(&theirs)
                .position(|(a, b)| a != b)
                .unwrap_or(ours.len().min(theirs.len()));
            let window = |v: &[String]| v[at.saturating_sub(2)..(at + 4).min(v.len())].to_vec();
            failures.push(format!(
                "mask {mask}: {} messages here, {} from redis; first difference at {at}:\n  node:  {:?}\n  redis: {:?}",
                ours.len(),
                theirs.len(),
                window(&ours),
                window(&theirs)
            ));
            let diverging: Vec<_> = our_replies
                .iter()
                .zip(&their_replies)
                .filter(|(a, b)| a != b)
                .take(5)
                .collect();
            failures.push(format!("  replies that differ: {diverging:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
