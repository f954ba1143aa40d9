//! Keyspace notifications on the built-in node and on a real redis-server
//! 7, side by side: with the same `notify-keyspace-events` mask on both, a
//! second connection subscribed to the pattern `*` must receive exactly the
//! same messages, byte for byte and in the same order, for the same corpus
//! of commands (every write command family, no-op writes that raise
//! nothing, expiry, MULTI/EXEC, a script, a served blocked client).
//!
//! Then Redis's own "Keyspace notifications" tests (unit/pubsub.tcl),
//! ported, against the built-in node alone. The differential half skips
//! when `redis-server` is missing, unless `SHARDIS_REQUIRE_REDIS=1`.

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

/// Redis's unit/pubsub.tcl "Keyspace notifications" tests, on the
/// built-in node (CLIENT REPLY, which two of them set on the subscriber
/// only for coverage, is left out: the node does not serve it).
mod redis_pubsub_tcl {
    use super::*;

    /// A `pmessage * <channel> <message>` frame as RESP2 bytes.
    fn pmessage(channel: &str, message: &str) -> String {
        format!(
            "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n${}\r\n{channel}\r\n${}\r\n{message}\r\n",
            channel.len(),
            message.len()
        )
    }

    /// The server and a subscriber to `*`, after `CONFIG SET` of `mask`.
    fn setup(mask: &str) -> (common::Proc, Raw, Raw) {
        let node = start_node(free_port());
        let mut r = Raw::connect(node.port);
        r.check(
            &["CONFIG", "SET", "notify-keyspace-events", mask],
            "+OK\r\n",
        );
        let mut rd1 = Raw::connect(node.port);
        assert_eq!(
            rd1.call(&["PSUBSCRIBE", "*"]),
            "*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n"
        );
        (node, r, rd1)
    }

    /// Exactly these messages, then nothing more (a PING's answer).
    fn expect(rd1: &mut Raw, want: &[(&str, &str)]) {
        for (channel, message) in want {
            assert_eq!(text(&rd1.reply()), pmessage(channel, message));
        }
        rd1.send(&[b"PING"]);
        assert_eq!(text(&rd1.reply()), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }

    #[test]
    fn we_receive_keyspace_notifications() {
        let (_n, mut r, mut rd1) = setup("KA");
        r.call(&["SET", "foo", "bar"]);
        expect(&mut rd1, &[("__keyspace@0__:foo", "set")]);
    }

    #[test]
    fn we_receive_keyevent_notifications() {
        let (_n, mut r, mut rd1) = setup("EA");
        r.call(&["SET", "foo", "bar"]);
        expect(&mut rd1, &[("__keyevent@0__:set", "foo")]);
    }

    #[test]
    fn we_can_receive_both_kind_of_events() {
        let (_n, mut r, mut rd1) = setup("KEA");
        r.call(&["SET", "foo", "bar"]);
        expect(
            &mut rd1,
            &[("__keyspace@0__:foo", "set"), ("__keyevent@0__:set", "foo")],
        );
    }

    #[test]
    fn we_are_able_to_mask_events() {
        let (_n, mut r, mut rd1) = setup("KEl");
        r.call(&["DEL", "mylist"]);
        r.call(&["SET", "foo", "bar"]);
        r.call(&["LPUSH", "mylist", "a"]);
        expect(
            &mut rd1,
            &[
                ("__keyspace@0__:mylist", "lpush"),
                ("__keyevent@0__:lpush", "mylist"),
            ],
        );
    }

    #[test]
    fn general_events_test() {
        let (_n, mut r, mut rd1) = setup("KEg");
        r.call(&["SET", "foo", "bar"]);
        r.call(&["EXPIRE", "foo", "1"]);
        r.call(&["DEL", "foo"]);
        expect(
            &mut rd1,
            &[
                ("__keyspace@0__:foo", "expire"),
                ("__keyevent@0__:expire", "foo"),
                ("__keyspace@0__:foo", "del"),
                ("__keyevent@0__:del", "foo"),
            ],
        );
    }

    #[test]
    fn list_events_test() {
        let (_n, mut r, mut rd1) = setup("KEl");
        r.call(&["DEL", "mylist"]);
        r.call(&["LPUSH", "mylist", "a"]);
        r.call(&["RPUSH", "mylist", "a"]);
        r.call(&["RPOP", "mylist"]);
        expect(
            &mut rd1,
            &[
                ("__keyspace@0__:mylist", "lpush"),
                ("__keyevent@0__:lpush", "mylist"),
                ("__keyspace@0__:mylist", "rpush"),
                ("__keyevent@0__:rpush", "mylist"),
                ("__keyspace@0__:mylist", "rpop"),
                ("__keyevent@0__:rpop", "mylist"),
            ],
        );
    }

    #[test]
    fn set_events_test() {
        let (_n, mut r, mut rd1) = setup("Ks");
        r.call(&["DEL", "myset"]);
        r.call(&["SADD", "myset", "a", "b", "c", "d"]);
        r.call(&["SREM", "myset", "x"]);
        r.call(&["SADD", "myset", "x", "y", "z"]);
        r.call(&["SREM", "myset", "x"]);
        expect(
            &mut rd1,
            &[
                ("__keyspace@0__:myset", "sadd"),
                ("__keyspace@0__:myset", "sadd"),
                ("__keyspace@0__:myset", "srem"),
            ],
        );
    }

    #[test]
    fn zset_events_test() {
        let (_n, mut r, mut rd1) = setup("Kz");
        r.call(&["DEL", "myzset"]);
        r.call(&["ZADD", "myzset", "1", "a", "2", "b"]);
        r.call(&["ZREM", "myzset", "x"]);
        r.call(&["ZADD", "myzset", "3", "x", "4", "y", "5", "z"]);
        r.call(&["ZREM", "myzset", "x"]);
        expect(
            &mut rd1,
            &[
                ("__keyspace@0__:myzset", "zadd"),
                ("__keyspace@0__:myzset", "zadd"),
                ("__keyspace@0__:myzset", "zrem"),
            ],
        );
    }

    #[test]
    fn hash_events_test() {
        let (_n, mut r, mut rd1) = setup("Kh");
        r.call(&["DEL", "myhash"]);
        r.call(&["HMSET", "myhash", "yes", "1", "no", "0"]);
        r.call(&["HINCRBY", "myhash", "yes", "10"]);
        expect(
            &mut rd1,
            &[
                ("__keyspace@0__:myhash", "hset"),
                ("__keyspace@0__:myhash", "hincrby"),
            ],
        );
    }

    #[test]
    fn stream_events_test() {
        let (_n, mut r, mut rd1) = setup("Kt");
        r.call(&["DEL", "mystream"]);
        r.call(&["XGROUP", "CREATE", "mystream", "mygroup", "$", "MKSTREAM"]);
        r.call(&["XGROUP", "CREATECONSUMER", "mystream", "mygroup", "Bob"]);
        r.call(&["XADD", "mystream", "1", "field1", "A"]);
        r.call(&[
            "XREADGROUP",
            "GROUP",
            "mygroup",
            "Alice",
            "STREAMS",
            "mystream",
            ">",
        ]);
        r.call(&["XCLAIM", "mystream", "mygroup", "Mike", "0", "1-0", "FORCE"]);
        // Not notified: "Lee" does not exist.
        r.call(&["XGROUP", "DELCONSUMER", "mystream", "mygroup", "Lee"]);
        // Not notified: "Bob" exists.
        r.call(&["XAUTOCLAIM", "mystream", "mygroup", "Bob", "0", "1-0"]);
        r.call(&["XGROUP", "DELCONSUMER", "mystream", "mygroup", "Bob"]);
        let ks = "__keyspace@0__:mystream";
        expect(
            &mut rd1,
            &[
                (ks, "xgroup-create"),
                (ks, "xgroup-createconsumer"),
                (ks, "xadd"),
                (ks, "xgroup-createconsumer"),
                (ks, "xgroup-createconsumer"),
                (ks, "xgroup-delconsumer"),
            ],
        );
    }

    #[test]
    fn expired_events_triggered_expire() {
        let (_n, mut r, mut rd1) = setup("Ex");
        r.call(&["DEL", "foo"]);
        r.call(&["PSETEX", "foo", "100", "1"]);
        common::eventually(5, "foo expires", || r.call(&["EXISTS", "foo"]) == ":0\r\n");
        expect(&mut rd1, &[("__keyevent@0__:expired", "foo")]);
    }

    #[test]
    fn expired_events_background_expire() {
        let (_n, mut r, mut rd1) = setup("Ex");
        r.call(&["DEL", "foo"]);
        r.call(&["PSETEX", "foo", "100", "1"]);
        expect(&mut rd1, &[("__keyevent@0__:expired", "foo")]);
    }

    #[test]
    fn evicted_events() {
        let (_n, mut r, mut rd1) = setup("Ee");
        r.check(
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
            "+OK\r\n",
        );
        r.call(&["FLUSHDB"]);
        r.call(&["SET", "foo", "bar"]);
        r.check(&["CONFIG", "SET", "maxmemory", "1"], "+OK\r\n");
        expect(&mut rd1, &[("__keyevent@0__:evicted", "foo")]);
        r.check(&["CONFIG", "SET", "maxmemory", "0"], "+OK\r\n");
    }

    #[test]
    fn test_config_get_set_of_event_flags() {
        let node = start_node(free_port());
        let mut r = Raw::connect(node.port);
        for (set, shown) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
        ] {
            r.check(&["CONFIG", "SET", "notify-keyspace-events", set], "+OK\r\n");
            let want = format!(
                "*2\r\n$22\r\nnotify-keyspace-events\r\n${}\r\n{shown}\r\n",
                shown.len()
            );
            r.check(&["CONFIG", "GET", "notify-keyspace-events"], &want);
        }
        r.check(
            &["CONFIG", "SET", "notify-keyspace-events", "Kq"],
            "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n",
        );
    }

    #[test]
    fn new_key_test() {
        let (_n, mut r, mut rd1) = setup("En");
        r.call(&["SET", "foo", "bar"]);
        // The second SET of foo raises no `new`.
        r.call(&["SET", "foo", "baz"]);
        r.call(&["SET", "bar", "bar"]);
        expect(
            &mut rd1,
            &[("__keyevent@0__:new", "foo"), ("__keyevent@0__:new", "bar")],
        );
    }
}
