//! Blocking commands through the proxy, over built-in nodes and over
//! redis-server nodes alike: each blocked client holds its own pinned
//! connection to its keys' node, so other clients go on; timeouts are the
//! node's; a client that leaves releases its connection and the node pops
//! nothing for it; the bound on pinned connections gives a clear error;
//! a thousand blocked clients each get exactly one pushed element.

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
    for backend in backends() {
        a_blocked_pop_wakes_on_a_push(backend);
    }
}

fn a_blocked_pop_wakes_on_a_push(backend: Backend) {
    let c = Cluster::over(backend.nodes(3), "");
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
    let redis = start_redis(free_port());
    for backend in backends() {
        answers_like_one_redis_server(backend, &redis);
    }
}

fn answers_like_one_redis_server(backend: Backend, redis: &Proc) {
    let c = Cluster::over(backend.nodes(3), "");
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
        &["WAIT", "1", "100"],
        &["RPUSH", "{b}l", "x"],
        &["BLPOP", "{b}l", "0.01"],
        &["BLMPOP", "0.01", "1", "{b}l", "RIGHT"],
        &["BZMPOP", "0.01", "1", "{b}z", "MAX", "COUNT", "2"],
        &["BLMOVE", "{b}l", "{b}m", "LEFT", "UP", "1"],
        &["BLPOP", "{b}l", "1e400"],
    ];
    for proto in ["2", "3"] {
        let mut on_redis = conn(redis.port);
        let mut on_proxy = conn(c.proxy.port);
        on_redis.cmd(&["HELLO", proto]);
        on_proxy.cmd(&["HELLO", proto]);
        on_redis.cmd(&["FLUSHALL"]);
        on_proxy.cmd(&["FLUSHALL"]);
        for args in script {
            // Streams are served by redis-server nodes only.
            let stream = args[0].starts_with('X');
            if stream && backend == Backend::Builtin {
                continue;
            }
            assert_eq!(
                text(&on_proxy.cmd(args)),
                text(&on_redis.cmd(args)),
                "RESP{proto} {args:?} over {backend:?}"
            );
        }
    }
}

/// Pops over keys on several nodes are served (`tests/blocking_cross.rs`);
/// a move between two nodes is not.
#[test]
fn a_move_between_two_nodes_is_crossslot() {
    for backend in backends() {
        crossslot(backend);
    }
}

fn crossslot(backend: Backend) {
    let c = Cluster::over(backend.nodes(3), "");
    let mut s = conn(c.proxy.port);
    let mut found = None;
    for i in 0..100 {
        let k = format!("b{i}");
        let r = s.cmd(&["BLMOVE", "b0", &k, "LEFT", "LEFT", "0.01"]);
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
    for backend in backends() {
        leaving_client_pops_nothing(backend);
    }
}

fn leaving_client_pops_nothing(backend: Backend) {
    let nodes = backend.nodes(1);
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
    assert_pin_given_back(&mut second, &mut admin, "q", "the client that left");
    assert_eq!(
        text(&second.cmd(&["BLPOP", "q", "1"])),
        "*2\r\n$1\r\nq\r\n$1\r\nx\r\n"
    );
}

#[test]
fn a_client_that_sends_a_blocking_pop_and_eof_together_is_closed_as_redis_closes_it() {
    if have_tool("redis-server") {
        let redis = start_redis(free_port());
        assert_closed_after_blpop_and_eof(redis.port, "redis-server");
    }
    for backend in backends() {
        // A shallow pipeline: the EOF is read while the BLPOP still waits
        // in the query buffer behind the PINGs.
        let extra = "max_pinned_per_node = 1\npipeline_depth = 2\n";
        let c = Cluster::over(backend.nodes(1), extra);
        assert_closed_after_blpop_and_eof(c.proxy.port, "the proxy");
        let mut second = conn(c.proxy.port);
        let mut admin = RespConn::connect_loopback(c.proxy.port, TIMEOUT).unwrap();
        assert_pin_given_back(&mut second, &mut admin, "q", "the client that left");
    }
}

/// Writes ten PINGs and `BLPOP q 0` and shuts the write side in one go:
/// the server answers the PINGs and closes the connection.
fn assert_closed_after_blpop_and_eof(port: u16, who: &str) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut burst = b"PING\r\n".repeat(10);
    burst.extend_from_slice(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n");
    s.write_all(&burst).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    let r = s.read_to_end(&mut got);
    assert!(r.is_ok(), "{who} kept the connection open: {r:?}");
    assert!(
        got == b"+PONG\r\n".repeat(10),
        "{who} answered {:?}",
        String::from_utf8_lossy(&got)
    );
}

#[test]
fn a_command_blocked_on_keys_that_a_topology_change_moves_is_aborted_with_an_error() {
    for backend in backends() {
        aborted_by_topology_change(backend);
    }
}

fn aborted_by_topology_change(backend: Backend) {
    let nodes = backend.nodes(2);
    // `extra` lands inside [proxy]; the copy is slow enough to watch.
    let c = Cluster::over(nodes, "[migration]\nmax_keys_per_sec = 2000\nbatch = 100\n");
    let port = c.proxy.port;
    let extra = backend.start();
    set_keys(port, "fill:", 2000);
    let mut admin = conn(port);
    assert_eq!(
        admin.cmd(&["CLUSTER", "ADDNODE", &extra.addr(), "NAME", "n3"]),
        b"+OK\r\n"
    );
    wait_state_ok(&mut connect(port), 120);
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

#[test]
fn a_draining_proxy_closes_blocked_clients_instead_of_waiting_for_them() {
    for backend in backends() {
        draining_proxy_closes_blocked_clients(backend);
    }
}

fn draining_proxy_closes_blocked_clients(backend: Backend) {
    let nodes = backend.nodes(1);
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

/// Clients blocked at once in the thousand-client test.
const MANY: usize = 1000;

#[test]
fn a_thousand_clients_blocked_through_the_proxy_each_get_one_pushed_element() {
    for backend in backends() {
        thousand_blocked_clients(backend);
    }
}

fn thousand_blocked_clients(backend: Backend) {
    // Room for every blocked client's pinned connection and the pusher.
    let c = Cluster::over(
        backend.nodes(2),
        "max_pinned_per_node = 1100\nmax_clients = 1200\n",
    );
    let addr = c.proxy.addr();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let wait = Duration::from_secs(120);
    let tasks: Vec<_> = rt.block_on(async {
        let mut tasks = Vec::with_capacity(MANY);
        for _ in 0..MANY {
            let mut conn = shardis::client::Conn::connect(&addr, wait).await.unwrap();
            conn.queue_raw(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n");
            conn.flush().await.unwrap();
            tasks.push(tokio::spawn(async move { conn.read_reply().await }));
        }
        tasks
    });
    wait_blocked_on_nodes(&c.nodes, MANY as u64, wait);
    let mut pusher = Raw::connect(c.proxy.port);
    let mut pushed = std::collections::HashSet::new();
    for batch in 0..MANY / 100 {
        let items: Vec<String> = (0..100).map(|i| format!("e{}", batch * 100 + i)).collect();
        let mut args = vec!["RPUSH", "q"];
        args.extend(items.iter().map(String::as_str));
        let r = pusher.call(&args);
        // Blocked clients take elements as soon as they arrive.
        assert!(r.starts_with(':'), "{r}");
        pushed.extend(items);
    }
    let replies: Vec<_> = rt.block_on(async {
        let mut replies = Vec::with_capacity(MANY);
        for t in tasks {
            replies.push(t.await.unwrap());
        }
        replies
    });
    let mut got = std::collections::HashSet::new();
    for r in replies {
        let r = text(&r.unwrap_or_else(|e| panic!("{backend:?}: a blocked client got {e}")));
        let item = r
            .strip_prefix("*2\r\n$1\r\nq\r\n$")
            .and_then(|rest| rest.split("\r\n").nth(1))
            .unwrap_or_else(|| panic!("{backend:?}: {r:?}"))
            .to_string();
        assert!(
            got.insert(item.clone()),
            "{backend:?}: {item} delivered twice"
        );
    }
    assert_eq!(
        got, pushed,
        "{backend:?}: every element to exactly one client"
    );
    pusher.check(&["LLEN", "q"], ":0\r\n");
    wait_blocked_on_nodes(&c.nodes, 0, TIMEOUT);
}

#[test]
fn blocking_past_max_pinned_per_node_gives_errors_never_a_hang() {
    for backend in backends() {
        past_max_pinned(backend);
    }
}

fn past_max_pinned(backend: Backend) {
    let c = Cluster::over(backend.nodes(1), "max_pinned_per_node = 3\n");
    let port = c.proxy.port;
    let mut blocked: Vec<RespConn> = (0..3).map(|_| conn(port)).collect();
    // One at a time: the node serves blocked clients in the order they
    // blocked, and three clients sent together may reach it in any order.
    for (i, b) in blocked.iter_mut().enumerate() {
        b.send(&[b"BLPOP", b"q", b"0"]).unwrap();
        wait_blocked_on_nodes(&c.nodes, i as u64 + 1, TIMEOUT);
    }
    let mut refused = Vec::new();
    let tries: [&[&str]; 4] = [
        &["BLPOP", "q", "0"],
        &["BZPOPMIN", "z", "0"],
        &["BLMOVE", "q", "d", "LEFT", "LEFT", "0"],
        &["WAIT", "1", "0"],
    ];
    for i in 0..20 {
        // A fresh client each time: its read times out (a failure) if it hangs.
        let r = text(&conn(port).cmd(tries[i % tries.len()]));
        assert!(
            r.starts_with("-ERR max number of pinned connections reached for node node1"),
            "{backend:?}: {r}"
        );
        refused.push(r);
    }
    // The shared connections are untouched, and the blocked clients served.
    let mut other = conn(port);
    assert_eq!(other.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(other.cmd(&["RPUSH", "q", "a", "b", "c"]), b":3\r\n");
    let got: Vec<String> = blocked
        .iter_mut()
        .map(|b| text(&b.read_reply().unwrap()))
        .collect();
    let want = ["a", "b", "c"].map(|v| format!("*2\r\n$1\r\nq\r\n$1\r\n{v}\r\n"));
    assert_eq!(got, want, "{backend:?}");
    // Their places come back.
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = text(&other.cmd(&["BLPOP", "q", "0.01"]));
        if r == "*-1\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "{backend:?}: still refused: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn redis_py_blocking_pops_with_timeouts_work_through_the_proxy() {
    let (Some(py5), Some(py8)) = (redis_py(5), redis_py(8)) else {
        return;
    };
    for backend in backends() {
        let c = Cluster::over(backend.nodes(3), "");
        for (lib, proto) in [(&py5, "2"), (&py8, "2"), (&py8, "3")] {
            let out = run_ok(
                std::process::Command::new("timeout")
                    .args(["120", "python3"])
                    .arg(manifest().join("tests/clients/redis_py_blocking.py"))
                    .args([c.proxy.port.to_string().as_str(), proto])
                    .env("PYTHONPATH", lib),
            );
            assert!(
                out.contains("blocking ok"),
                "{backend:?} {}: {out}",
                lib.display()
            );
        }
    }
}
