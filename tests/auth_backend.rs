//! Credentials towards the nodes, and secrets kept out of every view:
//!
//! * with `[backend_auth]`, every upstream connection the proxy opens to a
//!   password-protected redis-server authenticates first: pooled RESP2 and
//!   RESP3 connections, a transaction's pinned one, a subscriber's, and the
//!   mover's (a node added later is filled with MIGRATE … AUTH2);
//! * a node whose password is wrong is reported by name, without the password;
//! * the built-in node's `--requirepass` answers as redis-server's does;
//! * no password (a user's, `requirepass`, a node's) appears in the logs,
//!   INFO, CONFIG GET, the CLUSTER views, `/cluster`, MONITOR or the state file.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const NODE_PASS: &str = "node-pass-7f3a";
const USER_PASS: &str = "user-pass-91c2";
const REQUIREPASS: &str = "require-pass-55d0";

fn redis_with_password(port: u16) -> Proc {
    let mut args = redis_args(port);
    args.extend(["--requirepass", NODE_PASS].map(String::from));
    spawn_redis(port, args)
}

fn dbsize_with_password(port: u16) -> i64 {
    let mut c = Raw::connect(port);
    c.check(&["AUTH", NODE_PASS], "+OK\r\n");
    c.int(&["DBSIZE"])
}

#[test]
fn every_upstream_connection_authenticates_to_a_protected_node() {
    if !have_tool("redis-server") {
        return skip(
            "redis-server is not installed",
            "apt-get install redis-server",
        );
    }
    let a = redis_with_password(free_port());
    let b = redis_with_password(free_port());
    let extra = format!("[backend_auth]\npassword = \"{NODE_PASS}\"\n");
    let (proxy, _dir) = start_proxy(&[a.addr()], &extra);
    let mut c = Raw::connect(proxy.port);
    for i in 0..200 {
        c.check(&["SET", &format!("k{i}"), "v"], "+OK\r\n");
    }
    c.check(&["GET", "k1"], "$1\r\nv\r\n");
    let mut r3 = Raw::connect(proxy.port);
    assert!(r3.call(&["HELLO", "3"]).starts_with('%'));
    r3.check(&["GET", "k1"], "$1\r\nv\r\n");
    c.check(&["MULTI"], "+OK\r\n");
    c.check(&["INCR", "n"], "+QUEUED\r\n");
    c.check(&["EXEC"], "*1\r\n:1\r\n");
    let mut sub = Raw::connect(proxy.port);
    sub.check(
        &["SUBSCRIBE", "ch"],
        "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    c.check(&["PUBLISH", "ch", "m"], ":1\r\n");
    assert_eq!(
        sub.reply(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n"
    );
    // A node added later gets its share through MIGRATE … AUTH2.
    c.check(&["CLUSTER", "ADDNODE", &b.addr()], "+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.call(&["CLUSTER", "RINGINFO"]).contains("state:ok") {
        assert!(Instant::now() < deadline, "the change did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    let moved = dbsize_with_password(b.port);
    assert!(moved > 20, "{moved} keys moved");
    for i in 0..200 {
        c.check(&["GET", &format!("k{i}")], "$1\r\nv\r\n");
    }
}

#[test]
fn a_node_with_another_password_is_reported_by_name_without_the_password() {
    if !have_tool("redis-server") {
        return skip(
            "redis-server is not installed",
            "apt-get install redis-server",
        );
    }
    let a = redis_with_password(free_port());
    let (proxy, _dir) = start_proxy(&[a.addr()], "[backend_auth]\npassword = \"wrong-one-3b\"\n");
    let r = Raw::connect(proxy.port).call(&["GET", "k"]);
    assert!(r.starts_with("-ERR node node1 ("), "{r}");
    assert!(
        r.contains("WRONGPASS") && !r.contains("wrong-one-3b"),
        "{r}"
    );
}

#[test]
fn no_secret_appears_in_logs_info_config_cluster_views_monitor_or_the_state_file() {
    let node = start_node(free_port());
    let dir = tempdir::Dir::new();
    let state = dir.path().join("state.toml");
    let extra = format!(
        "requirepass = \"{REQUIREPASS}\"\nstate_file = \"{}\"\n\
         [[users]]\nname = \"app\"\npassword = \"{USER_PASS}\"\ncommands = \"readwrite\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n",
        state.display()
    );
    let (path, port) = write_proxy_config(&dir, &[node.addr()], &extra);
    let log_path = dir.path().join("proxy.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let proxy = start_proxy_env(&path, port, &[("RUST_LOG", "debug")], Some(log));
    let mut admin = Raw::connect(proxy.port);
    admin.check(&["AUTH", REQUIREPASS], "+OK\r\n");
    let mut monitor = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
    monitor
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    monitor
        .write_all(format!("AUTH {REQUIREPASS}\r\nMONITOR\r\n").as_bytes())
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut app = Raw::connect(proxy.port);
    app.check(&["AUTH", "app", USER_PASS], "+OK\r\n");
    app.call(&["AUTH", "app", "a-wrong-guess-00"]);
    assert!(app
        .call(&["HELLO", "2", "AUTH", "app", USER_PASS])
        .starts_with('*'));
    app.check(&["SET", "k", "v"], "+OK\r\n");
    admin.check(
        &["CLUSTER", "ADDNODE", &start_node(free_port()).addr()],
        "+OK\r\n",
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut seen = Vec::new();
    let mut b = [0u8; 65536];
    while let Ok(n) = monitor.read(&mut b) {
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&b[..n]);
    }
    let monitor_text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        monitor_text.contains("\"AUTH\""),
        "MONITOR saw the AUTH: {monitor_text}"
    );
    let ringinfo = admin.call(&["CLUSTER", "RINGINFO"]);
    let http_addr = ring_field(&ringinfo, "admin_listen");
    let views = [
        ("INFO everything", admin.call(&["INFO", "everything"])),
        ("CONFIG GET *", admin.call(&["CONFIG", "GET", "*"])),
        (
            "CONFIG GET requirepass",
            admin.call(&["CONFIG", "GET", "requirepass"]),
        ),
        ("CLUSTER NODES", admin.call(&["CLUSTER", "NODES"])),
        ("CLUSTER SHARDS", admin.call(&["CLUSTER", "SHARDS"])),
        ("CLUSTER RINGINFO", ringinfo),
        ("CLUSTER RING", admin.call(&["CLUSTER", "RING"])),
        ("ACL LIST", admin.call(&["ACL", "LIST"])),
        ("/cluster", http::get(&http_addr, "/cluster").text()),
        ("/stats", http::get(&http_addr, "/stats").text()),
        ("/metrics", http::get(&http_addr, "/metrics").text()),
        ("MONITOR", monitor_text),
    ];
    drop(proxy);
    let views = views.into_iter().chain([
        ("state file", std::fs::read_to_string(&state).unwrap()),
        ("log", std::fs::read_to_string(&log_path).unwrap()),
    ]);
    for (what, text) in views {
        assert!(!text.is_empty(), "{what} is empty");
        for secret in [REQUIREPASS, USER_PASS, "a-wrong-guess-00"] {
            assert!(!text.contains(secret), "{what} shows {secret}: {text}");
        }
    }
}

fn node_with_password(port: u16) -> Proc {
    let mut p = Proc::spawn(
        Command::new(BIN)
            .args([
                "node",
                "--port",
                &port.to_string(),
                "--requirepass",
                NODE_PASS,
            ])
            .stdout(Stdio::null()),
        port,
        "node",
    );
    p.wait_ready();
    p
}

#[test]
fn the_built_in_node_takes_requirepass_as_redis_does_and_the_proxy_authenticates_to_it() {
    let node = node_with_password(free_port());
    let steps: &[&[&str]] = &[
        &["GET", "k"],
        &["MULTI"],
        &["AUTH", "wrong"],
        &["AUTH", "default", "wrong"],
        &["AUTH", "someone", NODE_PASS],
        &["GET", "k"],
        &["AUTH", NODE_PASS],
        &["SET", "k", "v"],
        &["RESET"],
        &["GET", "k"],
        &["AUTH", "default", NODE_PASS],
        &["GET", "k"],
    ];
    let ours: Vec<String> = {
        let mut c = Raw::connect(node.port);
        steps.iter().map(|s| c.call(s)).collect()
    };
    if have_tool("redis-server") {
        let redis = redis_with_password(free_port());
        let mut c = Raw::connect(redis.port);
        for (s, mine) in steps.iter().zip(&ours) {
            assert_eq!(mine, &c.call(s), "{s:?}");
        }
    }
    assert_eq!(ours[0], "-NOAUTH Authentication required.\r\n");
    assert_eq!(ours[11], "$1\r\nv\r\n");
    let mut c = Raw::connect(node.port);
    assert!(c
        .call(&["HELLO", "3"])
        .starts_with("-NOAUTH HELLO must be called"));
    assert!(c
        .call(&["HELLO", "3", "AUTH", "default", NODE_PASS])
        .starts_with('%'));
    let extra = format!("[backend_auth]\npassword = \"{NODE_PASS}\"\n");
    let (proxy, _dir) = start_proxy(&[node.addr()], &extra);
    let mut p = Raw::connect(proxy.port);
    p.check(&["SET", "k", "w"], "+OK\r\n");
    p.check(&["GET", "k"], "$1\r\nw\r\n");
}
