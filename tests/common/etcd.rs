//! A real etcd for the fleet tests: client and peer ports free on loopback,
//! a temporary data directory, killed (by PID, as every [`Proc`]) when the
//! handle drops or the test binary dies. Skips without `etcd` on PATH.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

/// One etcd member, and the directory holding its data.
pub struct Etcd {
    pub proc: Proc,
    pub peer_port: u16,
    pub dir: tempdir::Dir,
}

impl Etcd {
    /// Starts etcd on free ports, or `None` (recorded as a skip) without it.
    pub fn start() -> Option<Etcd> {
        if !have_tool("etcd") {
            return None;
        }
        let dir = tempdir::Dir::new();
        let (client, peer) = (free_port(), free_port());
        let mut e = Etcd {
            proc: spawn(&dir, client, peer),
            peer_port: peer,
            dir,
        };
        e.wait_ready();
        Some(e)
    }

    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.proc.port)
    }

    /// The `[topology]` section of a proxy sharing this etcd.
    pub fn topology(&self, ttl_s: u64) -> String {
        format!(
            "[topology]\nstore = \"etcd\"\nendpoints = [\"{}\"]\nprefix = \"/test\"\nlease_ttl_s = {ttl_s}\n",
            self.endpoint()
        )
    }

    /// Stops etcd (SIGKILL); its data stays for [`Etcd::restart`].
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Starts it again on the same ports and data.
    pub fn restart(&mut self) {
        self.proc = spawn(&self.dir, self.proc.port, self.peer_port);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !is_listening(self.proc.port) {
            assert!(
                Instant::now() < deadline,
                "etcd did not listen:\n{}",
                self.proc.stderr_tail(30)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn spawn(dir: &tempdir::Dir, client: u16, peer: u16) -> Proc {
    let c = format!("http://127.0.0.1:{client}");
    let p = format!("http://127.0.0.1:{peer}");
    Proc::spawn(
        Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(dir.path().join("etcd"))
            .args(["--listen-client-urls", &c, "--advertise-client-urls", &c])
            .args([
                "--listen-peer-urls",
                &p,
                "--initial-advertise-peer-urls",
                &p,
            ])
            .args(["--initial-cluster", &format!("test={p}")])
            .args(["--log-level", "error"])
            .stdout(Stdio::null()),
        client,
        "etcd",
    )
}

/// A proxy over `nodes` sharing an etcd's topology (lease `ttl_s`), its
/// stderr also kept in a file.
pub struct Member {
    pub proc: Proc,
    pub dir: tempdir::Dir,
    pub log: std::path::PathBuf,
}

impl Member {
    pub fn start(etcd: &Etcd, nodes: &[String], ttl_s: u64, env: &[(&str, &str)]) -> Member {
        let dir = tempdir::Dir::new();
        let (path, port) = write_proxy_config(&dir, nodes, &etcd.topology(ttl_s));
        let log = dir.path().join("stderr.log");
        let file = std::fs::File::create(&log).unwrap();
        let proc = start_proxy_env(&path, port, env, Some(file));
        Member { proc, dir, log }
    }

    pub fn port(&self) -> u16 {
        self.proc.port
    }

    pub fn ring_info(&self) -> String {
        cluster_info(&mut connect(self.proc.port))
    }

    /// Whether it routes by `epoch` with no change in progress.
    pub fn is_settled_at(&self, epoch: u64) -> bool {
        let i = self.ring_info();
        ring_field(&i, "epoch") == epoch.to_string() && ring_field(&i, "state") == "ok"
    }
}

/// A fleet for the tests: `nodes` built-in nodes (their addresses), and
/// `proxies` members listing the first `listed`, lease `ttl_s`, each phase
/// of a change held `phase_delay_ms` longer.
pub struct Fleet {
    pub nodes: Vec<Proc>,
    pub addrs: Vec<String>,
    pub members: Vec<Member>,
}

impl Fleet {
    pub fn start(
        etcd: &Etcd,
        nodes: usize,
        listed: usize,
        proxies: usize,
        ttl_s: u64,
        phase_delay_ms: u64,
    ) -> Fleet {
        let nodes: Vec<Proc> = (0..nodes).map(|_| start_node(free_port())).collect();
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
        let delay = phase_delay_ms.to_string();
        let env = [("SHARDIS_FAULT_PHASE_DELAY_MS", delay.as_str())];
        let members = (0..proxies)
            .map(|_| Member::start(etcd, &addrs[..listed], ttl_s, &env))
            .collect();
        Fleet {
            nodes,
            addrs,
            members,
        }
    }
}
