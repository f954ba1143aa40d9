//! INFO's `blocked_clients` on the proxy counts its clients waiting in a
//! blocking command (as Redis counts its own), so tools and test suites that
//! wait for a client to block see it: a client counts once while it waits,
//! and stops counting when it is served or leaves. On both kinds of node.
//! CLIENT UNBLOCK, given the proxy's id of a blocked client, ends its wait
//! as Redis would.

mod common;

use std::time::{Duration, Instant};

use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Waits until the proxy's INFO says `n` clients are blocked.
fn wait_blocked(port: u16, n: u64) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let now = Raw::connect(port).info_field("clients", "blocked_clients");
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "{now} clients blocked, not {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn info_counts_the_clients_blocked_through_the_proxy() {
    for backend in backends() {
        counts_blocked_clients(backend);
    }
}

fn counts_blocked_clients(backend: Backend) {
    let c = backend.cluster(3);
    let port = c.proxy.port;
    wait_blocked(port, 0);
    let mut pop = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    pop.send(&[b"BLPOP", b"q", b"0"]).unwrap();
    let mut zpop = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    zpop.send(&[b"BZPOPMIN", b"z", b"0"]).unwrap();
    let leaver = {
        let mut l = RespConn::connect_loopback(port, TIMEOUT).unwrap();
        l.send(&[b"BRPOP", b"gone", b"0"]).unwrap();
        l
    };
    wait_blocked(port, 3);
    drop(leaver);
    wait_blocked(port, 2);

    let mut other = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    assert_eq!(other.cmd(&["RPUSH", "q", "x"]), b":1\r\n");
    assert_eq!(pop.read_reply().unwrap(), b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    wait_blocked(port, 1);
    assert_eq!(other.cmd(&["ZADD", "z", "1", "m"]), b":1\r\n");
    assert_eq!(
        zpop.read_reply().unwrap(),
        b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n1\r\n"
    );
    wait_blocked(port, 0);
}

#[test]
fn info_counts_the_blocked_clients_with_a_timeout_in_the_timeout_table() {
    let c = Backend::Builtin.cluster(3);
    let port = c.proxy.port;
    let table = || Raw::connect(port).info_field("clients", "clients_in_timeout_table");
    assert_eq!(table(), 0);
    let mut forever = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    forever.send(&[b"BLPOP", b"q", b"0"]).unwrap();
    let mut timed = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    timed
        .send(&[b"BLMPOP", b"30", b"1", b"q2", b"LEFT"])
        .unwrap();
    let mut xread = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    xread
        .send(&[b"XREAD", b"BLOCK", b"30000", b"STREAMS", b"s", b"$"])
        .unwrap();
    wait_blocked(port, 3);
    assert_eq!(table(), 2);
    // Each built-in node counts its own (the proxy's pinned connections).
    let on_nodes: u64 = c
        .nodes
        .iter()
        .map(|n| Raw::connect(n.port).info_field("clients", "clients_in_timeout_table"))
        .sum();
    assert_eq!(on_nodes, 2);
    drop(timed);
    drop(xread);
    wait_blocked(port, 1);
    assert_eq!(table(), 0);
    drop(forever);
}

/// A blocked client, unblocked by another: every reply of both, in order.
fn unblock_script(port: u16) -> Vec<String> {
    let wait = |n| {
        let deadline = Instant::now() + TIMEOUT;
        while Raw::connect(port).info_field("clients", "blocked_clients") != n {
            assert!(Instant::now() < deadline, "not {n} blocked");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let mut r = Raw::connect(port);
    let mut b = Raw::connect(port);
    let id = b.call(&["CLIENT", "ID"]);
    let id = id.trim().trim_start_matches(':').to_string();
    let mut seen = Vec::new();
    let pops: [&[&[u8]]; 4] = [
        &[b"BLPOP", b"l", b"0"],
        &[b"BLMPOP", b"0", b"1", b"l", b"LEFT"],
        &[b"BZPOPMIN", b"z", b"0"],
        &[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"],
    ];
    for pop in pops {
        for reason in [None, Some("TIMEOUT"), Some("ERROR")] {
            b.send(pop);
            wait(1);
            let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
            args.extend(reason);
            seen.push(r.call(&args));
            seen.push(String::from_utf8_lossy(&b.reply()).into_owned());
            wait(0);
        }
    }
    seen.push(r.call(&["CLIENT", "UNBLOCK", "asd"]));
    seen.push(r.call(&["CLIENT", "UNBLOCK", &id]));
    seen.push(r.call(&["CLIENT", "UNBLOCK", &id, "SOON"]));
    seen.push(r.call(&["CLIENT", "UNBLOCK", "999999"]));
    // Still served afterwards.
    b.send(&[b"BLPOP", b"l", b"0"]);
    wait(1);
    seen.push(r.call(&["LPUSH", "l", "foo"]));
    seen.push(String::from_utf8_lossy(&b.reply()).into_owned());
    seen
}

#[test]
fn client_unblock_through_the_proxy_answers_as_redis() {
    let ours = unblock_script(Backend::Builtin.cluster(3).proxy.port);
    assert!(ours[0] == ":1\r\n" && ours[1] == "*-1\r\n", "{ours:?}");
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    assert_eq!(ours, unblock_script(redis.port));
    assert_eq!(ours, unblock_script(Backend::Redis.cluster(2).proxy.port));
}
