//! Blocking pops whose keys live on several nodes (BLPOP, BRPOP, BLMPOP,
//! BZPOPMIN, BZPOPMAX, BZMPOP), through the proxy over built-in nodes and
//! over redis-server nodes: replies shaped as one redis-server shapes them
//! (RESP2 and RESP3), timeouts, a push from another client (or straight to
//! a node) wakes the waiter, INFO and CLIENT LIST count it, CLIENT UNBLOCK
//! ends it, a client that leaves pops nothing, and under concurrent
//! producers and consumers every element is popped exactly once.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::compare::Compare;
use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn conn(port: u16) -> RespConn {
    RespConn::connect_loopback(port, TIMEOUT).unwrap()
}

fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

/// `n` keys `{prefix}{i}`, each owned by a different node (CLUSTER KEYNODE).
fn spread(port: u16, prefix: &str, n: usize) -> Vec<String> {
    let mut admin = Raw::connect(port);
    let mut seen = HashSet::new();
    let mut keys = Vec::new();
    for i in 0..1000 {
        let k = format!("{prefix}{i}");
        if seen.insert(admin.call(&["CLUSTER", "KEYNODE", &k])) {
            keys.push(k);
            if keys.len() == n {
                return keys;
            }
        }
    }
    panic!("fewer than {n} nodes own keys {prefix}*");
}

/// Waits until the proxy's INFO says `n` clients are blocked.
fn wait_blocked(port: u16, n: u64) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let now = Raw::connect(port).info_field("clients", "blocked_clients");
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "{now} clients blocked, not {n}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn pops_over_keys_on_several_nodes_answer_like_one_redis_server() {
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    for backend in backends() {
        let c = backend.cluster(3);
        for proto in ["2", "3"] {
            answers_like_redis(c.proxy.port, redis.port, proto, backend);
        }
    }
}

fn answers_like_redis(ours: u16, theirs: u16, proto: &str, backend: Backend) {
    let k = spread(ours, "k", 3);
    let (a, b, c) = (&k[0], &k[1], &k[2]);
    let mut cmp = Compare::open_empty(ours, theirs, proto);
    let steps: Vec<Vec<&str>> = vec![
        vec!["RPUSH", b, "x", "y", "z"],
        vec!["BLPOP", a, b, c, "0"],
        vec!["BRPOP", a, b, c, "0"],
        vec!["RPUSH", c, "c1"],
        vec!["BLPOP", a, c, b, "0"],
        vec!["RPUSH", a, "a1", "a2", "a3"],
        vec!["RPUSH", c, "c1", "c2"],
        vec!["BLMPOP", "0", "3", b, c, a, "LEFT", "COUNT", "2"],
        vec!["BLMPOP", "0", "3", b, a, c, "RIGHT", "COUNT", "10"],
        vec!["BLMPOP", "0", "3", b, a, c, "LEFT"],
        vec!["BLPOP", a, b, c, "0.05"],
        vec!["BLMPOP", "0.05", "2", a, b, "LEFT"],
        vec!["ZADD", b, "1", "m1", "2", "m2", "3", "m3"],
        vec!["ZADD", c, "1.5", "n1"],
        vec!["BZPOPMIN", a, b, c, "0"],
        vec!["BZPOPMAX", a, b, c, "0"],
        vec!["BZPOPMIN", a, c, b, "0"],
        vec!["BZMPOP", "0", "3", a, c, b, "MAX", "COUNT", "10"],
        vec!["BZPOPMAX", a, b, c, "0.05"],
        vec!["BZMPOP", "0.05", "2", a, b, "MIN"],
        // Redis's errors: the timeout first, then the other arguments.
        vec!["BLPOP", a, b, "-1"],
        vec!["BLPOP", a, b, "abc"],
        vec!["BZPOPMIN", a, b, "inf"],
        vec!["BLMPOP", "-1", "2", a, b, "LEFT"],
        vec!["BLMPOP", "0", "2", a, b, "MIDDLE"],
        vec!["BLMPOP", "0", "2", a, b, "LEFT", "COUNT", "0"],
        vec!["BZMPOP", "0", "2", a, b, "MAX", "COUNT", "-1"],
        vec!["BZMPOP", "0", "2", a, b, "MAX", "junk"],
        vec!["SET", b, "s"],
        vec!["BLPOP", a, b, c, "0"],
        vec!["BZPOPMIN", a, b, "0"],
        vec!["RPUSH", c, "after"],
        vec!["BLPOP", a, c, b, "0"],
        vec!["DEL", b],
    ];
    for s in &steps {
        cmp.step(&format!("{backend:?} RESP{proto}"), s);
    }
    cmp.finish(&format!("cross-node pops over {backend:?}, RESP{proto}"));
}

#[test]
fn a_push_from_another_client_wakes_the_waiter_at_once() {
    for backend in backends() {
        let c = backend.cluster(3);
        let port = c.proxy.port;
        let k = spread(port, "w", 3);
        let mut other = conn(port);
        for round in 0..5 {
            let mut waiter = conn(port);
            waiter
                .send(&[
                    b"BLPOP",
                    k[0].as_bytes(),
                    k[1].as_bytes(),
                    k[2].as_bytes(),
                    b"0",
                ])
                .unwrap();
            wait_blocked(port, 1);
            let target = &k[round % 3];
            let sent = Instant::now();
            assert_eq!(other.cmd(&["RPUSH", target, "v"]), b":1\r\n");
            let r = waiter.read_reply().unwrap();
            let took = sent.elapsed();
            assert_eq!(
                text(&r),
                format!("*2\r\n${}\r\n{target}\r\n$1\r\nv\r\n", target.len())
            );
            println!("{backend:?}: woken {took:?} after the push");
            assert!(took < Duration::from_millis(1000), "woken after {took:?}");
            wait_blocked(port, 0);
        }
    }
}

#[test]
fn a_push_straight_to_a_node_is_found_by_the_poll() {
    for backend in backends() {
        let c = backend.cluster(3);
        let port = c.proxy.port;
        let k = spread(port, "n", 2);
        let owner =
            text(&Raw::connect(port).call_bytes(&[b"CLUSTER", b"KEYNODE", k[1].as_bytes()]));
        // Nodes are named node1, node2, … in order.
        let node = (0..c.nodes.len())
            .find(|i| owner.contains(&format!("node{}\r\n", i + 1)))
            .map(|i| &c.nodes[i])
            .unwrap_or_else(|| panic!("owner {owner:?} is none of the nodes"));
        let mut waiter = conn(port);
        waiter
            .send(&[b"BZPOPMAX", k[0].as_bytes(), k[1].as_bytes(), b"0"])
            .unwrap();
        wait_blocked(port, 1);
        Raw::connect(node.port).check(&["ZADD", &k[1], "7", "m"], ":1\r\n");
        let sent = Instant::now();
        let r = waiter.read_reply().unwrap();
        assert_eq!(
            text(&r),
            format!(
                "*3\r\n${}\r\n{}\r\n$1\r\nm\r\n$1\r\n7\r\n",
                k[1].len(),
                k[1]
            )
        );
        assert!(sent.elapsed() < Duration::from_secs(2));
    }
}

#[test]
fn a_timed_pop_times_out_with_nil_in_either_protocol() {
    for backend in backends() {
        let c = backend.cluster(3);
        let port = c.proxy.port;
        let k = spread(port, "t", 2);
        for (proto, nil) in [("2", "*-1\r\n"), ("3", "_\r\n")] {
            let mut p = Raw::connect(port);
            p.call(&["HELLO", proto]);
            for cmd in [
                vec!["BLPOP", &k[0], &k[1], "0.3"],
                vec!["BZMPOP", "0.3", "2", &k[0], &k[1], "MIN"],
            ] {
                let started = Instant::now();
                assert_eq!(p.call(&cmd), nil, "{cmd:?} RESP{proto}");
                let took = started.elapsed();
                assert!(took >= Duration::from_millis(300), "{cmd:?} after {took:?}");
                assert!(took < Duration::from_secs(3), "{cmd:?} after {took:?}");
            }
        }
    }
}

#[test]
fn a_waiter_counts_as_blocked_and_client_unblock_ends_it() {
    for backend in backends() {
        let c = backend.cluster(3);
        let port = c.proxy.port;
        let k = spread(port, "u", 2);
        let mut admin = Raw::connect(port);
        for (reason, want) in [
            (None, "*-1\r\n"),
            (Some("TIMEOUT"), "*-1\r\n"),
            (
                Some("ERROR"),
                "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
            ),
        ] {
            let mut w = conn(port);
            let id = text(&w.cmd(&["CLIENT", "ID"]));
            let id = id.trim().trim_start_matches(':').to_string();
            w.send(&[
                b"BLMPOP",
                b"30",
                b"2",
                k[0].as_bytes(),
                k[1].as_bytes(),
                b"LEFT",
            ])
            .unwrap();
            wait_blocked(port, 1);
            assert_eq!(admin.info_field("clients", "clients_in_timeout_table"), 1);
            let list = admin.call(&["CLIENT", "LIST", "ID", &id]);
            assert!(list.contains("flags=b"), "{list}");
            let mut req = vec!["CLIENT", "UNBLOCK", &id];
            req.extend(reason);
            admin.check(&req, ":1\r\n");
            assert_eq!(text(&w.read_reply().unwrap()), want);
            wait_blocked(port, 0);
            assert_eq!(admin.info_field("clients", "clients_in_timeout_table"), 0);
            admin.check(&["CLIENT", "UNBLOCK", &id], ":0\r\n");
            // The client goes on as usual.
            assert_eq!(w.cmd(&["PING"]), b"+PONG\r\n");
        }
    }
}

#[test]
fn a_client_that_leaves_while_blocked_pops_nothing() {
    for backend in backends() {
        let c = backend.cluster(3);
        let port = c.proxy.port;
        let k = spread(port, "d", 3);
        let mut leavers = Vec::new();
        for _ in 0..3 {
            let mut l = conn(port);
            l.send(&[
                b"BLPOP",
                k[0].as_bytes(),
                k[1].as_bytes(),
                k[2].as_bytes(),
                b"0",
            ])
            .unwrap();
            leavers.push(l);
        }
        wait_blocked(port, 3);
        drop(leavers);
        wait_blocked(port, 0);
        let mut other = Raw::connect(port);
        for key in &k {
            other.check(&["RPUSH", key, "kept"], ":1\r\n");
        }
        // Longer than a poll: a leftover waiter would have popped by then.
        std::thread::sleep(Duration::from_millis(400));
        for key in &k {
            other.check(&["LLEN", key], ":1\r\n");
        }
    }
}

#[test]
fn inside_multi_a_cross_node_pop_does_not_block() {
    for backend in backends() {
        let c = backend.cluster(3);
        let port = c.proxy.port;
        let k = spread(port, "m", 2);
        let mut p = Raw::connect(port);
        p.check(&["MULTI"], "+OK\r\n");
        let queued = p.call(&["BLPOP", &k[0], &k[1], "0"]);
        let exec = p.call(&["EXEC"]);
        // Refused across nodes (a transaction lives on one node), never blocked.
        assert!(
            queued.starts_with("-CROSSSLOT") || exec.starts_with("-"),
            "{queued:?} {exec:?}"
        );
        p.check(&["PING"], "+PONG\r\n");
    }
}

const ELEMENTS: usize = 10_000;
const PRODUCERS: usize = 4;

#[test]
fn concurrent_producers_and_cross_node_consumers_pop_every_element_once() {
    for backend in backends() {
        exactly_once(backend);
    }
}

fn exactly_once(backend: Backend) {
    let c = backend.cluster(3);
    let port = c.proxy.port;
    let lists = spread(port, "l", 3);
    let zsets = spread(port, "z", 3);
    let popped: Arc<Mutex<Vec<String>>> = Arc::default();
    let started = Instant::now();
    let mut consumers = Vec::new();
    for i in 0..6 {
        let (lists, zsets, popped) = (lists.clone(), zsets.clone(), popped.clone());
        consumers.push(std::thread::spawn(move || {
            let mut p = Raw::connect(port);
            let mut idle = 0;
            // Ends after two idle seconds in a row (producers done), or at a cap.
            for _ in 0..ELEMENTS * 2 {
                let r = if i % 2 == 0 {
                    let mut req = vec!["BLPOP"];
                    req.extend(lists.iter().map(String::as_str));
                    req.push("1");
                    p.call(&req)
                } else {
                    let mut req = vec!["BZMPOP", "1", "3"];
                    req.extend(zsets.iter().map(String::as_str));
                    req.extend(["MIN", "COUNT", "3"]);
                    p.call(&req)
                };
                if r == "*-1\r\n" {
                    idle += 1;
                    if idle == 2 {
                        break;
                    }
                    continue;
                }
                idle = 0;
                let got: Vec<String> = r
                    .split("\r\n")
                    .filter(|l| l.starts_with('e'))
                    .map(String::from)
                    .collect();
                assert!(!got.is_empty(), "{r:?}");
                popped.lock().unwrap().extend(got);
            }
        }));
    }
    let mut producers = Vec::new();
    for t in 0..PRODUCERS {
        let (lists, zsets) = (lists.clone(), zsets.clone());
        producers.push(std::thread::spawn(move || {
            let mut p = Raw::connect(port);
            for n in (t..ELEMENTS).step_by(PRODUCERS) {
                let e = format!("e{n}");
                if n % 2 == 0 {
                    let r = p.call(&["RPUSH", &lists[n % 3], &e]);
                    assert!(r.starts_with(':'), "{r:?}");
                } else {
                    p.check(&["ZADD", &zsets[n % 3], "0", &e], ":1\r\n");
                }
            }
        }));
    }
    for p in producers {
        p.join().unwrap();
    }
    for c in consumers {
        c.join().unwrap();
    }
    let popped = popped.lock().unwrap();
    let distinct: HashSet<&String> = popped.iter().collect();
    println!(
        "{backend:?}: {} popped ({} distinct) of {ELEMENTS} in {:?}",
        popped.len(),
        distinct.len(),
        started.elapsed()
    );
    assert_eq!(popped.len(), distinct.len(), "an element was popped twice");
    assert_eq!(popped.len(), ELEMENTS, "elements were lost or left");
}

#[test]
fn a_node_joining_while_a_pop_waits_does_not_break_it() {
    for backend in backends() {
        let mut c = backend.cluster(3);
        let port = c.proxy.port;
        // Many keys, so that the join moves some of them.
        let keys: Vec<String> = (0..40).map(|i| format!("j{i}")).collect();
        let mut waiter = conn(port);
        let mut req: Vec<&[u8]> = vec![b"BLPOP"];
        req.extend(keys.iter().map(|k| k.as_bytes()));
        req.push(b"0");
        waiter.send(&req).unwrap();
        wait_blocked(port, 1);
        let joined = backend.start();
        let mut admin = c.client();
        add_node(&mut admin, &joined.addr(), "node4");
        wait_state_ok(&mut admin, 30);
        c.nodes.push(joined);
        // A key the new node owns now, pushed through the proxy.
        let mut raw = Raw::connect(port);
        let moved = keys
            .iter()
            .find(|k| raw.call(&["CLUSTER", "KEYNODE", k]).contains("node4"))
            .expect("the new node owns one of 40 keys");
        raw.check(&["RPUSH", moved, "after-join"], ":1\r\n");
        assert_eq!(
            text(&waiter.read_reply().unwrap()),
            format!("*2\r\n${}\r\n{moved}\r\n$10\r\nafter-join\r\n", moved.len())
        );
        raw.check(&["LLEN", moved], ":0\r\n");
    }
}
