//! Pub/sub through the proxy, byte for byte and count for count: RESP2
//! subscribe mode answered as one redis-server answers it, RESP3 pushes
//! between replies, PUBLISH reaching subscribers placed on every node,
//! PUBSUB introspection equal to one redis-server with the same subscribers,
//! `redis-cli SUBSCRIBE` receiving what another client publishes, and the
//! pinned-connection bound (refusal, release on unsubscribe and on
//! disconnect).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::frames::{call, conn, text, TIMEOUT};
use common::*;

/// The replies to `script` (request, frames of its reply) on a fresh connection.
fn run(port: u16, script: &[(&[&str], usize)]) -> Vec<String> {
    let mut c = conn(port);
    script.iter().map(|(a, n)| call(&mut c, a, *n)).collect()
}

/// Waits until `channel` has `n` subscribers as PUBSUB NUMSUB counts them.
fn wait_numsub(port: u16, channel: &str, n: usize) {
    let want = format!("*2\r\n${}\r\n{channel}\r\n:{n}\r\n", channel.len());
    let deadline = Instant::now() + TIMEOUT;
    let mut c = conn(port);
    while text(&c.cmd(&["PUBSUB", "NUMSUB", channel])) != want {
        assert!(
            Instant::now() < deadline,
            "{channel} never had {n} subscribers"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn resp2_subscribe_mode_answers_like_one_redis_server(b: Backend) {
    if !b.is_available() || !have_tool("redis-server") {
        return;
    }
    let c = b.cluster(3);
    let redis = start_redis(free_port());
    let script: &[(&[&str], usize)] = &[
        (&["UNSUBSCRIBE"], 1),
        (&["UNSUBSCRIBE", "a", "b"], 2),
        (&["PUNSUBSCRIBE"], 1),
        (&["SUBSCRIBE", "x", "y"], 2),
        (&["GET", "k"], 1),
        (&["SET", "k", "v"], 1),
        (&["PUBLISH", "x", "m"], 1),
        (&["PING"], 1),
        (&["PING", "hi"], 1),
        (&["SUBSCRIBE", "x"], 1),
        (&["PSUBSCRIBE", "p*", "q*"], 2),
        (&["UNSUBSCRIBE", "x"], 1),
        (&["PUNSUBSCRIBE", "q*"], 1),
        (&["SSUBSCRIBE", "s"], 1),
        (&["SUNSUBSCRIBE"], 1),
        (&["PUNSUBSCRIBE"], 1),
        (&["ECHO", "e"], 1),
        (&["UNSUBSCRIBE"], 1),
        (&["GET", "nokey"], 1),
        (&["PING"], 1),
    ];
    let want = run(redis.port, script);
    let got = run(c.proxy.port, script);
    for ((req, _), (w, g)) in script.iter().zip(want.iter().zip(&got)) {
        assert_eq!(g, w, "reply to {req:?}");
    }
    assert!(want[4].contains("only (P|S)SUBSCRIBE"), "{}", want[4]);
}

fn resp3_pushes_come_between_replies_never_inside_one(b: Backend) {
    if !b.is_available() || !have_tool("redis-server") {
        return;
    }
    let c = b.cluster(3);
    let redis = start_redis(free_port());
    let script: &[(&[&str], usize)] = &[
        (&["SUBSCRIBE", "x"], 1),
        (&["PSUBSCRIBE", "x*"], 1),
        (&["SET", "k", "v"], 1),
        (&["GET", "k"], 1),
        (&["PING"], 1),
        (&["UNSUBSCRIBE"], 1),
        (&["PUNSUBSCRIBE"], 1),
    ];
    for port in [redis.port, c.proxy.port] {
        let mut sub = conn(port);
        call(&mut sub, &["HELLO", "3"], 1);
        let got: Vec<String> = script.iter().map(|(a, n)| call(&mut sub, a, *n)).collect();
        assert_eq!(got[0], ">3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n");
        assert_eq!(got[2], "+OK\r\n");
        assert_eq!(got[3], "$1\r\nv\r\n");
        assert_eq!(got[4], "+PONG\r\n");
        // Subscribed again, a message published meanwhile arrives as a
        // push after the reply owed when it came, then the next reply.
        call(&mut sub, &["SUBSCRIBE", "x"], 1);
        let mut publisher = conn(port);
        assert_eq!(publisher.cmd(&["PUBLISH", "x", "hello"]), b":1\r\n");
        assert_eq!(
            text(&sub.read_reply().unwrap()),
            ">3\r\n$7\r\nmessage\r\n$1\r\nx\r\n$5\r\nhello\r\n"
        );
        assert_eq!(call(&mut sub, &["GET", "k"], 1), "$1\r\nv\r\n");
    }
}

/// Subscribers placed on every node each get every message once, and
/// PUBLISH answers how many received it.
fn publish_reaches_subscribers_on_every_node_once(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(3);
    let port = c.proxy.port;
    let mut subs: Vec<RespConn> = (0..6).map(|_| conn(port)).collect();
    for s in &mut subs {
        call(s, &["SUBSCRIBE", "news"], 1);
    }
    let mut pat = conn(port);
    call(&mut pat, &["PSUBSCRIBE", "ne*"], 1);
    // Spread: every node holds some of them.
    for n in &c.nodes {
        let held = text(&conn(n.port).cmd(&["PUBSUB", "NUMSUB", "news"]));
        assert!(
            !held.ends_with(":0\r\n"),
            "node {} has none: {held}",
            n.port
        );
    }
    let mut publisher = conn(port);
    for i in 0..20 {
        let m = format!("m{i}");
        assert_eq!(publisher.cmd(&["PUBLISH", "news", &m]), b":7\r\n");
    }
    for s in &mut subs {
        for i in 0..20 {
            let want = format!(
                "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\nm{i}\r\n",
                format!("m{i}").len()
            );
            assert_eq!(text(&s.read_reply().unwrap()), want);
        }
    }
    for i in 0..20 {
        let m = format!("m{i}");
        let want = format!(
            "*4\r\n$8\r\npmessage\r\n$3\r\nne*\r\n$4\r\nnews\r\n${}\r\n{m}\r\n",
            m.len()
        );
        assert_eq!(text(&pat.read_reply().unwrap()), want);
    }
    // Nothing more: each message came once.
    for s in subs.iter_mut().chain([&mut pat]) {
        assert_eq!(call(s, &["PING"], 1), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }
}

/// The same subscribers on the proxy and on one redis-server give the same
/// PUBSUB answers and PUBLISH counts.
fn pubsub_introspection_equals_one_redis_server(b: Backend) {
    if !b.is_available() || !have_tool("redis-server") {
        return;
    }
    let c = b.cluster(3);
    let redis = start_redis(free_port());
    let mut held = Vec::new();
    let mut answers = Vec::new();
    for port in [redis.port, c.proxy.port] {
        for i in 0..12 {
            let mut s = conn(port);
            let chans: Vec<String> = (0..=(i % 3)).map(|k| format!("c{}", (i + k) % 5)).collect();
            let mut args = vec!["SUBSCRIBE"];
            args.extend(chans.iter().map(|s| s.as_str()));
            call(&mut s, &args, chans.len());
            if i % 4 == 0 {
                call(&mut s, &["PSUBSCRIBE", &format!("c{}*", i % 3), "z*"], 2);
            }
            if i % 5 == 0 {
                call(&mut s, &["SSUBSCRIBE", &format!("s{}", i % 2)], 1);
            }
            held.push(s);
        }
        let mut q = conn(port);
        let sorted = |r: Vec<u8>| {
            let mut lines: Vec<String> = text(&r).split("\r\n").map(String::from).collect();
            lines.sort();
            lines.join(",")
        };
        answers.push(vec![
            sorted(q.cmd(&["PUBSUB", "CHANNELS"])),
            sorted(q.cmd(&["PUBSUB", "CHANNELS", "c[0-2]"])),
            sorted(q.cmd(&["PUBSUB", "SHARDCHANNELS"])),
            text(&q.cmd(&["PUBSUB", "NUMSUB", "c0", "c1", "c4", "nope"])),
            text(&q.cmd(&["PUBSUB", "NUMSUB"])),
            text(&q.cmd(&["PUBSUB", "SHARDNUMSUB", "s0", "s1", "s2"])),
            text(&q.cmd(&["PUBSUB", "NUMPAT"])),
            text(&q.cmd(&["PUBSUB", "NOSUCH"])),
            text(&q.cmd(&["PUBLISH", "c1", "x"])),
            text(&q.cmd(&["PUBLISH", "zz", "x"])),
            text(&q.cmd(&["SPUBLISH", "s0", "x"])),
            text(&q.cmd(&["PUBLISH", "nobody", "x"])),
            Raw::connect(port)
                .info_field("stats", "pubsub_channels")
                .to_string(),
            Raw::connect(port)
                .info_field("stats", "pubsub_patterns")
                .to_string(),
        ]);
    }
    assert_eq!(answers[1], answers[0]);
    // Distinct patterns (c0* c1* c2* z*), though z* is held on several nodes.
    assert_eq!(answers[0][6], ":4\r\n", "{:?}", answers[0]);
}

/// Kills the child on drop.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis_cli_subscribe_receives_what_another_client_publishes(b: Backend) {
    if !b.is_available() || !have_tool("redis-cli") {
        return;
    }
    let c = b.cluster(3);
    let port = c.proxy.port;
    let mut kid = Kid(Command::new("timeout")
        .args([
            "60",
            "redis-cli",
            "-p",
            &port.to_string(),
            "SUBSCRIBE",
            "news",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn_dying()
        .unwrap());
    let out = kid.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    wait_numsub(port, "news", 1);
    let mut p = conn(port);
    assert_eq!(
        p.cmd(&["PUBLISH", "news", "hello from the proxy"]),
        b":1\r\n"
    );
    let mut lines = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while !lines.iter().any(|l: &String| l == "hello from the proxy") {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => panic!("redis-cli printed only {lines:?}"),
        }
    }
    assert_eq!(
        &lines[..],
        [
            "subscribe",
            "news",
            "1",
            "message",
            "news",
            "hello from the proxy"
        ]
    );
}

fn pinned_limit_refuses_a_subscriber_and_gives_the_place_back(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = Cluster::over(vec![b.start()], "max_pinned_per_node = 1\n");
    let port = c.proxy.port;
    let mut a = conn(port);
    assert_eq!(
        call(&mut a, &["SUBSCRIBE", "x"], 1),
        "*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n"
    );
    let mut b = conn(port);
    let refused = call(&mut b, &["SUBSCRIBE", "x"], 1);
    assert!(
        refused.starts_with("-ERR max number of pinned connections"),
        "{refused}"
    );
    assert!(refused.contains("max_pinned_per_node"), "{refused}");
    // Not in subscribe mode after the refusal.
    assert_eq!(call(&mut b, &["GET", "k"], 1), "$-1\r\n");
    // The last unsubscribe releases the connection.
    assert_eq!(
        call(&mut a, &["UNSUBSCRIBE"], 1),
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:0\r\n"
    );
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = call(&mut b, &["SUBSCRIBE", "y"], 1);
        if r.starts_with("*3") {
            break;
        }
        assert!(Instant::now() < deadline, "never released: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A subscriber that disconnects releases its connection too.
    drop(b);
    let mut d = conn(port);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = call(&mut d, &["PSUBSCRIBE", "z*"], 1);
        if r.starts_with("*3") {
            break;
        }
        assert!(Instant::now() < deadline, "never released: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    c.proxy.assert_no_panic();
}

/// redis-py 5 (RESP2) and 8 (RESP3 and RESP2) `PubSub` with get_message and
/// listen(), and node-redis 6 subscribe in both protocols, unchanged.
fn unmodified_clients_subscribe_through_the_proxy(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(3);
    let port = c.proxy.port.to_string();
    let script = manifest().join("tests/clients/pubsub_py.py");
    for (v, protos) in [(5, &["2"][..]), (8, &["3", "2"][..])] {
        let Some(lib) = redis_py(v) else {
            continue;
        };
        let out = run_ok(
            Command::new("timeout")
                .args(["120", "python3"])
                .arg(&script)
                .arg(&port)
                .args(protos)
                .env("PYTHONPATH", &lib),
        );
        assert!(out.contains(&format!("redis-py {v}.")), "{out}");
    }
    if let Some(dir) = node_clients() {
        let out = run_ok(
            Command::new("timeout")
                .args(["120", "node"])
                .arg(dir.join("pubsub.js"))
                .arg(&port),
        );
        assert!(out.contains("redis6 6."), "{out}");
    }
    c.proxy.assert_no_panic();
}

crate::on_both_backends!(
    resp2_subscribe_mode_answers_like_one_redis_server,
    resp3_pushes_come_between_replies_never_inside_one,
    publish_reaches_subscribers_on_every_node_once,
    pubsub_introspection_equals_one_redis_server,
    redis_cli_subscribe_receives_what_another_client_publishes,
    pinned_limit_refuses_a_subscriber_and_gives_the_place_back,
    unmodified_clients_subscribe_through_the_proxy,
);
