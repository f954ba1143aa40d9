//! Clusters as tests run them: nodes of either kind, a proxy over them
//! (`shardis proxy` with a written config), `shardis up`, and a stand-in
//! node that answers with fixed bytes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// The kind of node a test runs its proxy over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Builtin,
    Redis,
}

impl Backend {
    /// Whether this machine can run it (redis-server installed); under
    /// SHARDIS_REQUIRE_REDIS=1 a missing redis-server fails instead.
    pub fn is_available(self) -> bool {
        self == Backend::Builtin || have_tool("redis-server")
    }

    /// Starts one node of this kind on a free port.
    pub fn start(self) -> Proc {
        match self {
            Backend::Builtin => start_node(free_port()),
            Backend::Redis => start_redis(free_port()),
        }
    }

    /// `n` fresh nodes of this kind.
    pub fn nodes(self, n: usize) -> Vec<Proc> {
        (0..n).map(|_| self.start()).collect()
    }

    /// A proxy over `n` fresh nodes of this kind.
    pub fn cluster(self, n: usize) -> Cluster {
        match self {
            Backend::Builtin => Cluster::builtin(n),
            Backend::Redis => Cluster::redis(n),
        }
    }
}

/// Runs each named `fn(Backend)` as two tests, `on_builtin_nodes::NAME` and
/// `on_redis_server_nodes::NAME`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod on_builtin_nodes {
            $(#[test]
            fn $name() {
                super::$name(super::Backend::Builtin)
            })*
        }
        mod on_redis_server_nodes {
            $(#[test]
            fn $name() {
                super::$name(super::Backend::Redis)
            })*
        }
    };
}

/// Writes a proxy config over `nodes` and starts `shardis proxy`.
pub fn start_proxy(nodes: &[String], extra: &str) -> (Proc, tempdir::Dir) {
    let dir = tempdir::Dir::new();
    let (path, port) = write_proxy_config(&dir, nodes, extra);
    (start_proxy_with(&path, port), dir)
}

/// Starts `shardis proxy --config path` expected to listen on `port`.
pub fn start_proxy_with(path: &std::path::Path, port: u16) -> Proc {
    start_proxy_env(path, port, &[], None)
}

/// [`start_proxy_with`], with extra environment variables and, when given,
/// a file that gets a copy of its stderr (to check what it logged).
pub fn start_proxy_env(
    path: &std::path::Path,
    port: u16,
    env: &[(&str, &str)],
    log: Option<std::fs::File>,
) -> Proc {
    let mut p = Proc::spawn_logged(
        Command::new(BIN)
            .args(["proxy", "--config", path.to_str().unwrap()])
            .envs(env.iter().copied())
            .stdout(Stdio::null()),
        port,
        "proxy",
        log,
    );
    p.wait_ready();
    p
}

/// `[[nodes]]` entries for `addrs`, named node1, node2, … in order.
pub fn nodes_toml<A: std::fmt::Display>(addrs: &[A]) -> String {
    addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("[[nodes]]\naddr = \"{a}\"\nname = \"node{}\"\n", i + 1))
        .collect()
}

/// Writes a proxy config over `nodes` (as [`start_proxy`] does) and returns
/// its path and port without starting anything.
pub fn write_proxy_config(
    dir: &tempdir::Dir,
    nodes: &[String],
    extra: &str,
) -> (std::path::PathBuf, u16) {
    let port = free_port();
    let mut cfg = format!("[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 500\nrequest_timeout_ms = 2000\n{extra}\n");
    cfg.push_str(&nodes_toml(nodes));
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    (path, port)
}

/// N built-in nodes and a proxy over them.
pub struct Cluster {
    pub nodes: Vec<Proc>,
    pub proxy: Proc,
    pub dir: tempdir::Dir,
}

impl Cluster {
    pub fn builtin(n: usize) -> Cluster {
        let nodes: Vec<Proc> = (0..n).map(|_| start_node(free_port())).collect();
        Cluster::over(nodes, "")
    }

    pub fn redis(n: usize) -> Cluster {
        let nodes: Vec<Proc> = (0..n).map(|_| start_redis(free_port())).collect();
        Cluster::over(nodes, "")
    }

    pub fn over(nodes: Vec<Proc>, extra: &str) -> Cluster {
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
        let (proxy, dir) = start_proxy(&addrs, extra);
        Cluster { nodes, proxy, dir }
    }

    pub fn client(&self) -> redis::Connection {
        connect(self.proxy.port)
    }
}

/// The password `shardis up`, run in `dir`, started its nodes with: kept in
/// `.shardis/node-password`, or beside a state file in `dir`.
pub fn up_node_password(dir: &std::path::Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        for f in [
            dir.join(".shardis/node-password"),
            dir.join("node-password"),
        ] {
            if let Ok(p) = std::fs::read_to_string(&f) {
                return p.trim().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no node-password in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `shardis up` on free ports, run in an empty directory (so no
/// config/default.toml is found): killed on drop, with its directory.
pub struct Up {
    pub proc: Proc,
    pub first_node_port: u16,
    pub nodes: usize,
    pub dir: tempdir::Dir,
}

impl Up {
    /// The command line for `nodes` built-in nodes, before it is spawned.
    pub fn command(
        port: u16,
        first_node_port: u16,
        nodes: usize,
        dir: &std::path::Path,
    ) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(dir)
            .args([
                "up",
                "--nodes",
                &nodes.to_string(),
                "--port",
                &port.to_string(),
            ])
            .args(["--first-node-port", &first_node_port.to_string()]);
        cmd
    }

    /// Starts it with `extra` arguments and waits for the proxy and every node.
    pub fn start(nodes: usize, extra: &[&str]) -> Up {
        let dir = tempdir::Dir::new();
        let first = free_block(nodes);
        let port = free_port();
        let proc = Proc::spawn(
            Up::command(port, first, nodes, dir.path())
                .args(extra)
                .stdout(Stdio::null()),
            port,
            "shardis up",
        );
        let up = Up {
            proc,
            first_node_port: first,
            nodes,
            dir,
        };
        wait_ping(port);
        for p in first..first + nodes as u16 {
            wait_ping(p);
        }
        up
    }

    pub fn port(&self) -> u16 {
        self.proc.port
    }

    /// A direct connection to the node on `port`, logged in with the
    /// password `up` gave its nodes.
    pub fn node(&self, port: u16) -> redis::Connection {
        connect_with_password(port, &up_node_password(self.dir.path()))
    }

    /// SIGTERM, then the exit status and everything it wrote to stderr.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        Command::new("kill")
            .args(["-TERM", &self.proc.pid().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.proc.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "up did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        self.proc.stderr.finish();
        let err = self.proc.stderr_tail(usize::MAX);
        assert!(!err.contains("panicked at"), "{err}");
        (status, err)
    }
}

/// A stand-in node on loopback: answers every request it decodes with
/// `reply`, each `delay` after it arrived. Serves until the returned flag is
/// set (or 120 s, whichever is first).
pub fn fake_node(
    reply: &'static [u8],
    delay: Duration,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = super::bind_free();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(120);
        while !stopped.load(Ordering::Relaxed) && Instant::now() < end {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let stopped = stopped.clone();
            std::thread::spawn(move || {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                let mut buf = bytes::BytesMut::new();
                let limits = shardis::resp::Limits::default();
                let mut chunk = [0u8; 16 * 1024];
                while !stopped.load(Ordering::Relaxed) && Instant::now() < end {
                    match s.read(&mut chunk) {
                        Ok(0) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        Err(_) => continue,
                    }
                    while let Ok(Some(_)) = shardis::resp::decode_request(&mut buf, &limits) {
                        std::thread::sleep(delay);
                        if s.write_all(reply).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, stop)
}
