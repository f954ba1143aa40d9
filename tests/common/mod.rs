//! Test harness: real processes on loopback ports — built-in nodes, redis-server,
//! the proxy — each killed when its handle drops and when the test binary
//! dies, so no test leaves an orphan.
//!
//! Every process's stderr is captured: a `panicked at` line in it fails the
//! test when the handle drops (or earlier, at [`Proc::assert_no_panic`]),
//! with the tail of that stderr in the message. Nothing to remember: every
//! process here is a [`Proc`].
//!
//! A test that needs what this machine lacks skips through [`skip`], which
//! records it for the summary `tests/zz_skipped.rs` prints at the end of
//! `cargo test`; client libraries it installs itself under `target/`.
// Each test binary uses a part of the harness: what it leaves is no defect.
#![allow(dead_code, unused_imports)]

use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

pub mod blocked;
pub mod certs;
pub mod cluster;
pub mod compare;
pub mod conn;
pub mod etcd;
pub mod frames;
pub mod http;
pub mod inproc;
pub mod procs;
pub mod skip;
pub mod tempdir;
pub mod writers;

pub use blocked::*;
pub use certs::*;
pub use cluster::*;
pub use conn::*;
pub use procs::*;
pub use skip::*;

pub const BIN: &str = env!("CARGO_BIN_EXE_shardis");

/// Waits (at most `secs`, every 50 ms) until `cond` holds; fails naming `what`.
pub fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Calls `probe` (at most `secs`, every 20 ms) until `ok` holds on its
/// answer; returns that answer. Fails naming `what` and the last answer.
pub fn poll_until(
    secs: u64,
    what: &str,
    mut probe: impl FnMut() -> String,
    ok: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let answer = probe();
        if ok(&answer) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "waited {secs} s for {what}: {answer}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A port nobody listens on right now.
/// A std listener on a free loopback port below the ephemeral range.
pub fn bind_free() -> std::net::TcpListener {
    shardis::procs::bind_free().unwrap()
}

/// The same, for tokio.
pub fn bind_free_tokio() -> tokio::net::TcpListener {
    let l = bind_free();
    l.set_nonblocking(true).unwrap();
    tokio::net::TcpListener::from_std(l).unwrap()
}

pub fn free_port() -> u16 {
    shardis::procs::free_port().unwrap()
}

/// A block of `n` consecutive free ports.
pub fn free_block(n: usize) -> u16 {
    'search: for _ in 0..50 {
        let base = free_port();
        if base as usize + n >= 65_000 {
            continue;
        }
        for p in base..base + n as u16 {
            if std::net::TcpListener::bind(("127.0.0.1", p)).is_err() {
                continue 'search;
            }
        }
        return base;
    }
    panic!("no block of {n} free ports");
}

/// The crate root, where the client scripts and installed libraries live.
pub fn manifest() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether something accepts connections on `port`.
pub fn is_listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// Waits (up to `secs`) until nothing listens on any of `ports`.
pub fn wait_closed(ports: impl Iterator<Item = u16> + Clone, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while ports.clone().any(is_listening) {
        assert!(Instant::now() < deadline, "a node is still listening");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a client to its end (dying with the test binary, as every child
/// does) and returns what it printed; fails when it fails.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = output(cmd);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "client failed:\n{text}");
    text
}

/// `cmd.output()`, with the child dying with the test binary.
pub fn output(cmd: &mut Command) -> std::process::Output {
    cmd.output_dying()
        .unwrap_or_else(|e| panic!("run {cmd:?}: {e}"))
}

/// Resident memory of process `pid`, in bytes (VmRSS from /proc).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc status");
    kb * 1024
}
