//! MULTI / EXEC / DISCARD / WATCH / UNWATCH through the proxy, over
//! redis-server and built-in nodes, and on a built-in node directly: the
//! same bytes as one redis-server where behaviour should match, CROSSSLOT
//! for a key on another node, WATCH seeing another client's write, the bound on pinned connections, and a topology change
//! in the middle of a transaction.

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

/// The replies to `script`, one request after another, on a fresh connection.
fn replies(port: u16, script: &[&[&str]]) -> Vec<String> {
    let mut c = conn(port);
    script.iter().map(|args| text(&c.cmd(args))).collect()
}

/// The owner node's name of `key`.
fn owner(port: u16, key: &str) -> String {
    let r = text(&conn(port).cmd(&["CLUSTER", "KEYNODE", key]));
    r.lines().nth(1).unwrap_or_default().to_string()
}

/// Two keys the ring puts on different nodes.
fn keys_on_two_nodes(port: u16) -> (String, String) {
    let a = "tx:0".to_string();
    let oa = owner(port, &a);
    for i in 1..1000 {
        let b = format!("tx:{i}");
        if owner(port, &b) != oa {
            return (a, b);
        }
    }
    panic!("every key on one node");
}

/// Every transaction reply Redis gives, errors included.
const SCRIPT: &[&[&str]] = &[
    &["EXEC"],
    &["DISCARD"],
    &["MULTI"],
    &["MULTI"],
    &["WATCH", "{t}a"],
    &["SET", "{t}a", "1"],
    &["GET"],
    &["NOSUCHCOMMAND", "x"],
    &["EXEC"],
    &["GET", "{t}a"],
    &["MULTI"],
    &["SET", "{t}a", "1"],
    &["INCR", "{t}a"],
    &["LPUSH", "{t}l", "x", "y"],
    &["GET", "{t}l"],
    &["PING"],
    &["ECHO", "hi"],
    &["MGET", "{t}a", "{t}b"],
    &["EXEC"],
    &["MULTI"],
    &["SET", "{t}a", "2"],
    &["DISCARD"],
    &["GET", "{t}a"],
    &["WATCH", "{t}a", "{t}b"],
    &["UNWATCH"],
    &["MULTI"],
    &["EXEC"],
    &["MULTI"],
    &["INCR", "{t}a"],
    &["RESET"],
    &["EXEC"],
    &["EXEC", "x"],
    &["MULTI"],
    &["SET", "{t}a", "5"],
    &["EXEC", "x"],
    &["EXEC"],
    &["MULTI"],
    &["DISCARD", "x"],
    &["WATCH"],
    &["MULTI", "x"],
    &["SET", "{t}a", "6"],
    &["EXEC"],
    &["GET", "{t}a"],
    &["WATCH", "{t}a"],
    &["WATCH", "{t}a", "{t}a"],
    &["MULTI"],
    &["UNWATCH"],
    &["INCR", "{t}a"],
    &["EXEC"],
    &["MULTI"],
    &["INCR", "{t}l"],
    &["SET", "{t}a", "x"],
    &["INCR", "{t}a"],
    &["EXEC"],
];

/// RESP3: EXEC's array holds RESP3 replies.
const RESP3_SCRIPT: &[&[&str]] = &[
    &["MULTI"],
    &["HSET", "{t}h", "f", "v"],
    &["HGETALL", "{t}h"],
    &["SET", "{t}d", "1.5"],
    &["INCRBYFLOAT", "{t}d", "1"],
    &["EXEC"],
];

/// Runs both scripts on `port` and on one redis-server; every reply must be
/// byte for byte the same.
fn answers_like_redis(port: u16, what: &str) {
    let redis = start_redis(free_port());
    let want = replies(redis.port, SCRIPT);
    let got = replies(port, SCRIPT);
    for ((args, w), g) in SCRIPT.iter().zip(&want).zip(&got) {
        assert_eq!(g, w, "{what}: {args:?}");
    }
    let mut on_redis = conn(redis.port);
    let mut on_port = conn(port);
    on_redis.cmd(&["HELLO", "3"]);
    on_port.cmd(&["HELLO", "3"]);
    for args in RESP3_SCRIPT {
        assert_eq!(
            text(&on_port.cmd(args)),
            text(&on_redis.cmd(args)),
            "{what}: {args:?}"
        );
    }
}

#[test]
fn transactions_answer_like_one_redis_server() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    answers_like_redis(c.proxy.port, "proxy over redis-server");
}

#[test]
fn the_built_in_node_answers_transactions_like_redis() {
    if !have_tool("redis-server") {
        return;
    }
    let node = start_node(free_port());
    answers_like_redis(node.port, "built-in node");
}

#[test]
fn the_proxy_over_built_in_nodes_answers_transactions_like_redis() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::builtin(3);
    answers_like_redis(c.proxy.port, "proxy over built-in nodes");
}

#[test]
fn a_key_on_another_node_is_crossslot_and_exec_aborts() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    let (a, b) = keys_on_two_nodes(c.proxy.port);
    let mut s = conn(c.proxy.port);
    assert_eq!(s.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(s.cmd(&["SET", &a, "1"]), b"+QUEUED\r\n");
    assert_eq!(
        text(&s.cmd(&["SET", &b, "1"])),
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
    assert_eq!(
        text(&s.cmd(&["EXEC"])),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(s.cmd(&["EXISTS", &a]), b":0\r\n", "nothing was applied");
    // Outside MULTI the same keys get the same words, Redis Cluster's.
    assert_eq!(
        text(&s.cmd(&["RENAME", &a, &b])),
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
    // WATCH across nodes is refused the same way.
    assert!(text(&s.cmd(&["WATCH", &a, &b])).starts_with("-CROSSSLOT"));
    // Commands that need every node cannot be queued.
    s.cmd(&["MULTI"]);
    assert!(text(&s.cmd(&["DBSIZE"])).contains("cannot be queued in a transaction"));
    assert!(text(&s.cmd(&["EXEC"])).starts_with("-EXECABORT"));
}

#[test]
fn watch_sees_another_clients_write_and_exec_returns_nil() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(3);
    let port = c.proxy.port;
    let mut s = conn(port);
    let mut other = conn(port);
    assert_eq!(s.cmd(&["SET", "w", "1"]), b"+OK\r\n");
    assert_eq!(s.cmd(&["WATCH", "w"]), b"+OK\r\n");
    assert_eq!(other.cmd(&["SET", "w", "2"]), b"+OK\r\n");
    s.cmd(&["MULTI"]);
    assert_eq!(s.cmd(&["SET", "w", "3"]), b"+QUEUED\r\n");
    assert_eq!(s.cmd(&["EXEC"]), b"*-1\r\n");
    assert_eq!(s.cmd(&["GET", "w"]), b"$1\r\n2\r\n");
    // Unmodified, the same transaction runs.
    assert_eq!(s.cmd(&["WATCH", "w"]), b"+OK\r\n");
    s.cmd(&["MULTI"]);
    s.cmd(&["SET", "w", "3"]);
    assert_eq!(s.cmd(&["EXEC"]), b"*1\r\n+OK\r\n");
    assert_eq!(s.cmd(&["GET", "w"]), b"$1\r\n3\r\n");
    // RESP3: a nil EXEC is `_`.
    s.cmd(&["HELLO", "3"]);
    s.cmd(&["WATCH", "w"]);
    other.cmd(&["DEL", "w"]);
    s.cmd(&["MULTI"]);
    s.cmd(&["SET", "w", "4"]);
    assert_eq!(s.cmd(&["EXEC"]), b"_\r\n");
}

#[test]
fn pinned_connections_are_bounded_per_node_and_given_back() {
    if !have_tool("redis-server") {
        return;
    }
    let nodes = vec![start_redis(free_port())];
    // `extra` lands inside [proxy].
    let c = Cluster::over(nodes, "max_pinned_per_node = 1\n");
    let port = c.proxy.port;
    let mut a = conn(port);
    let mut b = conn(port);
    assert_eq!(a.cmd(&["WATCH", "k"]), b"+OK\r\n");
    let e = text(&b.cmd(&["WATCH", "k"]));
    assert!(
        e.starts_with("-ERR max number of pinned connections reached for node"),
        "{e}"
    );
    assert!(e.contains("max_pinned_per_node"), "{e}");
    // A queued first key needs the pin too: refused, and EXEC aborts.
    b.cmd(&["MULTI"]);
    assert!(text(&b.cmd(&["SET", "k", "1"])).starts_with("-ERR max number of pinned"));
    assert!(text(&b.cmd(&["EXEC"])).starts_with("-EXECABORT"));
    // UNWATCH gives the pin back; so does a client leaving.
    assert_eq!(a.cmd(&["UNWATCH"]), b"+OK\r\n");
    assert_eq!(b.cmd(&["WATCH", "k"]), b"+OK\r\n");
    drop(b);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = text(&a.cmd(&["WATCH", "k"]));
        if r == "+OK\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the pin never came back: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    a.cmd(&["MULTI"]);
    a.cmd(&["INCR", "k"]);
    assert_eq!(a.cmd(&["EXEC"]), b"*1\r\n:1\r\n");
}

fn ring_state(port: u16) -> String {
    ring_field(&cluster_info(&mut connect(port)), "state")
}

#[test]
fn a_transaction_across_a_topology_change_runs_whole_on_the_new_owner_or_aborts() {
    if !have_tool("redis-server") {
        return;
    }
    let nodes = vec![start_redis(free_port()), start_redis(free_port())];
    let c = Cluster::over(nodes, "[migration]\nmax_keys_per_sec = 2000\nbatch = 100\n");
    let port = c.proxy.port;
    let extra = start_redis(free_port());
    // Fill, add a node, find keys that moved to it.
    set_keys(port, "fill:", 4000);
    let mut admin = conn(port);
    assert_eq!(
        admin.cmd(&["CLUSTER", "ADDNODE", &extra.addr(), "NAME", "n3"]),
        b"+OK\r\n"
    );
    wait_state_ok(&mut connect(port), 120);
    let moved: Vec<String> = (0..2000)
        .map(|i| format!("fill:{i}"))
        .filter(|k| owner(port, k) == "n3")
        .take(2)
        .collect();
    assert_eq!(moved.len(), 2);
    // Remove it again (slowly): both keys move back while the transactions wait.
    let mut watched = conn(port);
    assert_eq!(watched.cmd(&["WATCH", &moved[0]]), b"+OK\r\n");
    watched.cmd(&["MULTI"]);
    assert_eq!(watched.cmd(&["SET", &moved[0], "watched"]), b"+QUEUED\r\n");
    let mut plain = conn(port);
    plain.cmd(&["MULTI"]);
    assert_eq!(plain.cmd(&["SET", &moved[1], "plain"]), b"+QUEUED\r\n");
    assert_eq!(
        plain.cmd(&["INCR", &format!("{{{}}}:n", moved[1])]),
        b"+QUEUED\r\n"
    );
    assert_eq!(admin.cmd(&["CLUSTER", "REMOVENODE", "n3"]), b"+OK\r\n");
    assert_ne!(
        ring_state(port),
        "ok",
        "the change is slow enough to overlap"
    );
    wait_state_ok(&mut connect(port), 120);
    // The WATCH was on the old owner: it could not see the new one, so EXEC
    // aborts and nothing was applied.
    let r = text(&watched.cmd(&["EXEC"]));
    assert!(
        r.starts_with("-EXECABORT") && r.contains("topology change"),
        "{r}"
    );
    let before = text(&conn(port).cmd(&["GET", &moved[0]]));
    assert!(!before.contains("watched"), "{before}");
    // Without WATCH nothing had been sent: it runs whole on the new owner.
    assert_eq!(plain.cmd(&["EXEC"]), b"*2\r\n+OK\r\n:1\r\n");
    assert_eq!(
        text(&conn(port).cmd(&["GET", &moved[1]])),
        "$5\r\nplain\r\n"
    );
}

#[test]
fn built_in_nodes_run_transactions_through_the_proxy() {
    let c = Cluster::builtin(2);
    let mut s = conn(c.proxy.port);
    let mut other = conn(c.proxy.port);
    assert_eq!(s.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(s.cmd(&["SET", "b", "1"]), b"+QUEUED\r\n");
    assert_eq!(s.cmd(&["INCR", "b"]), b"+QUEUED\r\n");
    assert_eq!(s.cmd(&["EXEC"]), b"*2\r\n+OK\r\n:2\r\n");
    // WATCH through the proxy sees another client's write on the node.
    assert_eq!(s.cmd(&["WATCH", "b"]), b"+OK\r\n");
    assert_eq!(other.cmd(&["INCR", "b"]), b":3\r\n");
    s.cmd(&["MULTI"]);
    assert_eq!(s.cmd(&["SET", "b", "x"]), b"+QUEUED\r\n");
    assert_eq!(s.cmd(&["EXEC"]), b"*-1\r\n");
    assert_eq!(s.cmd(&["GET", "b"]), b"$1\r\n3\r\n");
    // Unmodified, it runs.
    s.cmd(&["WATCH", "b"]);
    s.cmd(&["MULTI"]);
    s.cmd(&["SET", "b", "x"]);
    assert_eq!(s.cmd(&["EXEC"]), b"*1\r\n+OK\r\n");
    assert_eq!(other.cmd(&["GET", "b"]), b"$1\r\nx\r\n");
}

#[test]
fn redis_py_8_transactions_and_watch_work_over_built_in_nodes() {
    let Some(lib) = redis_py(8) else {
        return;
    };
    let c = Cluster::builtin(3);
    let out = run_ok(
        std::process::Command::new("timeout")
            .args(["120", "python3"])
            .arg(manifest().join("tests/clients/redis_py_tx.py"))
            .arg(c.proxy.port.to_string())
            .env("PYTHONPATH", &lib),
    );
    assert!(
        out.contains("redis-py 8.") && out.contains("transactions ok"),
        "{out}"
    );
}
