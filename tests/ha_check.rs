//! `shardis check --ha` in short form (one run of each scenario): kill -9
//! of a primary under `write_ack = "primary"` and `"replica"`, kill -9 of a
//! replica, a planned CLUSTER FAILOVER, an old primary restarted after a
//! failover, and on redis-server Sentinel mode with real `redis-sentinel`.
//! Every promise holds: no acknowledged write lost and no delete undone
//! under `write_ack = "replica"`, no client error when a replica dies or
//! on a planned failover. The table is printed.

mod common;
mod ha;

use common::*;
use ha::*;

/// The failover scenarios (the stale reads have `ha_stale.rs`).
fn check_ha(backend: &str) -> String {
    check_ha_with(&[
        "--short",
        "--runs",
        "1",
        "--scenarios",
        "failover",
        "--backend",
        backend,
        "--max-secs",
        "300",
    ])
}

/// The table's row for `scenario`.
fn row<'a>(table: &'a str, scenario: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.starts_with(&format!("| {scenario} |")))
        .unwrap_or_else(|| panic!("{scenario} in {table}"))
}

#[test]
fn every_failover_scenario_keeps_its_promise_on_builtin_nodes() {
    let t = check_ha("builtin");
    for s in [
        "kill -9 primary, 2 replicas, write_ack=replica",
        "kill -9 replica",
        "CLUSTER FAILOVER (planned)",
        "old primary restarted, write_ack=replica",
    ] {
        assert!(row(&t, s).contains(": ok |"), "{}", row(&t, s));
    }
}

#[test]
fn every_failover_scenario_keeps_its_promise_on_redis_server_and_sentinel() {
    if !need_redis("ha_check") {
        return;
    }
    let t = check_ha("redis");
    if have_tool("redis-sentinel") {
        let s = row(&t, "Sentinel mode, 2 replicas, write_ack=replica");
        assert!(s.contains(": ok |"), "{s}");
    }
}
