//! `shardis check --fleet 3 --short`: three proxies sharing their topology
//! in a real etcd, the checker's workers spread over them, every scenario
//! (ADDNODE and REMOVENODE on one proxy, kill -9 of the leader mid-copy,
//! SIGSTOP of a non-leader across a change, etcd restarted mid-change, a
//! CONFIG RELOAD that adds a node) reported on its own line with 0
//! violations and real load; and the negative control: with the dirty-key
//! re-sync switched off on every proxy (`SHARDIS_FAULT_SKIP_RESYNC`, through
//! the checker's hidden `--inject-skip-resync`) it reports lost writes and
//! fails. Skips without `etcd` on PATH.

mod common;

use std::process::Command;

use common::*;

const SCENARIOS: [&str; 6] = [
    "addnode",
    "removenode",
    "kill-leader",
    "stop-follower",
    "etcd-restart",
    "reload-add",
];

/// One fleet at a time: two at once on a small machine would slow the
/// copies past the points the scenarios interrupt.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_fleet_check(extra: &[&str]) -> (bool, String) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(BIN)
        .args(["check", "--fleet", "3", "--short", "--max-secs", "300"])
        .args(extra)
        .output_dying()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(5).collect();
    eprintln!("{text}{}", tail.join("\n"));
    (out.status.success(), text)
}

/// The number after `key=` on `line`.
fn value(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key}= in {line}"))
}

fn scenario_line<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("scenario {name} in {report}"))
}

#[test]
fn every_fleet_scenario_passes_with_writes_through_three_proxies() {
    if !have_tool("etcd") {
        return;
    }
    let (ok, report) = run_fleet_check(&[]);
    assert!(
        ok && report.contains("verdict: PASS (0 violations)"),
        "{report}"
    );
    for name in SCENARIOS {
        let line = scenario_line(&report, name);
        assert_eq!(value(line, "violations"), 0, "{line}");
        assert!(value(line, "acked") > 500, "too little load: {line}");
    }
    for line in [
        "lost acknowledged writes: 0",
        "stale reads: 0",
        "resurrected deletes: 0",
        "wrong counters: 0",
        "lost TTLs: 0",
        "orphaned copies: 0",
    ] {
        assert!(report.contains(line), "{line} in {report}");
    }
    let stop = scenario_line(&report, "stop-follower");
    assert!(stop.contains(" 0 stale of 500"), "{stop}");
    assert!(stop.contains("once caught up 500 of 500 right"), "{stop}");
}

#[test]
fn the_fleet_check_reports_lost_writes_when_no_proxy_resyncs_dirty_keys() {
    if !have_tool("etcd") {
        return;
    }
    let (ok, report) =
        run_fleet_check(&["--inject-skip-resync", "--scenarios", "addnode,removenode"]);
    assert!(!ok && report.contains("verdict: FAIL"), "{report}");
    let count = |label: &str| -> u64 {
        report
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{label} in {report}"))
    };
    // A write a proxy forgot to re-sync reads back missing or older.
    let (lost, stale) = (count("lost acknowledged writes: "), count("stale reads: "));
    assert!(lost + stale > 0, "{report}");
}
