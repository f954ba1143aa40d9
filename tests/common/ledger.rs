#![allow(dead_code)]
//! The skip ledger: one line per test that did not run for want of
//! something on this machine, appended by [`super::skip`] and read by
//! `tests/zz_skipped.rs`, the binary `cargo test` runs last, which prints
//! the summary (libtest keeps a passing test's own output to itself).
//!
//! A line is `run \t binary \t test \t what is missing \t how to get it`;
//! `run` names one `cargo test` invocation, so lines of an earlier run never
//! count.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

/// The ledger file: in the profile folder (`target/debug`), beside `deps/`
/// where the test binaries are.
pub fn path() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps folder");
    deps.parent().unwrap_or(deps).join("skipped-tests.tsv")
}

/// This `cargo test` invocation: the parent's pid and start time (every test
/// binary of one run is a child of the same cargo).
pub fn run_id() -> String {
    run_of(std::os::unix::process::parent_id())
}

/// The run whose test binaries are children of process `pid`.
pub fn run_of(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Field 22 (start time), counted after the `(comm)` that may hold spaces.
    let start = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .unwrap_or("0");
    format!("{pid}.{start}")
}

/// One test that did not run.
pub struct Entry {
    pub run: String,
    pub binary: String,
    pub test: String,
    pub missing: String,
    pub enable: String,
}

/// The running test binary's name, without cargo's hash suffix.
pub fn binary_name() -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    let stem = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
        _ => stem.to_string(),
    }
}

/// Appends one line; a short write with `O_APPEND` lands whole even when
/// several binaries write at once.
pub fn append(test: &str, missing: &str, enable: &str) {
    let clean = |s: &str| s.replace(['\t', '\n'], " ");
    let line = format!(
        "{}\t{}\t{}\t{}\t{}\n",
        run_id(),
        binary_name(),
        clean(test),
        clean(missing),
        clean(enable)
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path())
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Every line of the ledger.
pub fn read() -> Vec<Entry> {
    let text = std::fs::read_to_string(path()).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(5, '\t').map(str::to_string);
            Some(Entry {
                run: f.next()?,
                binary: f.next()?,
                test: f.next()?,
                missing: f.next()?,
                enable: f.next()?,
            })
        })
        .collect()
}

/// The summary of run `run`'s skipped tests, grouped by what was missing,
/// each with the command that enables it; the run's lines then leave the
/// ledger (with those of finished runs).
pub fn summary(run: &str) -> String {
    let mut out = String::new();
    let (ours, others): (Vec<_>, Vec<_>) = read().into_iter().partition(|e| e.run == run);
    forget_finished_runs(&others);

    // (what is missing, how to get it) -> the tests that wanted it.
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for e in &ours {
        let tests = groups
            .entry((e.missing.clone(), e.enable.clone()))
            .or_default();
        let name = format!("{}::{}", e.binary, e.test);
        if !tests.contains(&name) {
            tests.push(name);
        }
    }
    let mut skipped: Vec<&String> = groups.values().flatten().collect();
    skipped.sort();
    skipped.dedup();
    if skipped.is_empty() {
        out += "\nskipped: none, every test ran\n";
        return out;
    }
    let n = skipped.len();
    let tests = if n == 1 { "test" } else { "tests" };
    out += &format!("\nskipped: {n} {tests} did not run (each reported ok as a no-op):\n");
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|(_, tests)| std::cmp::Reverse(tests.len()));
    for ((missing, enable), tests) in groups {
        let mut binaries: Vec<&str> = tests
            .iter()
            .map(|t| t.split("::").next().unwrap())
            .collect();
        binaries.dedup();
        out += &format!(
            "  {:>3} in {}: {missing}\n        {enable}\n",
            tests.len(),
            binaries.join(", ")
        );
    }
    out += "  SHARDIS_REQUIRE_REDIS=1 makes each of these a failure instead.\n";
    out
}

/// Keeps only the lines of runs still going (another `cargo test` at the
/// same time); this run's are printed now, finished runs' are stale.
fn forget_finished_runs(others: &[Entry]) {
    let alive = |run: &str| {
        let pid = run.split('.').next().unwrap_or("");
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    };
    let kept: String = others
        .iter()
        .filter(|e| alive(&e.run))
        .map(|e| {
            format!(
                "{}\t{}\t{}\t{}\t{}\n",
                e.run, e.binary, e.test, e.missing, e.enable
            )
        })
        .collect();
    let _ = std::fs::write(path(), kept);
}
