//! What a test needs from this machine. Client libraries are installed on
//! first use under `target/` (redis-py) or the checkout (the Node.js
//! clients' `node_modules`); what only root can install (Debian packages)
//! skips — recorded in the ledger, so the end of `cargo test` names each
//! skipped group and the command that enables it. Under
//! `SHARDIS_REQUIRE_REDIS=1` every skip is a failure instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "ledger.rs"]
pub mod ledger;

use super::manifest;

/// True when `SHARDIS_REQUIRE_REDIS=1`: every optional component must be there.
pub fn redis_required() -> bool {
    std::env::var("SHARDIS_REQUIRE_REDIS")
        .map(|v| v == "1")
        .unwrap_or(false)
}

/// Records that the running test does not run because `missing`, and how to
/// get it; fails instead under `SHARDIS_REQUIRE_REDIS=1`.
pub fn skip(missing: &str, enable: &str) {
    assert!(
        !redis_required(),
        "{missing}, which SHARDIS_REQUIRE_REDIS=1 requires; {enable}"
    );
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    ledger::append(test, missing, enable);
    eprintln!("skipping: {missing}; {enable}");
}

/// Records a skip that is no missing component (a fixed port another
/// program holds): named in the summary, never a failure.
pub fn skip_busy(reason: &str, remedy: &str) {
    let thread = std::thread::current();
    ledger::append(thread.name().unwrap_or("?"), reason, remedy);
    eprintln!("skipping: {reason}; {remedy}");
}

/// Whether the test may hide a missing component: this is what the tests'
/// own check of the skip summary sets to make a tool look absent.
fn hidden(tool: &str) -> bool {
    std::env::var("SHARDIS_TEST_HIDE")
        .map(|v| v.split(',').any(|t| t == tool))
        .unwrap_or(false)
}

/// The Debian package that brings `tool`.
fn package(tool: &str) -> &str {
    match tool {
        "redis-cli" | "redis-benchmark" => "redis-tools",
        "promtool" => "prometheus",
        "node" => "nodejs",
        "etcd" => "etcd-server",
        "tclsh" => "tcl",
        other => other,
    }
}

/// Whether `tool` is on PATH; when it is not, the test skips (recorded, with
/// the package that brings it), or fails when components are required.
pub fn have_tool(tool: &str) -> bool {
    let found = !hidden(tool)
        && Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    if !found {
        skip(
            &format!("{tool} is not on PATH"),
            &format!(
                "install it as root: apt-get install {} (.ci/run installs every one)",
                package(tool)
            ),
        );
    }
    found
}

/// redis-py `major` (5 or 8) under `target/clients/py{major}`, installed
/// there on first use; `None` (a recorded skip) when it cannot be.
pub fn redis_py(major: u32) -> Option<PathBuf> {
    let dir = manifest().join(format!("target/clients/py{major}"));
    let spec = format!("redis>={major},<{}", major + 1);
    let install = format!("python3 -m pip install --target target/clients/py{major} '{spec}'");
    let ok = installed(&dir.join("redis"), &install, || {
        let partial = dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        let _ = std::fs::remove_dir_all(&dir);
        run(Command::new("python3")
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .arg("--no-cache-dir")
            .arg("--target")
            .arg(&partial)
            .arg(&spec))?;
        std::fs::rename(&partial, &dir).map_err(|e| e.to_string())
    });
    ok.then_some(dir)
}

/// `tests/clients/node` with its `node_modules` (ioredis, node-redis 4 and
/// 6, BullMQ, redlock and rate-limiter-flexible from the lock file),
/// installed with `npm ci` on first use.
pub fn node_clients() -> Option<PathBuf> {
    let dir = manifest().join("tests/clients/node");
    if !have_tool("node") {
        return None;
    }
    let install = "npm ci --prefix tests/clients/node";
    // npm writes its hidden lock file last, once every package is in place;
    // one older than the lock file is from before a package was added.
    let done = dir.join("node_modules/.package-lock.json");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&done) < modified(&dir.join("package-lock.json")) {
        let _ = std::fs::remove_file(&done);
    }
    let ok = installed(&done, install, || {
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .arg("--prefix")
            .arg(&dir)
            // Its cache too stays inside the checkout.
            .env("npm_config_cache", manifest().join("target/npm-cache")))
    });
    ok.then_some(dir)
}

/// Whether `done` exists, after running `install` under the install lock
/// when it did not (so parallel tests and test binaries install once).
fn installed(done: &Path, install: &str, run_install: impl FnOnce() -> Result<(), String>) -> bool {
    if done.exists() {
        return true;
    }
    let _lock = InstallLock::take();
    if done.exists() {
        return true;
    }
    eprintln!("installing: {install}");
    match run_install() {
        Ok(()) if done.exists() => true,
        Ok(()) => {
            skip(
                &format!("{} is missing after install", done.display()),
                install,
            );
            false
        }
        Err(e) => {
            skip(
                &format!("could not install ({e})"),
                &format!("run: {install}"),
            );
            false
        }
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
}

/// An exclusive `flock` on `target/clients/.install.lock`, held while it lives.
struct InstallLock(std::fs::File);

impl InstallLock {
    fn take() -> InstallLock {
        use std::os::unix::io::AsRawFd;
        let dir = manifest().join("target/clients");
        std::fs::create_dir_all(&dir).unwrap();
        let f = std::fs::File::create(dir.join(".install.lock")).unwrap();
        // SAFETY: flock on a descriptor this struct owns.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "lock {}", dir.display());
        InstallLock(f)
    }
}
