//! Child processes of `shardis check` and `shardis demo`: built-in nodes
//! (`shardis node`, this very executable), `redis-server`, and `shardis proxy`,
//! each on a free loopback port, plus the private temp directory that holds
//! their config.
//!
//! Every process here is one we started, held as a [`Proc`] that kills it by
//! its own handle (so by its PID, never by name) and reaps it on drop, on
//! every path out of the caller. Built-in nodes and the proxy also get
//! `--exit-with-parent`, so even a `kill -9` of the caller leaves nothing behind.
//!
//! A child's stderr is never thrown away: [`StderrCapture`] drains it on a
//! thread, keeps its tail and every `panicked at` line. A child that panicked
//! is a failure of whatever ran it: [`Proc`] records it when dropped, and
//! [`child_panics`] hands the records to `check` and `demo`, which fail on
//! them; the integration tests' harness asserts on the same capture.

mod stderr;
mod supervise;

pub use stderr::{child_panics, StderrCapture};
pub use supervise::supervise;

use crate::client::blocking::answers_ping;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started process may take to answer PING.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// What the nodes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeKind {
    /// `shardis node`, this very executable.
    Builtin,
    /// `redis-server` from `PATH`, without persistence.
    Redis,
}

impl NodeKind {
    /// A short label for reports.
    pub(crate) fn label(self) -> &'static str {
        match self {
            NodeKind::Builtin => "built-in",
            NodeKind::Redis => "redis-server",
        }
    }
}

/// A child process of ours that answered PING on `127.0.0.1:port`; killed and
/// reaped when dropped, so no path out of the caller leaves it running.
pub(crate) struct Proc {
    child: Child,
    port: u16,
    stderr: StderrCapture,
    what: String,
}

impl Proc {
    /// Spawns `cmd` with its stderr captured (and copied to `log`, if given)
    /// and waits until it answers PING on `port`. On failure the child is
    /// killed (by the drop of the half-built `Proc`), not left behind, and
    /// the error carries the tail of its stderr.
    fn spawn(
        cmd: &mut Command,
        port: u16,
        what: &str,
        log: Option<std::fs::File>,
    ) -> Result<Proc, String> {
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        let stderr = StderrCapture::attach(&mut child, log);
        let mut p = Proc {
            child,
            port,
            stderr,
            what: what.to_string(),
        };
        if let Err(e) = wait_ping(port, &mut p.child, what) {
            return Err(format!("{e}\n{}", p.stderr.tail(40)));
        }
        Ok(p)
    }

    /// `127.0.0.1:port`.
    pub(crate) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// OS process id, for `/proc/PID/status`.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `sig` (`-STOP`, `-CONT`, …) with kill(1).
    pub(crate) fn signal(&self, sig: &str) -> Result<(), String> {
        let pid = self.pid();
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .map_err(|e| format!("kill {sig}: {e}"))?
            .success();
        ok.then_some(())
            .ok_or_else(|| format!("kill {sig} {pid} failed"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.finish();
        self.stderr.record_panics(&self.what);
    }
}

/// The range [`free_port`] and [`bind_free`] draw from: below Linux's
/// ephemeral range (32768 and up), so a port chosen here is never the local
/// end of some outgoing connection, which could not then be listened on.
pub const FREE_PORTS: std::ops::Range<u16> = 20_000..32_768;

/// A port nothing listens on right now, from [`FREE_PORTS`]. Each process
/// walks the range from its own random start, so parallel test binaries
/// rarely try the same port; the bind check settles the rest.
pub fn free_port() -> Result<u16, String> {
    let l = bind_free()?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// A loopback listener on a free port from [`FREE_PORTS`], held: no other
/// process can take the port between choosing and binding it.
pub fn bind_free() -> Result<TcpListener, String> {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    // Next offset into the range; seeded once per process from its PID and
    // the clock, then advanced by a stride coprime to the range's length.
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    const STRIDE: u32 = 7_919;
    let len = u32::from(FREE_PORTS.end - FREE_PORTS.start);
    if NEXT.load(Relaxed) == u32::MAX {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seed = (std::process::id().wrapping_mul(2_654_435_761) ^ nanos) % len;
        let _ = NEXT.compare_exchange(u32::MAX, seed, Relaxed, Relaxed);
    }
    for _ in 0..len {
        let i = NEXT.fetch_add(STRIDE, Relaxed) % len;
        let port = FREE_PORTS.start + i as u16;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
            return Ok(l);
        }
    }
    Err(format!(
        "no free loopback port in {}..{}",
        FREE_PORTS.start, FREE_PORTS.end
    ))
}

/// Waits until `port` answers PING with +PONG, or the child exits (no point
/// waiting out the timeout for a process that is gone), or 15 s pass. The
/// integration tests' harness waits for its children with this too.
pub fn wait_ping(port: u16, child: &mut Child, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "{what} on port {port} exited during start-up ({status})"
            ));
        }
        if answers_ping(port, Duration::from_millis(500)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{what} on port {port} did not answer PING within 15 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// This executable, to start `shardis node` and `shardis proxy` from.
fn current_exe() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))
}

/// Starts a node of `kind` on a free port, bound to loopback, and waits until
/// it answers PING. `name` (its name in the ring) only labels errors.
pub(crate) fn start_node(kind: NodeKind, name: &str) -> Result<Proc, String> {
    start_node_at(kind, free_port()?, name, &[])
}

/// [`start_node`] on `port` (a restart at the same address), with `extra`
/// arguments (redis-server's `--appendonly yes --dir …`).
pub(crate) fn start_node_at(
    kind: NodeKind,
    port: u16,
    name: &str,
    extra: &[&str],
) -> Result<Proc, String> {
    let port_arg = port.to_string();
    let mut cmd = match kind {
        NodeKind::Builtin => {
            let mut c = Command::new(current_exe()?);
            c.args(["node", "--port", &port_arg, "--exit-with-parent"]);
            c
        }
        NodeKind::Redis => {
            let mut c = Command::new("redis-server");
            c.args(["--port", &port_arg, "--bind", "127.0.0.1"]).args([
                "--save",
                "",
                "--appendonly",
                "no",
            ]);
            c
        }
    };
    cmd.args(extra).stdout(Stdio::null());
    Proc::spawn(
        &mut cmd,
        port,
        &format!("{} node {name}", kind.label()),
        None,
    )
}

/// Starts `shardis proxy --config config`, which must listen on `port`, with
/// `env` added, and waits until it answers PING. Its stderr is captured and
/// copied to `log` (truncated); its tail is added to the error if the start fails.
pub(crate) fn start_proxy(
    config: &Path,
    port: u16,
    log: &Path,
    env: &[(&str, &str)],
) -> Result<Proc, String> {
    let log_file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cmd = Command::new(current_exe()?);
    cmd.args(["proxy", "--config", &config.to_string_lossy()])
        .arg("--exit-with-parent")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::null());
    Proc::spawn(&mut cmd, port, "proxy", Some(log_file))
}

/// Starts `redis-sentinel conf`, which must listen on `port`, and waits
/// until it answers PING.
pub(crate) fn start_sentinel(conf: &Path, port: u16) -> Result<Proc, String> {
    let mut cmd = Command::new("redis-sentinel");
    cmd.arg(conf).stdout(Stdio::null());
    Proc::spawn(&mut cmd, port, "redis-sentinel", None)
}

/// The `[[nodes]]` tables of a proxy config, one per `(name, addr)`.
pub(crate) fn nodes_toml<'a>(nodes: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (name, addr) in nodes {
        out.push_str(&format!(
            "[[nodes]]\naddr = \"{addr}\"\nname = \"{name}\"\n\n"
        ));
    }
    out
}

/// A private directory under the system temp dir, removed with all it holds
/// on drop. Declare it after the processes that write into it, so they are
/// gone first.
pub(crate) struct WorkDir(PathBuf);

impl WorkDir {
    /// Creates `$TMPDIR/<name>` (and any missing parents).
    pub(crate) fn create(name: &str) -> Result<WorkDir, String> {
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(WorkDir(dir))
    }

    /// `dir/file`.
    pub(crate) fn join(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_port_is_bindable_on_loopback_below_the_ephemeral_range() {
        for _ in 0..50 {
            let port = free_port().unwrap();
            assert!(FREE_PORTS.contains(&port), "{port}");
            assert!(TcpListener::bind(("127.0.0.1", port)).is_ok());
        }
        let held = bind_free().unwrap();
        let port = held.local_addr().unwrap().port();
        assert!(FREE_PORTS.contains(&port), "{port}");
        assert!(TcpListener::bind(("127.0.0.1", port)).is_err());
    }

    #[test]
    fn a_child_that_exits_at_once_fails_fast_and_names_itself() {
        let port = free_port().unwrap();
        let t = Instant::now();
        let err = Proc::spawn(&mut Command::new("true"), port, "thing", None)
            .err()
            .expect("true never answers PING");
        assert!(err.starts_with("thing on port"), "{err}");
        assert!(t.elapsed() < START_TIMEOUT);
    }

    #[test]
    fn nodes_toml_lists_every_node() {
        let t = nodes_toml([("node1", "127.0.0.1:1"), ("node2", "127.0.0.1:2")]);
        assert_eq!(t.matches("[[nodes]]").count(), 2);
        assert!(t.contains("addr = \"127.0.0.1:2\"\nname = \"node2\""));
    }

    #[test]
    fn work_dir_is_removed_on_drop() {
        let name = format!("shardis-procs-test-{}", std::process::id());
        let d = WorkDir::create(&name).unwrap();
        let path = d.join("x");
        std::fs::write(&path, "x").unwrap();
        drop(d);
        assert!(!path.exists());
    }
}
