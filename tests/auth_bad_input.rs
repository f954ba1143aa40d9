//! Authentication under bad input, and what only `admin` may do:
//!
//! * a wrong-password loop from one address is admitted at the configured
//!   rate and no faster; the failures and refusals are counted in INFO
//!   stats and logged without the password;
//! * clients that never authenticate hold little memory and are closed
//!   after `auth_timeout_ms`;
//! * AUTH inside MULTI is refused and discards the transaction; HELLO with
//!   a wrong password leaves the client unauthenticated, in RESP2;
//! * every CLUSTER change, FLUSHALL, FLUSHDB, CONFIG SET, SHUTDOWN, CLIENT
//!   KILL and MONITOR need the `admin` class;
//! * protected mode: no users and a non-loopback listen is refused at
//!   validation, before anything is bound.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

const WRONGPASS: &str = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
const LIMITED: &str =
    "-ERR too many failed authentication attempts from this address; retry later\r\n";

/// A proxy with `requirepass = "secret"` and a user `ops` (class `all`);
/// `extra` goes in `[proxy]`, `tables` after the users.
fn proxy_with(extra: &str, tables: &str) -> (Proc, Proc, tempdir::Dir) {
    let node = start_node(free_port());
    let users = "[[users]]\nname = \"ops\"\npassword = \"opw\"\ncommands = \"all\"\n";
    let text = format!("requirepass = \"secret\"\n{extra}\n{users}{tables}");
    let (p, dir) = start_proxy(&[node.addr()], &text);
    (node, p, dir)
}

fn proxy(extra: &str) -> (Proc, Proc, tempdir::Dir) {
    proxy_with(extra, "")
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_wrong_password_loop_is_admitted_at_the_configured_rate_and_counted() {
    let log = tempdir::Dir::new();
    let log_path = log.path().join("proxy.log");
    let node = start_node(free_port());
    let dir = tempdir::Dir::new();
    let extra = "auth_failures_per_sec = 20\nrequirepass = \"secret\"\n";
    let (path, port) = write_proxy_config(&dir, &[node.addr()], extra);
    let file = std::fs::File::create(&log_path).unwrap();
    let proxy = start_proxy_env(&path, port, &[("RUST_LOG", "info")], Some(file));
    let mut c = Raw::connect(proxy.port);
    let (mut wrong, mut limited) = (0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        match c.call(&["AUTH", "guess-not-logged"]).as_str() {
            WRONGPASS => wrong += 1,
            LIMITED => limited += 1,
            other => panic!("{other}"),
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "wrong-password loop: {} attempts in {secs:.1} s, {wrong} checked ({:.1}/s), {limited} refused unchecked",
        wrong + limited,
        wrong as f64 / secs
    );
    // A burst of 20, then 20 a second.
    assert!(
        wrong >= 20 && wrong as f64 <= 20.0 + 20.0 * secs + 1.0,
        "{wrong}"
    );
    assert!(limited > wrong, "the loop runs far faster than the rate");
    // The right password works once a token is back.
    std::thread::sleep(Duration::from_millis(200));
    c.check(&["AUTH", "secret"], "+OK\r\n");
    assert_eq!(c.info_field("stats", "acl_access_denied_auth"), wrong);
    assert_eq!(
        c.info_field("stats", "shardis_auth_attempts_rate_limited"),
        limited
    );
    drop(proxy);
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(logged.contains("authentication failed"), "{logged}");
    assert!(!logged.contains("guess-not-logged") && !logged.contains("secret"));
}

#[test]
fn clients_that_never_authenticate_hold_little_and_are_closed_after_the_timeout() {
    let (_node, proxy, _dir) = proxy("auth_timeout_ms = 1500");
    let pid = proxy.pid();
    let before = rss_kb(pid);
    // 100 clients, each with the largest unauthenticated argument half sent.
    let partial = format!("*2\r\n$4\r\nAUTH\r\n$16384\r\n{}", "x".repeat(16_000));
    let mut idle: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
            s.write_all(partial.as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let held = rss_kb(pid).saturating_sub(before);
    eprintln!("100 unauthenticated clients with 16 KB each pending: proxy RSS +{held} kB");
    assert!(held < 40 * 1024, "{held} kB");
    // An authenticated client is not closed by the timeout.
    let mut ok = Raw::connect(proxy.port);
    ok.check(&["AUTH", "secret"], "+OK\r\n");
    let started = Instant::now();
    for s in &mut idle {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 64];
        assert_eq!(s.read(&mut b).unwrap_or(0), 0, "closed without a reply");
    }
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    std::thread::sleep(Duration::from_millis(1200));
    ok.check(&["PING"], "+PONG\r\n");
}

#[test]
fn auth_inside_multi_is_refused_and_hello_with_a_wrong_password_changes_nothing() {
    let (_node, proxy, _dir) = proxy("");
    let mut c = Raw::connect(proxy.port);
    c.check(&["HELLO", "3", "AUTH", "default", "nope"], WRONGPASS);
    c.check(&["GET", "k"], "-NOAUTH Authentication required.\r\n");
    c.check(&["AUTH", "secret"], "+OK\r\n");
    c.check(&["GET", "k"], "$-1\r\n");
    c.check(&["MULTI"], "+OK\r\n");
    c.check(&["SET", "k", "v"], "+QUEUED\r\n");
    let r = c.call(&["AUTH", "ops", "opw"]);
    assert!(r.starts_with("-ERR 'auth' cannot be queued"), "{r}");
    c.check(
        &["EXEC"],
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    c.check(&["ACL", "WHOAMI"], "$7\r\ndefault\r\n");
    c.check(&["GET", "k"], "$-1\r\n");
    // A command refused inside MULTI discards the transaction too.
    c.check(&["AUTH", "ops", "opw"], "+OK\r\n");
    c.check(&["MULTI"], "+OK\r\n");
    c.check(
        &["FLUSHALL"],
        "-NOPERM User ops has no permissions to run the 'flushall' command\r\n",
    );
    c.check(
        &["EXEC"],
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
}

#[test]
fn only_admin_changes_the_cluster_or_the_proxy() {
    let (_node, proxy, _dir) = proxy("");
    let mut ops = Raw::connect(proxy.port);
    ops.check(&["AUTH", "ops", "opw"], "+OK\r\n");
    let refused: &[(&[&str], &str)] = &[
        (&["CLUSTER", "ADDNODE", "127.0.0.1:1"], "cluster|addnode"),
        (&["CLUSTER", "REMOVENODE", "node1"], "cluster|removenode"),
        (&["CLUSTER", "SPAWNNODE"], "cluster|spawnnode"),
        (&["FLUSHALL"], "flushall"),
        (&["FLUSHDB"], "flushdb"),
        (&["CONFIG", "SET", "slowlog-max-len", "5"], "config|set"),
        (&["SHUTDOWN"], "shutdown"),
        (&["CLIENT", "KILL", "ID", "1"], "client|kill"),
        (&["MONITOR"], "monitor"),
        (&["ACL", "LIST"], "acl|list"),
    ];
    for (args, name) in refused {
        ops.check(
            args,
            &format!("-NOPERM User ops has no permissions to run the '{name}' command\r\n"),
        );
    }
    ops.check(&["SET", "k", "v"], "+OK\r\n");
    assert!(ops.call(&["CLUSTER", "RINGINFO"]).starts_with('$'));
    assert!(ops.call(&["CONFIG", "GET", "maxclients"]).starts_with('*'));
    let mut admin = Raw::connect(proxy.port);
    admin.check(&["AUTH", "default", "secret"], "+OK\r\n");
    admin.check(&["FLUSHALL"], "+OK\r\n");
    admin.check(&["GET", "k"], "$-1\r\n");
    assert_eq!(admin.info_field("stats", "acl_access_denied_cmd"), 10);
}

#[test]
fn protected_mode_refuses_a_public_listen_without_users_before_binding() {
    let dir = tempdir::Dir::new();
    let check = |text: &str| {
        let path = dir.path().join("p.toml");
        std::fs::write(&path, text).unwrap();
        Command::new(BIN)
            .args([
                "proxy",
                "--config",
                path.to_str().unwrap(),
                "--check-config",
            ])
            .output()
            .unwrap()
    };
    let nodes = "[[nodes]]\naddr = \"127.0.0.1:7001\"\n";
    let out = check(&format!("[proxy]\nlisten = \"0.0.0.0:7000\"\n{nodes}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("proxy.listen") && err.contains("protected mode"),
        "{err}"
    );
    // `--listen` on the command line is held to the same rule.
    let path = dir.path().join("p.toml");
    std::fs::write(
        &path,
        format!("[proxy]\nlisten = \"127.0.0.1:{}\"\n{nodes}", free_port()),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "proxy",
            "--config",
            path.to_str().unwrap(),
            "--listen",
            "0.0.0.0:7000",
            "--check-config",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("protected mode"));
    assert!(!out.status.success());
}

/// `method path` to the admin listener with an `Authorization` header.
fn http(addr: &str, method: &str, path: &str, auth: Option<&str>, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[test]
fn the_admin_http_cache_api_takes_the_same_credentials() {
    let (_node, proxy, _dir) = proxy_with("", "[admin]\nlisten = \"127.0.0.1:0\"\n");
    let mut c = Raw::connect(proxy.port);
    c.check(&["AUTH", "secret"], "+OK\r\n");
    let info = c.call(&["CLUSTER", "RINGINFO"]);
    let addr = ring_field(&info, "admin_listen");
    // "ops:opw" and "default:secret" in base64.
    let (ops, admin) = ("Basic b3BzOm9wdw==", "Basic ZGVmYXVsdDpzZWNyZXQ=");
    let (status, text) = http(&addr, "PUT", "/cache/k", None, "v");
    assert_eq!(status, 401, "{text}");
    assert!(
        text.contains("WWW-Authenticate: Basic") || text.contains("www-authenticate: Basic"),
        "{text}"
    );
    assert_eq!(
        http(&addr, "GET", "/cache/k", Some("Basic b3BzOndyb25n"), "").0,
        401
    );
    assert_eq!(http(&addr, "PUT", "/cache/k", Some(ops), "v").0 / 100, 2);
    let (status, text) = http(&addr, "GET", "/cache/k", Some("Bearer secret"), "");
    assert_eq!(status, 200, "{text}");
    assert!(text.ends_with("\r\n\r\nv"), "{text}");
    assert_eq!(
        http(&addr, "DELETE", "/cache/k", Some(admin), "").0 / 100,
        2
    );
    // Views that reveal no value stay open.
    assert_eq!(http(&addr, "GET", "/metrics", None, "").0, 200);
    assert_eq!(http(&addr, "GET", "/cluster", None, "").0, 200);
    assert_eq!(c.info_field("stats", "acl_access_denied_auth"), 1);
}
