//! Blocking commands through the proxy, over redis-server nodes: each
//! blocked client holds its own pinned connection to its keys' node, so
//! other clients go on; timeouts are the node's; a client that leaves
//! releases its connection and the node pops nothing for it; the bound on
//! pinned connections gives a clear error.

mod common;

use std::time::{Duration, Instant};

use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn conn(port: u16) -> RespConn {
    RespConn::connect_loopback(port, TIMEOUT).unwrap()
}

fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

#[test]
fn a_blocked_pop_wakes_on_a_push_while_other_clients_go_on() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    let port = c.proxy.port;
    let mut blocked = conn(port);
    blocked.send(&[b"BLPOP", b"q", b"0"]).unwrap();
    let mut other = conn(port);
    // The shared connections are not held by the blocked client.
    for i in 0..200 {
        let k = format!("k{i}");
        assert_eq!(other.cmd(&["SET", &k, "v"]), b"+OK\r\n");
        assert_eq!(other.cmd(&["GET", &k]), b"$1\r\nv\r\n");
    }
    assert_eq!(other.cmd(&["RPUSH", "q", "x"]), b":1\r\n");
    assert_eq!(
        text(&blocked.read_reply().unwrap()),
        "*2\r\n$1\r\nq\r\n$1\r\nx\r\n"
    );
    assert_eq!(other.cmd(&["LLEN", "q"]), b":0\r\n");
    // After it answered, the client goes on as usual.
    assert_eq!(blocked.cmd(&["GET", "k1"]), b"$1\r\nv\r\n");
}

#[test]
fn blocking_commands_answer_like_one_redis_server_including_timeouts() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    let redis = start_redis(free_port());
    let script: &[&[&str]] = &[
        &["BLPOP", "{b}none", "{b}none2", "0.2"],
        &["BRPOP", "{b}none", "0.2"],
        &["RPUSH", "{b}l", "a", "b", "c"],
        &["BLPOP", "{b}none", "{b}l", "1"],
        &["BRPOP", "{b}l", "1"],
        &["BLMOVE", "{b}l", "{b}m", "LEFT", "RIGHT", "1"],
        &["BRPOPLPUSH", "{b}m", "{b}l", "1"],
        &[
            "BLMPOP", "0.2", "2", "{b}none", "{b}l", "LEFT", "COUNT", "5",
        ],
        &["BLMPOP", "0.2", "1", "{b}none", "LEFT"],
        &["ZADD", "{b}z", "1", "a", "2", "b", "3", "c"],
        &["BZPOPMIN", "{b}z", "1"],
        &["BZPOPMAX", "{b}z", "1"],
        &["BZMPOP", "1", "1", "{b}z", "MIN"],
        &["BZPOPMIN", "{b}z", "0.2"],
        &["XADD", "{b}s", "1-1", "f", "v"],
        &["XREAD", "BLOCK", "200", "STREAMS", "{b}s", "0"],
        &["XREAD", "BLOCK", "200", "STREAMS", "{b}s", "$"],
        &["XGROUP", "CREATE", "{b}s", "g", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "200",
            "STREAMS",
            "{b}s",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "200",
            "STREAMS",
            "{b}s",
            ">",
        ],
        &["BLPOP", "{b}l", "-1"],
        &["BLPOP", "{b}l", "nan"],
        &["BLPOP", "{b}z", "0.2"],
        &["WAIT", "0", "0"],
    ];
    for proto in ["2", "3"] {
        let mut on_redis = conn(redis.port);
        let mut on_proxy = conn(c.proxy.port);
        on_redis.cmd(&["HELLO", proto]);
        on_proxy.cmd(&["HELLO", proto]);
        on_redis.cmd(&["FLUSHALL"]);
        on_proxy.cmd(&["FLUSHALL"]);
        for args in script {
            assert_eq!(
                text(&on_proxy.cmd(args)),
                text(&on_redis.cmd(args)),
                "RESP{proto} {args:?}"
            );
        }
    }
}

#[test]
fn keys_on_two_nodes_are_crossslot() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    let mut s = conn(c.proxy.port);
    let mut found = None;
    for i in 0..100 {
        let k = format!("b{i}");
        let r = s.cmd(&["BLPOP", "b0", &k, "0.01"]);
        if text(&r).starts_with("-CROSSSLOT") {
            found = Some(text(&r));
            break;
        }
    }
    assert_eq!(
        found.as_deref(),
        Some("-CROSSSLOT Keys in request don't hash to the same slot\r\n")
    );
}

#[test]
fn a_client_that_leaves_while_blocked_releases_its_connection_and_pops_nothing() {
    if !have_tool("redis-server") {
        return;
    }
    let nodes = vec![start_redis(free_port())];
    // `extra` lands inside [proxy].
    let c = Cluster::over(nodes, "max_pinned_per_node = 1\n");
    let port = c.proxy.port;
    let mut first = conn(port);
    first.send(&[b"BLPOP", b"q", b"0"]).unwrap();
    let mut second = conn(port);
    // Until the first one's BLPOP reached the node, wait for it to hold the pin.
    let deadline = Instant::now() + TIMEOUT;
    let refused = loop {
        let r = text(&second.cmd(&["BLPOP", "q", "0.05"]));
        if r.starts_with("-ERR max number of pinned connections") {
            break r;
        }
        assert!(Instant::now() < deadline, "never refused: {r}");
    };
    assert!(refused.contains("max_pinned_per_node"), "{refused}");
    drop(first);
    let mut admin = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    // The node saw the client go: only the proxy's own connections remain.
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = text(&second.cmd(&["BLPOP", "q", "0.05"]));
        if r == "*-1\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the pin never came back: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(admin.cmd(&["RPUSH", "q", "x"]), b":1\r\n");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        admin.cmd(&["LLEN", "q"]),
        b":1\r\n",
        "nobody popped for the client that left"
    );
    assert_eq!(
        text(&second.cmd(&["BLPOP", "q", "1"])),
        "*2\r\n$1\r\nq\r\n$1\r\nx\r\n"
    );
}

#[test]
fn a_command_blocked_on_keys_that_a_topology_change_moves_is_aborted_with_an_error() {
    if !have_tool("redis-server") {
        return;
    }
    let nodes = vec![start_redis(free_port()), start_redis(free_port())];
    // `extra` lands inside [proxy]; the copy is slow enough to watch.
    let c = Cluster::over(nodes, "[migration]\nmax_keys_per_sec = 2000\nbatch = 100\n");
    let port = c.proxy.port;
    let extra = start_redis(free_port());
    set_keys(port, "fill:", 2000);
    let mut admin = conn(port);
    assert_eq!(
        admin.cmd(&["CLUSTER", "ADDNODE", &extra.addr(), "NAME", "n3"]),
        b"+OK\r\n"
    );
    wait_ring_ok(port);
    let moved = (0..1000)
        .map(|i| format!("q{i}"))
        .find(|k| text(&admin.cmd(&["CLUSTER", "KEYNODE", k])).contains("n3"))
        .unwrap();
    let mut blocked = RespConn::connect_loopback(port, Duration::from_secs(60)).unwrap();
    blocked.send(&[b"BLPOP", moved.as_bytes(), b"0"]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(admin.cmd(&["CLUSTER", "REMOVENODE", "n3"]), b"+OK\r\n");
    let r = text(&blocked.read_reply().unwrap());
    assert!(
        r.starts_with("-ERR the blocking command was aborted: a topology change moved its keys"),
        "{r}"
    );
    // Retried, it blocks at the new owner and wakes on a push there.
    blocked.send(&[b"BLPOP", moved.as_bytes(), b"0"]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(admin.cmd(&["RPUSH", &moved, "x"]), b":1\r\n");
    assert_eq!(
        text(&blocked.read_reply().unwrap()),
        format!("*2\r\n${}\r\n{moved}\r\n$1\r\nx\r\n", moved.len())
    );
}

fn wait_ring_ok(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let info = text(&conn(port).cmd(&["CLUSTER", "RINGINFO"]));
        if info.contains("\r\nstate:ok\r\n")
            || info.starts_with("state:ok")
            || info.contains("\nstate:ok")
        {
            return;
        }
        assert!(Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_draining_proxy_closes_blocked_clients_instead_of_waiting_for_them() {
    if !have_tool("redis-server") {
        return;
    }
    let nodes = vec![start_redis(free_port())];
    // `extra` lands inside [proxy]: a drain far longer than the test waits.
    let mut c = Cluster::over(nodes, "drain_timeout_ms = 600000\n");
    let mut blocked = RespConn::connect_loopback(c.proxy.port, Duration::from_secs(60)).unwrap();
    blocked.send(&[b"BLPOP", b"q", b"0"]).unwrap();
    let mut other = conn(c.proxy.port);
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    std::thread::sleep(Duration::from_millis(200));
    let status = std::process::Command::new("kill")
        .args(["-TERM", &c.proxy.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let r = blocked.read_reply();
    assert!(
        matches!(&r, Err(shardis::client::ClientError::Closed)),
        "closed, not answered and not left waiting for the drain: {r:?}"
    );
    c.proxy.kill();
}
