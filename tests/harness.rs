//! The test harness itself: a test that cannot run is named at the end of
//! `cargo test` with the command that enables it (and fails when components
//! are required), and every process a test starts dies with the test binary,
//! even when that binary is SIGKILLed.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Set in a child run of this binary: the probe below then asks for
/// redis-server (hidden from it by `SHARDIS_TEST_HIDE`).
const PROBE: &str = "SHARDIS_SKIP_PROBE";
/// Set in a child run of this binary: the holder below starts processes,
/// writes their pids to this file and waits to be killed.
const HOLD: &str = "SHARDIS_HOLD_CHILDREN";

#[test]
fn probe_wants_redis_server_when_asked() {
    if std::env::var_os(PROBE).is_some() && have_tool("redis-server") {
        panic!("redis-server was to be hidden from this probe");
    }
}

/// This binary again, running only `test`, with `env`.
fn rerun(test: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--test-threads", "1"])
        .env_remove("SHARDIS_REQUIRE_REDIS")
        .envs(env.iter().copied());
    output(&mut cmd)
}

#[test]
fn a_skipped_test_is_named_at_the_end_with_the_command_that_enables_it() {
    let probe = "probe_wants_redis_server_when_asked";
    let hide = ("SHARDIS_TEST_HIDE", "redis-server");
    let out = rerun(probe, &[(PROBE, "1"), hide]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "a skip reports ok: {text}");

    // What tests/zz_skipped.rs prints for that run (its parent: this test).
    let summary = common::ledger::summary(&common::ledger::run_of(std::process::id()));
    assert!(summary.contains("skipped: 1 test did not run"), "{summary}");
    assert!(
        summary.contains("1 in harness: redis-server is not on PATH"),
        "{summary}"
    );
    assert!(
        summary.contains("apt-get install redis-server"),
        "{summary}"
    );
    assert!(summary.contains("SHARDIS_REQUIRE_REDIS=1"), "{summary}");
    let again = common::ledger::summary(&common::ledger::run_of(std::process::id()));
    assert!(again.contains("skipped: none"), "printed once: {again}");

    // Required components: the same probe fails, naming what is missing.
    let out = rerun(probe, &[(PROBE, "1"), hide, ("SHARDIS_REQUIRE_REDIS", "1")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "a missing component must fail: {text}"
    );
    assert!(
        text.contains("redis-server is not on PATH, which SHARDIS_REQUIRE_REDIS=1 requires"),
        "{text}"
    );
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// In a child run: a cluster (over redis-servers when installed), one more
/// node started by a thread that has ended since, their pids in the file.
#[test]
fn holder_starts_processes_when_asked() {
    let Some(file) = std::env::var_os(HOLD) else {
        return;
    };
    let redis = Command::new("sh")
        .args(["-c", "command -v redis-server"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let start = move || {
        if redis {
            start_redis(free_port())
        } else {
            start_node(free_port())
        }
    };
    let c = Cluster::over(vec![start(), start()], "");
    let from_thread = std::thread::spawn(start).join().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !is_dead(from_thread.pid()),
        "a thread's end killed its child"
    );
    let mut pids: Vec<u32> = c.nodes.iter().map(|n| n.pid()).collect();
    pids.extend([c.proxy.pid(), from_thread.pid()]);
    let list: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
    std::fs::write(&file, list.join(" ") + "\n").unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn every_process_a_test_started_dies_when_the_test_binary_is_killed() {
    let dir = tempdir::Dir::new();
    let file = dir.path().join("pids");
    let mut holder = Command::new(std::env::current_exe().unwrap());
    holder
        .args(["--exact", "holder_starts_processes_when_asked"])
        .env(HOLD, &file)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut holder = spawn_dying_with_test(&mut holder).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let pids: Vec<u32> = loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.ends_with('\n') {
            break text
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "the holder never started its processes"
        );
        assert!(holder.try_wait().unwrap().is_none(), "the holder exited");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(pids.len(), 4);
    assert!(pids.iter().all(|&p| !is_dead(p)), "all running: {pids:?}");

    holder.kill().unwrap(); // SIGKILL: no destructor runs in the holder
    holder.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pids.iter().all(|&p| is_dead(p)) {
        let alive: Vec<_> = pids.iter().filter(|&&p| !is_dead(p)).collect();
        assert!(Instant::now() < deadline, "still running: {alive:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
