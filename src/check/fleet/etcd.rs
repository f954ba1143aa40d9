//! The fleet checker's etcd: one member on free loopback ports, its data in
//! the checker's work directory, run under `shardis supervise` so it stops
//! when the checker does, however the checker ends. Stopping it (for the
//! etcd-restart scenario, and on drop) closes supervise's stdin: supervise
//! then kills etcd (SIGKILL) and exits. Started by `fleet/cluster.rs` only.

use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How long etcd may take to accept connections.
const ETCD_START_MS: u64 = 20_000;

/// A running etcd (through its supervisor), restartable on the same ports and data.
pub(crate) struct Etcd {
    child: Option<(Child, ChildStdin)>,
    pub client_port: u16,
    peer_port: u16,
    data: PathBuf,
}

impl Etcd {
    /// Errs, naming the Debian package, when `etcd` is not on PATH.
    pub(crate) fn require_installed() -> Result<(), String> {
        let found = Command::new("etcd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        match found {
            true => Ok(()),
            false => Err("--fleet: the proxies share their topology through etcd, and etcd is not installed (not found on PATH); install the Debian package etcd-server (`apt-get install etcd-server`)".into()),
        }
    }

    /// Starts etcd with its data in `data` (created if missing).
    pub(crate) fn start(data: PathBuf) -> Result<Etcd, String> {
        let mut e = Etcd {
            child: None,
            client_port: crate::procs::free_port()?,
            peer_port: crate::procs::free_port()?,
            data,
        };
        e.spawn()?;
        Ok(e)
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// Kills etcd (SIGKILL through its supervisor); its data stays.
    pub(crate) fn stop(&mut self) {
        if let Some((mut child, stdin)) = self.child.take() {
            drop(stdin);
            // supervise polls its stdin every 100 ms; bounded wait, then kill it.
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports and data.
    pub(crate) fn restart(&mut self) -> Result<(), String> {
        self.stop();
        self.spawn()
    }

    fn spawn(&mut self) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut child = Command::new(exe)
            .args(["supervise", "--", "etcd", "--name", "check", "--data-dir"])
            .arg(&self.data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("check={peer}")])
            .args(["--log-level", "error"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start etcd: {e}"))?;
        let stdin = child.stdin.take().ok_or("etcd: no stdin pipe")?;
        self.child = Some((child, stdin));
        let deadline = Instant::now() + Duration::from_millis(ETCD_START_MS);
        loop {
            if let Some((c, _)) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Err(format!("etcd exited during start-up ({status})"));
                }
            }
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.client_port));
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.stop();
                return Err(format!(
                    "etcd did not accept connections on {} within {} s",
                    self.client_port,
                    ETCD_START_MS / 1000
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}
