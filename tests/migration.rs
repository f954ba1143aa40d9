//! Topology changes at runtime: ADDNODE / REMOVENODE with online migration,
//! admin errors, persistence, and the consistency checker (including proof that
//! it catches a broken migration).

mod common;

use std::process::Command;

use common::*;
use redis::Commands;

fn wait_ok(con: &mut redis::Connection) -> String {
    wait_state_ok(con, 120)
}

#[test]
fn adding_and_removing_nodes_moves_only_the_keys_that_must_move() {
    let n = 40_000;
    let mut c = Cluster::builtin(10);
    let mut con = c.client();
    mset_keys(&mut con, "user:", n);
    let extra = start_node(free_port());
    let before: Vec<i64> = c.nodes.iter().map(|x| dbsize(x.port)).collect();
    add_node(&mut con, &extra.addr(), "node11");
    // Readable throughout the change.
    assert_eq!(
        mset_keys_readable(&mut con, "user:", n),
        n,
        "every key readable during the migration"
    );
    let info = wait_ok(&mut con);
    assert_eq!(
        mset_keys_readable(&mut con, "user:", n),
        n,
        "every key readable after the migration"
    );
    let moved = dbsize(extra.port);
    let fraction = moved as f64 / n as f64;
    eprintln!(
        "10 -> 11 nodes: {moved} of {n} keys moved ({:.2}%, ideal {:.2}%)",
        fraction * 100.0,
        100.0 / 11.0
    );
    assert!(
        (0.05..=0.12).contains(&fraction),
        "moved fraction {fraction}"
    );
    assert_eq!(
        ring_field(&info, "migration_keys_copied"),
        moved.to_string()
    );
    // Only the keys the new node took left their old nodes, and each old node lost some.
    let after: Vec<i64> = c.nodes.iter().map(|x| dbsize(x.port)).collect();
    assert_eq!(
        before.iter().sum::<i64>() - after.iter().sum::<i64>(),
        moved
    );
    assert!(
        before.iter().zip(&after).all(|(b, a)| a < b),
        "keys come from every old node: {before:?} -> {after:?}"
    );
    let owner = keynode(&mut con, "user:1");
    assert!(owner.starts_with("node"));
    let nodes: String = redis::cmd("CLUSTER").arg("RING").query(&mut con).unwrap();
    assert_eq!(nodes.lines().count(), 11, "{nodes}");

    // Remove node3: its keys are served by their new owners, none lost.
    let node3_keys = dbsize(c.nodes[2].port);
    let _: () = redis::cmd("CLUSTER")
        .arg("REMOVENODE")
        .arg("node3")
        .query(&mut con)
        .unwrap();
    let info = wait_ok(&mut con);
    assert_eq!(
        ring_field(&info, "migration_keys_copied"),
        node3_keys.to_string()
    );
    assert_eq!(dbsize(c.nodes[2].port), 0, "the removed node was emptied");
    assert_eq!(mset_keys_readable(&mut con, "user:", n), n);
    let rebuild_us: u64 = ring_field(&info, "ring_rebuild_us").parse().unwrap();
    eprintln!("ring rebuild on remove: {rebuild_us} us");
    assert!(rebuild_us < 1_000_000);
    c.nodes.push(extra);
}

#[test]
fn bad_topology_changes_are_refused_with_clear_errors() {
    let c = Cluster::builtin(2);
    let mut con = c.client();
    let err = |con: &mut redis::Connection, args: &[&str]| -> String {
        let r: redis::RedisResult<()> = redis::cmd(args[0]).arg(&args[1..]).query(con);
        r.unwrap_err().to_string()
    };
    let dead = format!("127.0.0.1:{}", free_port());
    assert!(err(&mut con, &["CLUSTER", "ADDNODE", &dead]).contains("cannot reach node"));
    assert!(err(&mut con, &["CLUSTER", "ADDNODE", "nonsense"]).contains("invalid node address"));
    assert!(
        err(&mut con, &["CLUSTER", "ADDNODE", &c.nodes[0].addr()]).contains("already in the ring")
    );
    assert!(err(&mut con, &["CLUSTER", "REMOVENODE", "nosuch"]).contains("no node named"));
    let full = start_node(free_port());
    let _: () = connect(full.port).set("x", 1).unwrap();
    assert!(err(&mut con, &["CLUSTER", "ADDNODE", &full.addr()]).contains("not empty"));
    let _: () = redis::cmd("CLUSTER")
        .arg("REMOVENODE")
        .arg("node1")
        .query(&mut con)
        .unwrap();
    wait_ok(&mut con);
    assert!(err(&mut con, &["CLUSTER", "REMOVENODE", "node2"]).contains("last node"));
    assert!(err(&mut con, &["CLUSTER", "RINGINFO", "x"]).contains("wrong number of arguments"));
    let info = cluster_info(&mut con);
    assert_eq!(ring_field(&info, "nodes"), "1");
}

#[test]
fn a_restarted_proxy_routes_exactly_as_before_including_added_nodes() {
    let nodes: Vec<Proc> = (0..3).map(|_| start_node(free_port())).collect();
    let dir = tempdir::Dir::new();
    let state = dir.path().join("topology.toml");
    let port = free_port();
    let mut cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\nstate_file = \"{}\"\n",
        state.display()
    );
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    cfg.push_str(&nodes_toml(&addrs));
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    let mut proxy = start_proxy_with(&path, port);
    let mut con = connect(port);
    mset_keys(&mut con, "user:", 3000);
    let extra = start_node(free_port());
    add_node(&mut con, &extra.addr(), "node4");
    wait_ok(&mut con);
    let owners: Vec<String> = (0..200)
        .map(|i| {
            redis::cmd("CLUSTER")
                .arg("KEYNODE")
                .arg(format!("user:{i}"))
                .query(&mut con)
                .unwrap()
        })
        .collect();
    proxy.kill();
    let _proxy = start_proxy_with(&path, port);
    let mut con = connect(port);
    let info = cluster_info(&mut con);
    assert_eq!(ring_field(&info, "nodes"), "4", "{info}");
    for (i, want) in owners.iter().enumerate() {
        let got = keynode(&mut con, &format!("user:{i}"));
        assert_eq!(&got, want);
    }
    assert_eq!(mset_keys_readable(&mut con, "user:", 3000), 3000);
}

fn run_check(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(BIN)
        .arg("check")
        .args(args)
        .envs(env.iter().copied())
        .output_dying()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!(
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .join("\n")
    );
    (out.status.success(), text)
}

/// The numbers after `label` on its line of the report.
fn numbers(report: &str, label: &str) -> Vec<u64> {
    let line = report
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("{label} in {report}"));
    line.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The transaction workload ran (transfers and WATCH check-and-sets
/// committed) and found nothing.
fn assert_transactions_clean(report: &str) {
    let ran = numbers(
        report,
        "transactions committed (transfers, check-and-sets, check-and-sets aborted by WATCH):",
    );
    assert!(ran.len() == 3 && ran[0] > 0 && ran[1] > 0, "{report}");
    assert_eq!(
        numbers(
            report,
            "transaction violations (broken sums, lost check-and-sets):"
        ),
        [0, 0],
        "{report}"
    );
}

/// The collection workloads ran, were verified, and found nothing.
fn assert_collections_clean(report: &str) {
    let covered = numbers(report, "collection keys verified:");
    assert!(
        covered.len() == 2 && covered.iter().all(|&n| n > 0),
        "collection keys and TTL'd collection keys verified: {report}"
    );
    assert_eq!(
        numbers(report, "collection violations (hash list set zset):"),
        [0, 0, 0, 0],
        "{report}"
    );
}

#[test]
fn consistency_checker_passes_over_builtin_nodes() {
    let (ok, report) = run_check(&["--short", "--backend", "builtin"], &[]);
    assert!(ok && report.contains("PASS (0 violations)"), "{report}");
    for line in [
        "lost acknowledged writes: 0",
        "stale reads: 0",
        "resurrected deletes: 0",
        "orphaned copies: 0",
    ] {
        assert!(report.contains(line), "{line} in {report}");
    }
    assert_collections_clean(&report);
    assert_transactions_clean(&report);
}

#[test]
fn consistency_checker_passes_over_redis_server_nodes() {
    if !have_tool("redis-server") {
        return;
    }
    let (ok, report) = run_check(&["--short", "--backend", "redis"], &[]);
    assert!(ok && report.contains("PASS (0 violations)"), "{report}");
    assert_collections_clean(&report);
    assert_transactions_clean(&report);
}

#[test]
fn consistency_checker_catches_a_migration_that_skips_resync() {
    let (ok, report) = run_check(
        &[
            "--short",
            "--backend",
            "builtin",
            "--workers",
            "8",
            "--inject-skip-resync",
        ],
        &[],
    );
    assert!(
        !ok && report.contains("verdict: FAIL"),
        "the checker must catch the injected fault: {report}"
    );
}

/// Only the hash, list, set and sorted-set workloads run, over a proxy that
/// never re-syncs writes made during a copy: the collection checks must see it.
#[test]
fn consistency_checker_catches_lost_collection_writes() {
    let (ok, report) = run_check(
        &[
            "--short",
            "--backend",
            "builtin",
            "--workers",
            "8",
            "--workload",
            "collections",
            "--inject-skip-resync",
        ],
        &[],
    );
    assert!(
        !ok && report.contains("verdict: FAIL"),
        "the collection checks must catch the injected fault: {report}"
    );
    let found = numbers(&report, "collection violations (hash list set zset):");
    assert!(found.iter().sum::<u64>() > 0, "{report}");
}

/// The fault matrix: each party killed and stopped in each phase, plus an
/// unwritable state file; every scenario must hit its phase and the run must
/// end with zero violations.
fn fault_matrix_passes(threads: &str) {
    if !have_tool("redis-server") {
        return;
    }
    let (ok, report) = run_check(
        &[
            "--short",
            "--backend",
            "redis",
            "--faults",
            "--threads",
            threads,
        ],
        &[],
    );
    assert!(ok && report.contains("PASS (0 violations)"), "{report}");
    assert!(
        report.contains("fault scenarios that missed their phase: 0"),
        "{report}"
    );
    assert_collections_clean(&report);
    for party in ["joining", "old-owner", "proxy"] {
        for fault in ["kill", "stop"] {
            for phase in ["copying", "catch-up", "cutover", "sweeping"] {
                let label = format!("{party} {fault} {phase} ");
                assert!(report.contains(&label), "{label} in {report}");
            }
        }
    }
    assert!(report.contains("state-file unwritable"), "{report}");
    assert!(report.contains("longest client-visible stall"), "{report}");
}

#[test]
fn fault_matrix_passes_on_the_current_thread_runtime() {
    fault_matrix_passes("1");
}

#[test]
fn fault_matrix_passes_on_four_runtime_threads() {
    fault_matrix_passes("4");
}

fn tx_violations(report: &str) -> u64 {
    numbers(
        report,
        "transaction violations (broken sums, lost check-and-sets):",
    )
    .iter()
    .sum()
}

/// Built-in nodes whose EXEC ignores WATCH: the check-and-set counters
/// lose increments, and the checker must say so.
#[test]
fn consistency_checker_catches_an_exec_that_ignores_watch() {
    let (ok, report) = run_check(
        &[
            "--short",
            "--backend",
            "builtin",
            "--workers",
            "8",
            "--workload",
            "transactions",
        ],
        &[("SHARDIS_FAULT_TX", "ignore-watch")],
    );
    assert!(!ok && report.contains("verdict: FAIL"), "{report}");
    assert!(tx_violations(&report) > 0, "{report}");
}

/// A proxy that never re-syncs writes made during a copy: an account
/// copied before a transfer and moved after it breaks the sum.
#[test]
fn consistency_checker_catches_transactions_broken_by_a_migration() {
    let (ok, report) = run_check(
        &[
            "--short",
            "--backend",
            "builtin",
            "--workers",
            "8",
            "--workload",
            "transactions",
            "--inject-skip-resync",
        ],
        &[],
    );
    assert!(!ok && report.contains("verdict: FAIL"), "{report}");
    assert!(tx_violations(&report) > 0, "{report}");
}
