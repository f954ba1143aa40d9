//! The test harness itself: a test that cannot run is named at the end of
//! `cargo test` with the command that enables it (and fails when components
//! are required).

mod common;

use std::process::Command;

use common::*;

/// Set in a child run of this binary: the probe below then asks for
/// redis-server (hidden from it by `SHARDIS_TEST_HIDE`).
const PROBE: &str = "SHARDIS_SKIP_PROBE";

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
