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
