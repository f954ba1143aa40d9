//! Keyspace notifications through the proxy: every subscriber, whichever
//! node holds its subscriptions, hears the events of every key exactly
//! once, in both protocols and for channels and patterns alike; a node
//! added at run time is heard too; the feed's connections to the nodes go
//! when the last subscriber leaves; and subscribe confirmations are sent
//! whatever CLIENT REPLY says, as redis-server sends them.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::frames::{call, conn, text};
use common::*;

/// The parts of a pushed message: (kind, pattern or "", channel, payload).
fn parts(frame: &[u8]) -> (String, String, String, String) {
    let t = text(frame);
    let lines: Vec<&str> = t.split("\r\n").collect();
    // *N / >N, then $len, value pairs.
    let vals: Vec<&str> = lines.iter().skip(2).step_by(2).copied().collect();
    match vals.as_slice() {
        ["message", ch, msg] => (
            "message".into(),
            String::new(),
            ch.to_string(),
            msg.to_string(),
        ),
        ["pmessage", p, ch, msg] => (
            "pmessage".into(),
            p.to_string(),
            ch.to_string(),
            msg.to_string(),
        ),
        _ => panic!("not a message: {t:?}"),
    }
}

/// Reads `n` messages, then checks nothing more comes (a PING's reply is
/// next, after a pause for late events).
fn messages(s: &mut RespConn, n: usize, proto: u8) -> Vec<(String, String, String, String)> {
    let got: Vec<_> = (0..n).map(|_| parts(&s.read_reply().unwrap())).collect();
    std::thread::sleep(Duration::from_millis(300));
    let pong = if proto == 3 {
        "+PONG\r\n"
    } else {
        "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    };
    let next = call(s, &["PING"], 1);
    assert_eq!(next, pong, "a message more than the {n} expected");
    got
}

/// Distinct patterns node `port` holds (the feed's two among them).
fn numpat(port: u16) -> usize {
    let r = text(&conn(port).cmd(&["PUBSUB", "NUMPAT"]));
    r.trim_start_matches(':').trim_end().parse().unwrap()
}

/// Subscribers of one pattern that listen on every node (each holds its
/// subscriptions on one, spread by the proxy): every node then holds the
/// feed's two patterns and theirs.
fn spread(c: &Cluster, make: impl Fn() -> RespConn, n: usize) -> Vec<RespConn> {
    let subs: Vec<RespConn> = (0..n).map(|_| make()).collect();
    for node in &c.nodes {
        assert_eq!(
            numpat(node.port),
            3,
            "node {} holds no subscriber",
            node.port
        );
    }
    subs
}

fn every_subscriber_hears_every_key_event_once(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(3);
    let port = c.proxy.port;
    let mut admin = conn(port);
    assert_eq!(
        call(
            &mut admin,
            &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
            1
        ),
        "+OK\r\n"
    );
    // RESP2, a pattern on the key namespace.
    let mut space = spread(
        &c,
        || {
            let mut s = conn(port);
            call(&mut s, &["PSUBSCRIBE", "__keyspace@0__:k:*"], 1);
            s
        },
        6,
    );
    // RESP3, every channel, and one event by name.
    let mut all = conn(port);
    call(&mut all, &["HELLO", "3"], 1);
    call(&mut all, &["PSUBSCRIBE", "*"], 1);
    call(&mut all, &["SUBSCRIBE", "__keyevent@0__:del"], 1);
    let keys: usize = 300;
    let mut w = conn(port);
    for i in 0..keys {
        assert_eq!(call(&mut w, &["SET", &format!("k:{i}"), "v"], 1), "+OK\r\n");
    }
    for i in (0..keys).step_by(3) {
        assert_eq!(call(&mut w, &["DEL", &format!("k:{i}")], 1), ":1\r\n");
    }
    let dels = keys.div_ceil(3);
    for s in &mut space {
        let got = messages(s, keys + dels, 2);
        // Per key: its events in order.
        let mut seen: HashMap<String, Vec<String>> = HashMap::new();
        for (kind, pat, ch, msg) in got {
            assert_eq!(
                (kind.as_str(), pat.as_str()),
                ("pmessage", "__keyspace@0__:k:*")
            );
            seen.entry(ch).or_default().push(msg);
        }
        assert_eq!(seen.len(), keys);
        for i in 0..keys {
            let want: &[&str] = if i % 3 == 0 {
                &["set", "del"]
            } else {
                &["set"]
            };
            assert_eq!(seen[&format!("__keyspace@0__:k:{i}")], want, "k:{i}");
        }
    }
    // Two pmessages per event, and a message per DEL.
    let got = messages(&mut all, 2 * (keys + dels) + dels, 3);
    let count = |kind: &str, ch: &str| got.iter().filter(|m| m.0 == kind && m.2 == ch).count();
    assert_eq!(count("pmessage", "__keyevent@0__:set"), keys);
    assert_eq!(count("pmessage", "__keyevent@0__:del"), dels);
    assert_eq!(count("message", "__keyevent@0__:del"), dels);
    for p in [&c.proxy].into_iter().chain(&c.nodes) {
        p.assert_no_panic();
    }
}

fn a_node_added_at_run_time_is_heard(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(2);
    let port = c.proxy.port;
    let mut admin = conn(port);
    call(
        &mut admin,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        1,
    );
    let mut s = conn(port);
    call(&mut s, &["PSUBSCRIBE", "__keyevent@0__:set"], 1);
    let extra = b.start();
    call(
        &mut conn(extra.port),
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        1,
    );
    let added = call(&mut admin, &["CLUSTER", "ADDNODE", &extra.addr()], 1);
    assert_eq!(added, "+OK\r\n");
    // The feed follows the routing within a tenth of a second.
    std::thread::sleep(Duration::from_millis(500));
    let mut w = conn(port);
    for i in 0..200 {
        call(&mut w, &["SET", &format!("n:{i}"), "v"], 1);
    }
    let on_new = text(&conn(extra.port).cmd(&["DBSIZE"]));
    assert_ne!(on_new, ":0\r\n", "the new node holds none of the keys");
    let got = messages(&mut s, 200, 2);
    let mut keys: Vec<String> = got.into_iter().map(|m| m.3).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 200);
}

/// Nodes the feed is subscribed on (its two patterns there).
fn feed_links(nodes: &[&Proc]) -> usize {
    nodes.iter().filter(|n| numpat(n.port) >= 2).count()
}

fn the_feed_leaves_the_nodes_with_its_last_subscriber(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(3);
    let nodes: Vec<&Proc> = c.nodes.iter().collect();
    let mut s = conn(c.proxy.port);
    call(&mut s, &["SUBSCRIBE", "news"], 1);
    assert_eq!(
        feed_links(&nodes),
        0,
        "a channel outside the namespaces needs no feed"
    );
    call(&mut s, &["PSUBSCRIBE", "__key*"], 1);
    assert_eq!(feed_links(&nodes), 3);
    call(&mut s, &["PUNSUBSCRIBE"], 1);
    eventually(10, "the feed's links closed", || feed_links(&nodes) == 0);
    drop(s);
}

fn confirmations_are_sent_whatever_client_reply_says(b: Backend) {
    if !b.is_available() || !have_tool("redis-server") {
        return;
    }
    let c = b.cluster(2);
    let redis = start_redis(free_port());
    let script: &[(&[&str], usize)] = &[
        (&["CLIENT", "REPLY", "OFF"], 0),
        (&["PSUBSCRIBE", "*"], 1),
        (&["SUBSCRIBE", "a", "b"], 2),
        (&["PING"], 0),
        (&["UNSUBSCRIBE", "a"], 1),
    ];
    for port in [redis.port, c.proxy.port] {
        let mut s = conn(port);
        let got: Vec<String> = script.iter().map(|(a, n)| call(&mut s, a, *n)).collect();
        assert_eq!(
            got[1], "*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n",
            "port {port}"
        );
        assert_eq!(
            got[4], "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n",
            "port {port}"
        );
    }
}

fn a_publish_to_a_keyspace_channel_reaches_each_subscriber_once(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(3);
    let port = c.proxy.port;
    for channel in ["__keyspace@0__:x", "__keyspace@junk"] {
        let mut subs = spread(
            &c,
            || {
                let mut s = conn(port);
                call(&mut s, &["PSUBSCRIBE", "__keyspace@*"], 1);
                s
            },
            6,
        );
        let mut p = conn(port);
        assert_eq!(
            call(&mut p, &["PUBLISH", channel, "hello"], 1),
            ":6\r\n",
            "{channel}"
        );
        for s in &mut subs {
            let got = messages(s, 1, 2);
            assert_eq!(got[0].2, channel);
            assert_eq!(got[0].3, "hello");
        }
    }
}

on_both_backends!(
    a_publish_to_a_keyspace_channel_reaches_each_subscriber_once,
    every_subscriber_hears_every_key_event_once,
    a_node_added_at_run_time_is_heard,
    the_feed_leaves_the_nodes_with_its_last_subscriber,
    confirmations_are_sent_whatever_client_reply_says,
);
