//! Unmodified client libraries against the proxy, each through its own API:
//! redis-py 5 and 8 (`scan_iter`), ioredis 5 (`scanStream`), node-redis 4
//! and 6 (`scanIterator`), over built-in nodes and over redis-servers; and
//! applications built on scripts over built-in nodes: BullMQ's queue,
//! rate-limiter-flexible and redlock.
//!
//! The tests install the libraries on first use (redis-py into
//! `target/clients/py5` and `py8`, the Node.js ones with `npm ci` in
//! `tests/clients/node`); when that fails they skip, named at the end of
//! `cargo test`, and fail under `SHARDIS_REQUIRE_REDIS=1`.

mod common;

use std::process::Command;

use common::*;

/// Keys each client writes and then walks with its SCAN iterator: enough
/// that every node's cursor goes through many rounds.
const SCAN_KEYS: &str = "20000";

fn redis_py(port: u16, types: bool) {
    let script = manifest().join("tests/clients/redis_py.py");
    for v in [5, 8] {
        let Some(lib) = common::redis_py(v) else {
            continue;
        };
        let mut cmd = Command::new("timeout");
        cmd.args(["120", "python3"])
            .arg(&script)
            .args([&port.to_string(), SCAN_KEYS])
            .env("PYTHONPATH", &lib);
        if types {
            cmd.arg("--types");
        }
        let out = run_ok(&mut cmd);
        assert!(out.contains(&format!("redis-py {v}.")), "{out}");
    }
}

fn node_clients(port: u16, types: bool) {
    let Some(dir) = common::node_clients() else {
        return;
    };
    let mut cmd = Command::new("timeout");
    cmd.args(["120", "node"])
        .arg(dir.join("clients.js"))
        .args([&port.to_string(), SCAN_KEYS]);
    if types {
        cmd.arg("--types");
    }
    let out = run_ok(&mut cmd);
    for lib in ["ioredis 5.", "redis4 4.", "redis6 6."] {
        assert!(out.contains(lib), "{lib} did not report:\n{out}");
    }
}

#[test]
fn redis_py_5_and_8_walk_every_key_over_builtin_nodes() {
    let c = Cluster::builtin(10);
    redis_py(c.proxy.port, false);
}

#[test]
fn redis_py_5_and_8_work_over_redis_servers() {
    if !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(4);
    redis_py(c.proxy.port, true);
}

#[test]
fn ioredis_and_node_redis_walk_every_key_over_builtin_nodes() {
    if !have_tool("node") {
        return;
    }
    let c = Cluster::builtin(10);
    node_clients(c.proxy.port, false);
}

#[test]
fn ioredis_and_node_redis_work_over_redis_servers() {
    if !have_tool("node") || !have_tool("redis-server") {
        return;
    }
    let c = Cluster::redis(4);
    node_clients(c.proxy.port, true);
}

/// Runs `script` from `tests/clients/node` with `args`; its output.
fn node_app(script: &str, args: &[&str]) -> Option<String> {
    if !have_tool("node") {
        return None;
    }
    let dir = common::node_clients()?;
    let mut cmd = Command::new("timeout");
    cmd.args(["240", "node"]).arg(dir.join(script)).args(args);
    Some(run_ok(&mut cmd))
}

#[test]
fn bullmq_processes_ten_thousand_jobs_exactly_once_over_builtin_nodes() {
    let c = Cluster::builtin(3);
    let port = c.proxy.port.to_string();
    if let Some(out) = node_app("bullmq.js", &[&port, "10000"]) {
        assert!(
            out.contains("10000 jobs completed once each, 200 retried"),
            "{out}"
        );
    }
}

#[test]
fn rate_limiter_and_redlock_hold_over_builtin_nodes() {
    let c = Cluster::builtin(3);
    if let Some(out) = node_app("locks.js", &[&c.proxy.port.to_string()]) {
        assert!(out.contains("rate-limiter-flexible 5."), "{out}");
        assert!(out.contains("redlock 4."), "{out}");
    }
}
