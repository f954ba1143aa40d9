//! `shardis up --proxies P`: P proxies over the same nodes, sharing one
//! topology through etcd — a local etcd that `up` starts, owns and stops,
//! unless the config's `[topology]` already names one.
//!
//! Proxy i listens on the first proxy's port + i × [`PROXY_PORT_STEP`]
//! (7000, 7100, 7200), its admin HTTP likewise (7070, 7170, 7270). They run
//! in `up`'s process, each with its own state, lease and registration,
//! exactly as separate `shardis proxy` processes would. etcd runs under
//! `shardis supervise` (stopped when `up` goes away, however it goes), its
//! data in a fresh temporary directory removed on the way out.
//!
//! Called by `up.rs` (the run) and `main.rs` (`--check-config`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::process::{Child, Command};

use shardis::proxy::config::{
    EtcdConfig, TopologyConfig, DEFAULT_ETCD_PREFIX, DEFAULT_LEASE_TTL_S,
};
use shardis::proxy::{self, Config};

/// The local etcd's client port unless `--etcd-port` says (its peer port is the next).
pub const DEFAULT_ETCD_PORT: u16 = 2379;
/// Proxy i listens this many ports after proxy i − 1.
pub const PROXY_PORT_STEP: u16 = 100;
/// Proxies `up` runs, at most.
pub const MAX_PROXIES: usize = 10;
/// How long etcd may take to accept connections.
const ETCD_START_MS: u64 = 20_000;

/// What `--proxies` and `--etcd-port` ask for.
#[derive(Clone, Copy, Debug)]
pub struct FleetArgs {
    pub proxies: usize,
    pub etcd_port: u16,
}

impl FleetArgs {
    /// Errs unless the count is in range and (for a local etcd) etcd is installed.
    pub fn check(&self, config: &Config) -> Result<(), String> {
        if self.proxies == 0 || self.proxies > MAX_PROXIES {
            return Err(format!("--proxies: expected 1..={MAX_PROXIES}"));
        }
        if self.proxies > 1 && self.starts_etcd(config) && !is_installed("etcd") {
            return Err("--proxies: the proxies share their topology through etcd, and etcd is not installed (not found on PATH); install the Debian package etcd-server (`apt-get install etcd-server`), or name a running etcd in the config's [topology] endpoints".into());
        }
        Ok(())
    }

    /// Whether `up` starts etcd itself (the config names none).
    pub fn starts_etcd(&self, config: &Config) -> bool {
        self.proxies > 1 && config.topology.etcd().is_none()
    }

    /// Each proxy's config: `base` with its listen and admin ports moved by
    /// its step, and the topology in etcd.
    pub fn members(&self, base: &Config) -> Result<Vec<Config>, String> {
        if self.proxies == 1 {
            return Ok(vec![base.clone()]);
        }
        let mut out = Vec::with_capacity(self.proxies);
        for i in 0..self.proxies {
            let mut c = base.clone();
            let step = i as u16 * PROXY_PORT_STEP;
            c.listen = shifted("proxy listen", &base.listen, step)?;
            // The first keeps its own (a defaulted port that is taken is
            // skipped, as for one proxy); the others move by their step.
            if let Some((admin, _)) = base.ops.admin_listen().filter(|_| i > 0) {
                c.ops.admin_listen = Some(shifted("admin listen", &admin, step)?);
            }
            if self.starts_etcd(base) {
                c.topology = TopologyConfig::Etcd(EtcdConfig {
                    endpoints: vec![format!("127.0.0.1:{}", self.etcd_port)],
                    prefix: DEFAULT_ETCD_PREFIX.into(),
                    credentials: None,
                    lease_ttl_s: DEFAULT_LEASE_TTL_S,
                    proxy_id: None,
                });
            }
            // etcd keeps the topology: a state file would not be read.
            c.state_file = None;
            out.push(c);
        }
        Ok(out)
    }

    /// Every address the fleet listens on beyond the first proxy's own:
    /// the other proxies' (and admin) ports, and the local etcd's two.
    pub fn extra_addrs(&self, base: &Config) -> Result<Vec<(&'static str, String)>, String> {
        let mut out = Vec::new();
        for c in self.members(base)?.iter().skip(1) {
            out.push(("proxy listen", c.listen.clone()));
            if let Some((admin, _)) = c.ops.admin_listen() {
                out.push(("admin listen", admin));
            }
        }
        if self.starts_etcd(base) {
            out.push(("etcd client", format!("127.0.0.1:{}", self.etcd_port)));
            out.push((
                "etcd peer",
                format!("127.0.0.1:{}", self.etcd_port as u32 + 1),
            ));
        }
        Ok(out)
    }
}

/// `host:port` with the port moved up by `step` (port 0 stays 0: any free one).
fn shifted(what: &str, addr: &str, step: u16) -> Result<String, String> {
    let (host, port) = addr
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .ok_or_else(|| format!("{what} {addr}: expected host:port"))?;
    match port {
        0 => Ok(addr.to_string()),
        p => p
            .checked_add(step)
            .map(|p| format!("{host}:{p}"))
            .ok_or_else(|| format!("{what} {addr}: the next proxies' ports would pass 65535")),
    }
}

fn is_installed(prog: &str) -> bool {
    std::process::Command::new(prog)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// The local etcd `up` owns, and its data directory.
pub struct LocalEtcd {
    child: Child,
    dir: PathBuf,
}

impl LocalEtcd {
    /// Starts etcd on `port` (peer port `port + 1`) with a fresh data
    /// directory, and waits (bounded) until it accepts connections.
    pub async fn start(exe: &std::path::Path, port: u16) -> Result<LocalEtcd, String> {
        let dir = std::env::temp_dir().join(format!("shardis-up-etcd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let client = format!("http://127.0.0.1:{port}");
        let peer = format!("http://127.0.0.1:{}", port as u32 + 1);
        let mut child = Command::new(exe)
            .args([
                "supervise",
                "--",
                "etcd",
                "--name",
                "shardis-up",
                "--data-dir",
            ])
            .arg(&dir)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("shardis-up={peer}")])
            .args(["--log-level", "error"])
            // Closing this pipe (or `up` dying) tells `supervise` to stop it.
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start etcd: {e}"))?;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ETCD_START_MS);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "etcd on port {port} exited during start-up ({status}); is port {port} or {} in use? (--etcd-port moves it)",
                    port as u32 + 1
                ));
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(LocalEtcd { child, dir });
            }
            if tokio::time::Instant::now() > deadline {
                let _ = child.kill().await;
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "etcd on port {port} did not accept connections within {} s",
                    ETCD_START_MS / 1000
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops etcd and deletes its data.
    pub async fn stop(self) {
        crate::up::stop(self.child).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs every proxy of the fleet (the first on `listener`) until
/// `stop_signal`, then stops etcd if `up` started it.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    fleet: FleetArgs,
    spawner: Arc<crate::up::NodeSpawner>,
    config_path: Option<PathBuf>,
    stop_signal: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let pool = |c: Config| {
        let p = proxy::Pool::from_config(c);
        match &config_path {
            Some(path) => p.reloadable_from(path.clone()),
            None => p,
        }
    };
    let members = fleet.members(&config)?;
    if members.len() == 1 {
        return proxy::run_with(listener, pool(config), Some(spawner), stop_signal).await;
    }
    let mut listeners = vec![listener];
    for c in &members[1..] {
        let l = shardis::listen::listen(&c.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", c.listen))?;
        listeners.push(l);
    }
    let etcd = match fleet.starts_etcd(&config) {
        true => {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            Some(LocalEtcd::start(&exe, fleet.etcd_port).await?)
        }
        false => None,
    };
    let ports: Vec<String> = listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port().to_string())
                .unwrap_or_default()
        })
        .collect();
    let store = match &etcd {
        Some(_) => format!("a local etcd on 127.0.0.1:{}", fleet.etcd_port),
        None => "the config's etcd".into(),
    };
    println!(
        "shardis: {} proxies on ports {} share the topology through {store}",
        members.len(),
        ports.join(", ")
    );
    let stop = stop_signal.shared();
    let runs = listeners
        .into_iter()
        .zip(members)
        .map(|(l, c)| proxy::run_with(l, pool(c), Some(spawner.clone()), stop.clone()));
    let results = futures::future::join_all(runs).await;
    if let Some(etcd) = etcd {
        etcd.stop().await;
        println!("shardis: stopped etcd");
    }
    results
        .into_iter()
        .collect::<Result<Vec<()>, String>>()
        .map(|_| ())
}
