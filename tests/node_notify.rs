//! Keyspace notifications on the built-in node: Redis 7.0.15's
//! "Keyspace notifications" tests of unit/pubsub.tcl, ported in order
//! (the first three also set `CLIENT REPLY` on the subscriber, for
//! coverage only; the node does not serve it, so it is left out). Each
//! test also checks that nothing more than the expected messages arrived.
//! `tests/node_vs_redis_notify.rs` compares the node with redis-server.

mod common;

use common::{free_port, start_node, Raw};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

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

/// Not in pubsub.tcl: MIGRATE raises `del` on the source for each key it
/// moved away, as Redis's cluster.c does.
#[test]
fn migrate_raises_del_on_the_source() {
    let (_n, mut r, mut rd1) = setup("KEg");
    let target = start_node(free_port());
    r.call(&["SET", "foo", "bar"]);
    let port = target.port.to_string();
    r.check(
        &["MIGRATE", "127.0.0.1", &port, "foo", "0", "5000"],
        "+OK\r\n",
    );
    expect(
        &mut rd1,
        &[("__keyspace@0__:foo", "del"), ("__keyevent@0__:del", "foo")],
    );
}
