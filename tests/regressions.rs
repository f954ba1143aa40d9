//! Defects found by the command sweep and the fuzzers, each pinned by a test
//! that failed before its fix: over real TCP, against the real binary.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;

const TIMEOUT: Duration = Duration::from_secs(30);

/// `OBJECT HELP` has no key; the command table put OBJECT's key at argument
/// 2, and routing indexed past the arguments, panicking the client's task.
#[test]
fn object_forms_without_a_key_are_answered_like_redis() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(2);
    let direct = start_redis(free_port());
    let mut ours = RespConn::connect_loopback(c.proxy.port, TIMEOUT).unwrap();
    let mut theirs = RespConn::connect_loopback(direct.port, TIMEOUT).unwrap();
    let cases: &[&[&str]] = &[
        &["OBJECT", "HELP"],
        &["object", "help", "extra"],
        &["OBJECT", "ENCODING"],
        &["OBJECT", "FREQ"],
        &["OBJECT", "NOSUCH"],
        &["OBJECT", "ENCODING", "missing"],
    ];
    for args in cases {
        let (a, b) = (ours.cmd(args), theirs.cmd(args));
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "{args:?}"
        );
    }
    assert_eq!(ours.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn object_help_over_builtin_nodes_lists_the_subcommands() {
    let c = Cluster::builtin(2);
    let mut con = RespConn::connect_loopback(c.proxy.port, TIMEOUT).unwrap();
    let help = String::from_utf8(con.cmd(&["OBJECT", "HELP"])).unwrap();
    assert!(
        help.starts_with("*6\r\n") && help.contains("ENCODING <key>"),
        "{help}"
    );
    assert_eq!(
        con.cmd(&["OBJECT", "ENCODING"]),
        b"-ERR wrong number of arguments for 'object|encoding' command\r\n"
    );
    assert_eq!(con.cmd(&["PING"]), b"+PONG\r\n");
}

/// CONFIG GET with a few dozen `*` ran a backtracking matcher on the
/// proxy's runtime thread: the whole proxy stopped answering. Now one
/// bounded matcher serves the proxy and the node (KEYS too).
#[test]
fn glob_heavy_patterns_are_answered_while_other_clients_are_served() {
    let c = Cluster::builtin(2);
    let port = c.proxy.port;
    let mut con = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    let long = "a".repeat(20_000);
    assert_eq!(con.cmd(&["SET", &long, "v"]), b"+OK\r\n");
    let stop = Arc::new(AtomicBool::new(false));
    let pinger = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut p = RespConn::connect_loopback(port, TIMEOUT).unwrap();
            let mut pongs = 0u32;
            // Bounded: at most 10 000 PINGs, and every one must come back.
            while !stop.load(Ordering::Relaxed) && pongs < 10_000 {
                assert_eq!(p.cmd(&["PING"]), b"+PONG\r\n");
                pongs += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            pongs
        })
    };
    let patterns = [
        "*".repeat(40) + "x",
        "*".repeat(10_000) + "x",
        "*".repeat(10_000),
        "*a".repeat(5_000) + "*b",
        "*?".repeat(3_000) + "*[",
        "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b".into(),
    ];
    for pat in &patterns {
        let r = con.cmd(&["CONFIG", "GET", pat]);
        assert!(r.starts_with(b"*"), "{}", String::from_utf8_lossy(&r));
        let r = con.cmd(&["KEYS", pat]);
        assert!(r.starts_with(b"*"), "{}", String::from_utf8_lossy(&r));
    }
    // The all-stars pattern matches the long key; the others do not.
    assert_eq!(
        con.cmd(&["KEYS", &"*".repeat(10_000)]).len(),
        long.len() + 14
    );
    stop.store(true, Ordering::Relaxed);
    let pongs = pinger.join().expect("every PING was answered");
    assert!(pongs > 0);
}

/// Replies the command sweep found differing in class from redis-server,
/// now the same: EVALSHA's digest is checked before its key count, SCAN
/// takes any cursor Redis takes, AUTH knows only the `default` user, and
/// the proxy's own CLIENT, CONFIG and COMMAND subcommands check their
/// arguments (and answer HELP).
#[test]
fn proxy_answers_edge_forms_in_the_same_class_as_redis() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(2);
    let direct = start_redis(free_port());
    let mut ours = RespConn::connect_loopback(c.proxy.port, TIMEOUT).unwrap();
    let mut theirs = RespConn::connect_loopback(direct.port, TIMEOUT).unwrap();
    let cases: &[&[&str]] = &[
        &["EVALSHA", "nosuch", "x"],
        &["EVALSHA_RO", "nosuch", "-1"],
        &["SCAN", ""],
        &["SCAN", "-1"],
        &["SCAN", "-1", "-1"],
        &["AUTH", "someone", "pw"],
        &["AUTH", "default", "pw"],
        &["CLIENT", "LIST", "x"],
        &["CLIENT", "LIST", "TYPE", "nosuch"],
        &["CLIENT", "LIST", "ID", "0"],
        &["CLIENT", "HELP"],
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CONFIG", "HELP"],
        &["CONFIG", "RESETSTAT", "x"],
        &["COMMAND", "HELP"],
        &["COMMAND", "COUNT", "x"],
        &["COMMAND", "LIST", "x"],
    ];
    let class = |r: &[u8]| {
        let text = String::from_utf8_lossy(r).into_owned();
        match text.strip_prefix('-') {
            Some(e) => e.split(' ').next().unwrap_or("").to_string(),
            None => "ok".to_string(),
        }
    };
    for args in cases {
        let (a, b) = (ours.cmd(args), theirs.cmd(args));
        // A SCAN cursor the proxy never issued may get its documented refusal.
        if args[0] == "SCAN"
            && String::from_utf8_lossy(&a).contains("continues only cursors it returned")
        {
            continue;
        }
        assert_eq!(
            class(&a),
            class(&b),
            "{args:?}: proxy {:?}, redis {:?}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }
}

/// A backend that answers a bare CRLF (no type byte) made the reply framer
/// slice backwards and panic the upstream's task; now it is a malformed
/// reply: the client gets an error and the proxy carries on.
#[test]
fn a_backend_answering_a_bare_crlf_gets_an_error_not_a_panic() {
    use std::io::{Read, Write};
    let fake = common::bind_free();
    let fake_addr = fake.local_addr().unwrap().to_string();
    // The fake node: answers every read with "\r\n", for a bounded time.
    std::thread::spawn(move || {
        fake.set_nonblocking(false).unwrap();
        for conn in fake.incoming().take(8) {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(20)))
                    .unwrap();
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(b"\r\n").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let (proxy, _dir) = start_proxy(&[fake_addr], "");
    let mut con = RespConn::connect_loopback(proxy.port, TIMEOUT).unwrap();
    let r = con.cmd(&["GET", "k"]);
    assert!(r.starts_with(b"-ERR"), "{}", String::from_utf8_lossy(&r));
    assert_eq!(con.cmd(&["PING"]), b"+PONG\r\n");
    proxy.assert_no_panic();
}
