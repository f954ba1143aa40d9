//! MULTI / EXEC / WATCH on the built-in node directly: WATCH aborts EXEC on
//! the same changes redis-server does (and, where the node is
//! conservative, on the documented extra ones), sees expiry, eviction,
//! MIGRATE and RESTORE, forgets a client's keys when it leaves; a
//! transaction is bounded in bytes; and EXEC is atomic on a node with
//! several worker threads (and the test sees it when it is not).

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);
const BIN: &str = env!("CARGO_BIN_EXE_shardis");

fn conn(port: u16) -> RespConn {
    RespConn::connect_loopback(port, TIMEOUT).unwrap()
}

fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

/// A node with `threads` workers and extra environment.
fn start_node_with(threads: u16, env: &[(&str, &str)]) -> Proc {
    let port = free_port();
    let mut p = Proc::spawn(
        Command::new(BIN)
            .args(["node", "--port", &port.to_string()])
            .args(["--threads", &threads.to_string()])
            .envs(env.iter().copied())
            .stdout(Stdio::null()),
        port,
        "node",
    );
    p.wait_ready();
    p
}

/// One WATCH case: `setup` by the watcher, then WATCH k, `other` by a
/// second client, a pause, and `MULTI; SET k done; EXEC`.
struct Case {
    name: &'static str,
    setup: &'static [&'static [&'static str]],
    other: &'static [&'static [&'static str]],
    sleep_ms: u64,
}

const CASES: &[Case] = &[
    Case {
        name: "untouched",
        setup: &[&["SET", "k", "1"]],
        other: &[],
        sleep_ms: 0,
    },
    Case {
        name: "set",
        setup: &[&["SET", "k", "1"]],
        other: &[&["SET", "k", "2"]],
        sleep_ms: 0,
    },
    Case {
        name: "incr",
        setup: &[&["SET", "k", "1"]],
        other: &[&["INCR", "k"]],
        sleep_ms: 0,
    },
    Case {
        name: "lpush creates",
        setup: &[],
        other: &[&["LPUSH", "k", "x"]],
        sleep_ms: 0,
    },
    Case {
        name: "hset",
        setup: &[&["HSET", "k", "f", "v"]],
        other: &[&["HSET", "k", "f", "w"]],
        sleep_ms: 0,
    },
    Case {
        name: "del",
        setup: &[&["SET", "k", "1"]],
        other: &[&["DEL", "k"]],
        sleep_ms: 0,
    },
    Case {
        name: "expire",
        setup: &[&["SET", "k", "1"]],
        other: &[&["EXPIRE", "k", "100"]],
        sleep_ms: 0,
    },
    Case {
        name: "rename onto",
        setup: &[&["SET", "k", "1"], &["SET", "src", "2"]],
        other: &[&["RENAME", "src", "k"]],
        sleep_ms: 0,
    },
    Case {
        name: "rename away",
        setup: &[&["SET", "k", "1"]],
        other: &[&["RENAME", "k", "dst"]],
        sleep_ms: 0,
    },
    Case {
        name: "flushall",
        setup: &[&["SET", "k", "1"]],
        other: &[&["FLUSHALL"]],
        sleep_ms: 0,
    },
    Case {
        name: "flushall, key absent",
        setup: &[],
        other: &[&["FLUSHALL"]],
        sleep_ms: 0,
    },
    Case {
        name: "another key",
        setup: &[&["SET", "k", "1"]],
        other: &[&["SET", "j", "1"]],
        sleep_ms: 0,
    },
    Case {
        name: "read",
        setup: &[&["SET", "k", "1"]],
        other: &[&["GET", "k"]],
        sleep_ms: 0,
    },
    Case {
        name: "smove of a member the watched set has already",
        setup: &[&["SADD", "k", "a"], &["SADD", "src", "a", "b"]],
        other: &[&["SMOVE", "src", "k", "a"]],
        sleep_ms: 0,
    },
    Case {
        name: "smove into the watched set",
        setup: &[&["SADD", "k", "x"], &["SADD", "src", "a"]],
        other: &[&["SMOVE", "src", "k", "a"]],
        sleep_ms: 0,
    },
    Case {
        name: "smove out of the watched set",
        setup: &[&["SADD", "k", "a", "b"]],
        other: &[&["SMOVE", "k", "dst", "a"]],
        sleep_ms: 0,
    },
    Case {
        name: "smove of a member the source lacks",
        setup: &[&["SADD", "k", "a"], &["SADD", "src", "b"]],
        other: &[&["SMOVE", "src", "k", "z"]],
        sleep_ms: 0,
    },
    Case {
        name: "expires after WATCH",
        setup: &[&["SET", "k", "1", "PX", "100"]],
        other: &[],
        sleep_ms: 250,
    },
    Case {
        name: "expires after WATCH, removed by a read",
        setup: &[&["SET", "k", "1", "PX", "100"]],
        other: &[&["DEBUG-SLEEP"], &["GET", "k"]],
        sleep_ms: 0,
    },
];

/// Runs every case on `port` and returns the EXEC replies.
fn run_cases(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for case in CASES {
        let mut w = conn(port);
        let mut other = conn(port);
        w.cmd(&["FLUSHALL"]);
        for args in case.setup {
            w.cmd(args);
        }
        assert_eq!(w.cmd(&["WATCH", "k"]), b"+OK\r\n", "{}", case.name);
        for args in case.other {
            if args[0] == "DEBUG-SLEEP" {
                std::thread::sleep(Duration::from_millis(250));
            } else {
                other.cmd(args);
            }
        }
        std::thread::sleep(Duration::from_millis(case.sleep_ms));
        w.cmd(&["MULTI"]);
        w.cmd(&["SET", "k", "done"]);
        out.push(text(&w.cmd(&["EXEC"])));
    }
    out
}

#[test]
fn watch_aborts_exec_on_the_same_changes_as_redis() {
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    let node = start_node(free_port());
    let want = run_cases(redis.port);
    let got = run_cases(node.port);
    for ((case, w), g) in CASES.iter().zip(&want).zip(&got) {
        assert_eq!(g, w, "{}", case.name);
    }
    // The matrix exercises both outcomes.
    assert!(want.iter().any(|r| r == "*-1\r\n"));
    assert!(want.iter().any(|r| r == "*1\r\n+OK\r\n"));
    // Also a watcher's own write, and an expired key watched: it expired
    // before WATCH, so its removal is no change.
    let mut w = conn(node.port);
    w.cmd(&["WATCH", "own"]);
    w.cmd(&["SET", "own", "1"]);
    w.cmd(&["MULTI"]);
    assert_eq!(w.cmd(&["EXEC"]), b"*-1\r\n");
}

#[test]
fn watch_is_conservative_where_the_readme_says() {
    // A write command naming the key aborts even when it changed nothing
    // (Redis would run these transactions).
    let node = start_node(free_port());
    for (setup, write) in [
        (vec!["SADD", "k", "m"], vec!["SADD", "k", "m"]),
        (vec!["SET", "x", "1"], vec!["DEL", "k"]),
    ] {
        let mut w = conn(node.port);
        let mut other = conn(node.port);
        other.cmd(&setup);
        w.cmd(&["WATCH", "k"]);
        other.cmd(&write);
        w.cmd(&["MULTI"]);
        assert_eq!(w.cmd(&["EXEC"]), b"*-1\r\n", "{write:?}");
    }
}

#[test]
fn watch_sees_eviction_migrate_and_restore() {
    let a = start_node(free_port());
    let b = start_node(free_port());
    let mut w = conn(a.port);
    let mut other = conn(a.port);
    // MIGRATE deletes the source copy: a watcher there must see it.
    other.cmd(&["SET", "m", "1"]);
    w.cmd(&["WATCH", "m"]);
    let target = b.port.to_string();
    assert_eq!(
        other.cmd(&["MIGRATE", "127.0.0.1", &target, "m", "0", "5000"]),
        b"+OK\r\n"
    );
    w.cmd(&["MULTI"]);
    assert_eq!(w.cmd(&["EXEC"]), b"*-1\r\n", "MIGRATE at the source");
    // …and the RESTORE it sent reached a watcher at the target.
    let mut wb = conn(b.port);
    wb.cmd(&["WATCH", "n"]);
    other.cmd(&["SET", "n", "2"]);
    other.cmd(&["MIGRATE", "127.0.0.1", &target, "n", "0", "5000"]);
    wb.cmd(&["MULTI"]);
    assert_eq!(wb.cmd(&["EXEC"]), b"*-1\r\n", "RESTORE at the target");
    // Eviction: the only key with a TTL goes first under volatile-ttl.
    other.cmd(&["FLUSHALL"]);
    other.cmd(&["SET", "v", "1", "EX", "1000"]);
    w.cmd(&["WATCH", "v"]);
    other.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]);
    other.cmd(&["CONFIG", "SET", "maxmemory", "3mb"]);
    let big = "x".repeat(100_000);
    for i in 0..40 {
        other.cmd(&["SET", &format!("fill:{i}"), &big]);
    }
    assert_eq!(other.cmd(&["EXISTS", "v"]), b":0\r\n", "v was evicted");
    w.cmd(&["MULTI"]);
    assert_eq!(w.cmd(&["EXEC"]), b"*-1\r\n", "eviction");
}

fn watched_keys(port: u16) -> u64 {
    let info = text(&conn(port).cmd(&["INFO", "clients"]));
    info.lines()
        .find_map(|l| l.strip_prefix("shardis_watched_keys:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no shardis_watched_keys in {info}"))
}

#[test]
fn a_clients_watches_are_dropped_by_exec_unwatch_and_disconnect() {
    let node = start_node(free_port());
    let mut w = conn(node.port);
    let keys: Vec<String> = (0..1000).map(|i| format!("w:{i}")).collect();
    let mut args = vec!["WATCH"];
    args.extend(keys.iter().map(|k| k.as_str()));
    assert_eq!(w.cmd(&args), b"+OK\r\n");
    assert_eq!(w.cmd(&args), b"+OK\r\n", "a key is watched once");
    assert_eq!(watched_keys(node.port), 1000);
    w.cmd(&["UNWATCH"]);
    assert_eq!(watched_keys(node.port), 0);
    w.cmd(&args);
    w.cmd(&["MULTI"]);
    assert_eq!(w.cmd(&["EXEC"]), b"*0\r\n");
    assert_eq!(watched_keys(node.port), 0);
    w.cmd(&args);
    drop(w);
    let deadline = Instant::now() + TIMEOUT;
    while watched_keys(node.port) != 0 {
        assert!(Instant::now() < deadline, "the watches outlived the client");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_transaction_over_the_byte_cap_is_refused_and_discarded() {
    let node = start_node(free_port());
    let mut c = conn(node.port);
    let big = "v".repeat(50 * 1024 * 1024);
    c.cmd(&["MULTI"]);
    assert_eq!(c.cmd(&["SET", "a", &big]), b"+QUEUED\r\n");
    assert_eq!(c.cmd(&["SET", "b", &big]), b"+QUEUED\r\n");
    let e = text(&c.cmd(&["SET", "c", &big]));
    assert!(e.starts_with("-ERR transaction too large"), "{e}");
    assert_eq!(c.cmd(&["SET", "d", "1"]), b"+QUEUED\r\n");
    assert_eq!(
        text(&c.cmd(&["EXEC"])),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(c.cmd(&["EXISTS", "a", "b", "c", "d"]), b":0\r\n");
}

/// The values of an MGET reply (`None` for nil).
fn mget_values(reply: &str) -> Vec<Option<&str>> {
    let mut lines = reply.split("\r\n").skip(1);
    let mut vals = Vec::new();
    while let Some(head) = lines.next() {
        match head {
            "$-1" => vals.push(None),
            h if h.starts_with('$') => vals.push(lines.next()),
            _ => {}
        }
    }
    vals
}

/// Two writers run `MULTI; INCR {x}a; INCR {x}c ×50; INCR {x}b; EXEC` while
/// a reader MGETs a and b; returns how many reads saw a != b.
fn torn_reads(port: u16, budget: Duration, stop_at_first: bool) -> (u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let torn = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + budget;
    let mut writers = Vec::new();
    for _ in 0..2 {
        let stop = stop.clone();
        writers.push(std::thread::spawn(move || {
            let mut c = conn(port);
            let mut tx: Vec<Vec<&[u8]>> = vec![vec![b"MULTI"], vec![b"INCR", b"{x}a"]];
            tx.extend((0..50).map(|_| vec![&b"INCR"[..], &b"{x}c"[..]]));
            tx.push(vec![b"INCR", b"{x}b"]);
            tx.push(vec![b"EXEC"]);
            for _ in 0..5000 {
                if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                    break;
                }
                for args in &tx {
                    c.queue(args);
                }
                c.flush().unwrap();
                for _ in 0..tx.len() {
                    c.read_reply().unwrap();
                }
            }
        }));
    }
    let mut r = conn(port);
    while Instant::now() < deadline && writers.iter().any(|w| !w.is_finished()) {
        let reply = text(&r.cmd(&["MGET", "{x}a", "{x}b"]));
        reads.fetch_add(1, Ordering::Relaxed);
        let vals = mget_values(&reply);
        assert_eq!(vals.len(), 2, "{reply:?}");
        if vals[0] != vals[1] {
            torn.fetch_add(1, Ordering::Relaxed);
            if stop_at_first {
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    (torn.load(Ordering::Relaxed), reads.load(Ordering::Relaxed))
}

#[test]
fn exec_is_atomic_on_a_node_with_several_worker_threads() {
    let node = start_node_with(4, &[]);
    let (torn, reads) = torn_reads(node.port, Duration::from_secs(8), false);
    assert!(reads > 100, "only {reads} reads");
    assert_eq!(torn, 0, "{torn} of {reads} reads saw half a transaction");
    node.assert_no_panic();
}

#[test]
fn the_atomicity_test_sees_a_transaction_that_does_not_exclude_others() {
    // The same load on a node whose EXEC does not take the gate
    // exclusively: some read must see half a transaction.
    let node = start_node_with(4, &[("SHARDIS_FAULT_TX", "no-gate")]);
    let (torn, reads) = torn_reads(node.port, Duration::from_secs(60), true);
    assert!(torn > 0, "no torn read in {reads} reads");
}

/// What the served side of a blocked pop does to transactions, on one
/// server: a BLMOVE served by another client's push changes its
/// destination in place, which a WATCH on that destination must see; and
/// a blocking pop queued in MULTI answers at once like a timeout.
fn blocking_and_transactions(port: u16) -> Vec<String> {
    let mut w = conn(port);
    let mut blocked = conn(port);
    let mut pusher = conn(port);
    let mut seen = Vec::new();
    w.cmd(&["DEL", "src", "dst", "k"]);
    w.cmd(&["RPUSH", "dst", "old"]);
    w.cmd(&["WATCH", "dst"]);
    blocked
        .send(&[b"BLMOVE", b"src", b"dst", b"LEFT", b"RIGHT", b"0"])
        .unwrap();
    // The BLMOVE is waiting once the server counts it blocked.
    let deadline = Instant::now() + TIMEOUT;
    while !text(&pusher.cmd(&["INFO", "clients"])).contains("blocked_clients:1\r\n") {
        assert!(Instant::now() < deadline, "BLMOVE never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    seen.push(text(&pusher.cmd(&["RPUSH", "src", "x"])));
    seen.push(text(&blocked.read_reply().unwrap()));
    w.cmd(&["MULTI"]);
    w.cmd(&["SET", "k", "done"]);
    seen.push(text(&w.cmd(&["EXEC"])));
    seen.push(text(&w.cmd(&["LRANGE", "dst", "0", "-1"])));
    // Queued blocking pops do not block.
    w.cmd(&["MULTI"]);
    for c in [
        &["BLPOP", "none", "0"][..],
        &["BLMOVE", "none", "dst", "LEFT", "LEFT", "0"],
        &["BZPOPMIN", "none", "0"],
        &["BLPOP", "dst", "0"],
    ] {
        seen.push(text(&w.cmd(c)));
    }
    seen.push(text(&w.cmd(&["EXEC"])));
    seen
}

#[test]
fn a_served_blocked_pop_aborts_a_watch_and_pops_in_multi_do_not_block() {
    let node = start_node(free_port());
    let got = blocking_and_transactions(node.port);
    assert_eq!(
        got[2], "*-1\r\n",
        "the WATCH on dst missed the served BLMOVE"
    );
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    assert_eq!(got, blocking_and_transactions(redis.port));
}
