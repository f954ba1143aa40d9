//! What the high-availability tests share: redis-server members (with an
//! append-only file when a test restarts one with its old data), a proxy over
//! shards with replicas, and waits on what `CLUSTER RING` says.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// True when redis-server is installed; else the test group is recorded as
/// skipped (a failure under `SHARDIS_REQUIRE_REDIS=1`).
pub fn need_redis(group: &str) -> bool {
    if Backend::Redis.is_available() {
        return true;
    }
    skip(group, "redis-server is not installed");
    false
}

/// Starts redis-server on `port`; with `dir`, an append-only file there,
/// fsynced on every write, so a restart after kill -9 has every write back.
pub fn redis_at(port: u16, dir: Option<&Path>) -> Proc {
    redis_with(port, dir, &[])
}

/// [`redis_at`] with `extra` arguments (`--requirepass pw`).
pub fn redis_with(port: u16, dir: Option<&Path>, extra: &[&str]) -> Proc {
    // redis-server takes the last of a repeated setting: what follows the
    // common arguments overrides them.
    let mut args = redis_args(port);
    args.extend(["--tcp-backlog", "4096"].map(String::from));
    match dir {
        Some(d) => args.extend(
            [
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                d.to_str().unwrap(),
            ]
            .map(String::from),
        ),
        // A full sync streams its snapshot instead of writing a file.
        None => args.extend(
            [
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ]
            .map(String::from),
        ),
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    spawn_redis(port, &args)
}

/// A built-in node on `port` with `extra` arguments (`--requirepass pw`).
pub fn builtin_with(port: u16, extra: &[&str]) -> Proc {
    let mut p = Proc::spawn(
        Command::new(BIN)
            .args(["node", "--port", &port.to_string()])
            .args(extra)
            .stdout(Stdio::null()),
        port,
        "node",
    );
    p.wait_ready();
    p
}

/// A proxy over shards `(primary, replicas)` named node1…, with a state
/// file, short timeouts and `extra` config.
pub fn ha_proxy(shards: &[(String, Vec<String>)], extra: &str) -> (Proc, tempdir::Dir) {
    let dir = tempdir::Dir::new();
    let port = free_port();
    let mut cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 300\nrequest_timeout_ms = 2000\nstate_file = \"state.toml\"\n{extra}\n"
    );
    for (i, (p, rs)) in shards.iter().enumerate() {
        let rs: Vec<String> = rs.iter().map(|r| format!("\"{r}\"")).collect();
        cfg.push_str(&format!(
            "[[nodes]]\naddr = \"{p}\"\nname = \"node{}\"\nreplicas = [{}]\n",
            i + 1,
            rs.join(", ")
        ));
    }
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    (start_proxy_with(&path, port), dir)
}

/// `CLUSTER RING` as text.
pub fn ring(con: &mut redis::Connection) -> String {
    redis::cmd("CLUSTER").arg("RING").query(con).unwrap()
}

/// Waits (at most `secs`) until `ok` holds; fails naming `what` and the ring.
pub fn wait_ring(
    con: &mut redis::Connection,
    secs: u64,
    what: &str,
    ok: impl Fn(&str) -> bool,
) -> String {
    poll_until(secs, what, || ring(con), ok)
}

/// True when `ring` lists `addr` as a replica whose link to its primary is up.
pub fn is_synced_replica(ring: &str, addr: &str) -> bool {
    ring.lines().any(|l| {
        l.starts_with(&format!("{addr} "))
            && l.contains("role=replica repl=replica")
            && l.contains("link=up")
    })
}

/// A direct connection to a member, bypassing the proxy.
pub fn direct(port: u16) -> redis::Connection {
    connect(port)
}

/// The `CLUSTER RINGINFO` field `key`.
pub fn info_field(con: &mut redis::Connection, key: &str) -> String {
    ring_field(&cluster_info(con), key)
}

/// A writer through the proxy for `run_for`: SET `prefix:i` i, one after
/// another; what was acknowledged, the first failure and the first success
/// after it (the failover window as a client sees it).
pub struct Writes {
    pub acked: Vec<usize>,
    pub errors: usize,
    pub window: Option<Duration>,
    pub last_error: String,
}

pub fn write_for(
    port: u16,
    prefix: &str,
    run_for: Duration,
    mut during: impl FnMut(usize),
) -> Writes {
    let mut con = connect(port);
    let start = Instant::now();
    let mut w = Writes {
        acked: Vec::new(),
        errors: 0,
        window: None,
        last_error: String::new(),
    };
    let mut first_fail: Option<Instant> = None;
    let mut i = 0;
    while start.elapsed() < run_for {
        during(i);
        let r: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("{prefix}:{i}"))
            .arg(i)
            .query(&mut con);
        match r {
            Ok(()) => {
                w.acked.push(i);
                if let (Some(f), None) = (first_fail, w.window) {
                    w.window = Some(f.elapsed());
                }
            }
            Err(e) => {
                w.errors += 1;
                w.last_error = e.to_string();
                first_fail.get_or_insert_with(Instant::now);
                if e.is_io_error() {
                    con = connect(port);
                }
            }
        }
        i += 1;
    }
    w
}

/// The acknowledged keys a GET through the proxy no longer finds.
pub fn lost(port: u16, prefix: &str, acked: &[usize]) -> Vec<usize> {
    let mut con = connect(port);
    acked
        .iter()
        .copied()
        .filter(|i| {
            let v: Option<usize> = redis::cmd("GET")
                .arg(format!("{prefix}:{i}"))
                .query(&mut con)
                .unwrap();
            v != Some(*i)
        })
        .collect()
}

/// Shard `node1` behind the proxy on `proxy`: its primary and replicas,
/// the state file the proxy writes, and a label for the printed report.
pub struct KilledShard<'a> {
    pub proxy: u16,
    pub primary: &'a str,
    pub replicas: &'a [&'a str],
    pub state_file: &'a Path,
    pub label: &'a str,
}

impl KilledShard<'_> {
    /// kill -9 of the primary (by `kill`) after 200 writes of a writer
    /// through the proxy: a replica becomes node1's primary, the old one is
    /// kept as a replica, the other replicas follow the new primary, the
    /// state file says so, and writes resumed after any failed (a failover
    /// quick enough that no write met the dead primary fails none). Prints the counts
    /// and the failover window; returns the writes and the acknowledged keys
    /// lost.
    pub fn kill_under_writes(&self, kill: impl FnOnce()) -> (Writes, Vec<usize>) {
        let mut con = connect(self.proxy);
        wait_ring(&mut con, 15, "the replicas follow their primary", |r| {
            self.replicas.iter().all(|a| is_synced_replica(r, a))
        });
        // Every key on node1: the window is that shard's, not the others'.
        let prefix = (0..)
            .map(|t| format!("{{w{t}}}"))
            .find(|p| {
                let node: String = redis::cmd("CLUSTER")
                    .arg("KEYNODE")
                    .arg(format!("{p}:0"))
                    .query(&mut con)
                    .unwrap();
                node == "node1"
            })
            .unwrap();
        let mut kill = Some(kill);
        let w = write_for(self.proxy, &prefix, Duration::from_millis(2_500), |i| {
            if i == 200 {
                if let Some(k) = kill.take() {
                    k();
                }
            }
        });
        let r = wait_ring(&mut con, 10, "a replica is the primary", |r| {
            self.replicas
                .iter()
                .any(|a| r.contains(&format!("node1 {a} ")))
        });
        let new = *self
            .replicas
            .iter()
            .find(|a| r.contains(&format!("node1 {a} ")))
            .unwrap();
        let rest: Vec<&str> = self
            .replicas
            .iter()
            .copied()
            .filter(|a| *a != new)
            .collect();
        let old = self.primary;
        assert!(
            r.contains(&format!("{old} {old} replica_of=node1")),
            "the old primary is kept as a replica:\n{r}"
        );
        wait_ring(
            &mut con,
            10,
            "the other replicas follow the new primary",
            |r| rest.iter().all(|a| is_synced_replica(r, a)),
        );
        assert_eq!(info_field(&mut con, "failovers"), "1");
        let state = std::fs::read_to_string(self.state_file).unwrap();
        assert!(state.contains(&format!("addr = \"{new}\"")), "{state}");
        let listed: Vec<String> = rest
            .iter()
            .chain([&old])
            .map(|a| format!("\"{a}\""))
            .collect();
        assert!(
            state.contains(&format!("node1 = [{}]", listed.join(", "))),
            "{state}"
        );
        let lost = lost(self.proxy, &prefix, &w.acked);
        eprintln!(
            "{}: {} acknowledged, {} errors, failover window {:?}, lost {}",
            self.label,
            w.acked.len(),
            w.errors,
            w.window,
            lost.len()
        );
        let resumed = w.acked.last().is_some_and(|&i| i > 200 + w.errors);
        assert!(
            resumed && (w.errors == 0 || w.window.is_some()),
            "writes resumed after the kill ({} errors, last: {})",
            w.errors,
            w.last_error
        );
        (w, lost)
    }
}

/// The child of `parent` whose command line has `--port <port>` (a node
/// `shardis up` started), from /proc.
pub fn child_with_port(parent: u32, port: u16) -> Option<u32> {
    let want = format!("--port\0{port}\0");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces, so split after it.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(&want) {
            return Some(pid);
        }
    }
    None
}

/// kill -9 of a process this test did not spawn itself (a child of `up`).
pub fn kill_9(pid: u32) {
    // SAFETY: kill(2) with a pid read from /proc just now.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// Runs `shardis check --ha` with `args`, prints its table, and returns
/// it once it exited 0 with a PASS verdict (else fails with its output).
pub fn check_ha_with(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(["check", "--ha"])
        .args(args)
        .output_dying()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{text}");
    assert!(
        out.status.success() && text.contains("verdict: PASS"),
        "{text}\n{err}"
    );
    text
}
