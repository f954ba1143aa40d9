//! The checker's own cluster: node processes (built-in or redis-server) and a
//! proxy process with a state file, all on free loopback ports, all killed on
//! drop (see [`crate::procs`]).

use std::path::PathBuf;
use std::time::Duration;

use super::client::{Client, Reply};
use crate::procs::{self, NodeKind, Proc, WorkDir};
use crate::ring::{NodeSpec, Ring, RingConfig};

/// A started node.
pub(crate) struct NodeProc {
    pub name: String,
    pub addr: String,
    /// None once killed.
    proc: Option<Proc>,
    /// Left the ring (still running; must hold no key).
    removed: bool,
}

/// Nodes plus a proxy. Fields drop in order: the proxy, then the nodes, then
/// the directory they wrote into.
pub(crate) struct CheckCluster {
    proxy: Option<Proc>,
    pub nodes: Vec<NodeProc>,
    kind: NodeKind,
    pub proxy_port: u16,
    config_path: PathBuf,
    skip_resync: bool,
    /// `SHARDIS_FAULT_PHASE_DELAY_MS` for the proxy (0: none).
    phase_delay_ms: u64,
    dir: WorkDir,
}

/// Options of the checker's cluster.
pub(crate) struct ClusterOptions {
    pub nodes: usize,
    pub copy_rate: u64,
    pub skip_resync: bool,
    /// Proxy runtime threads (1: current-thread runtime).
    pub threads: usize,
    pub phase_delay_ms: u64,
    /// Faults are injected: short timeouts, small batches.
    pub faults: bool,
}

impl CheckCluster {
    pub(crate) fn start(kind: NodeKind, o: &ClusterOptions) -> Result<CheckCluster, String> {
        let dir = WorkDir::create(&format!("shardis-check-{}", std::process::id()))?;
        let mut c = CheckCluster {
            proxy: None,
            nodes: Vec::new(),
            kind,
            proxy_port: procs::free_port()?,
            config_path: dir.join("proxy.toml"),
            skip_resync: o.skip_resync,
            phase_delay_ms: o.phase_delay_ms,
            dir,
        };
        for _ in 0..o.nodes {
            c.start_node()?;
        }
        c.restore_state_dir()?;
        // Under faults: timeouts shorter than a SIGSTOP, and small batches so
        // each phase lasts long enough to be hit.
        let (request_ms, migration_ms, batch) = if o.faults {
            (800, 800, 20)
        } else {
            (3000, 3000, 100)
        };
        let mut cfg = format!(
            "[proxy]\nlisten = \"127.0.0.1:{}\"\nconnect_timeout_ms = 300\nrequest_timeout_ms = {request_ms}\nthreads = {}\nstate_file = \"{}\"\n\n[migration]\nbatch = {batch}\ncopy_rate = \"unlimited\"\nmax_keys_per_sec = {}\ntimeout_ms = {migration_ms}\n\n",
            c.proxy_port,
            o.threads,
            c.state_path().display(),
            o.copy_rate,
        );
        cfg.push_str(&procs::nodes_toml(
            c.nodes.iter().map(|n| (n.name.as_str(), n.addr.as_str())),
        ));
        std::fs::write(&c.config_path, cfg).map_err(|e| e.to_string())?;
        c.spawn_proxy()?;
        Ok(c)
    }

    /// Starts the proxy on the fixed port and config, so a restart finds its
    /// state file; the fault switch goes in through the environment.
    fn spawn_proxy(&mut self) -> Result<(), String> {
        let skip = if self.skip_resync { "1" } else { "0" };
        let delay = self.phase_delay_ms.to_string();
        self.proxy = Some(procs::start_proxy(
            &self.config_path,
            self.proxy_port,
            &self.dir.join("proxy.log"),
            &[
                ("SHARDIS_FAULT_SKIP_RESYNC", skip),
                ("SHARDIS_FAULT_PHASE_DELAY_MS", &delay),
            ],
        )?);
        Ok(())
    }

    /// The state file, in a directory of its own so it can be made unwritable.
    pub(crate) fn state_path(&self) -> PathBuf {
        self.dir.join("state").join("topology.toml")
    }

    /// Removes the state file's directory: every write of it then fails.
    pub(crate) fn break_state_dir(&self) -> Result<(), String> {
        std::fs::remove_dir_all(self.dir.join("state")).map_err(|e| e.to_string())
    }

    /// The operator's fix for [`Self::break_state_dir`].
    pub(crate) fn restore_state_dir(&self) -> Result<(), String> {
        std::fs::create_dir_all(self.dir.join("state")).map_err(|e| e.to_string())
    }

    /// Sends `sig` (`-STOP`, `-CONT`) to a node (`None`: the proxy).
    pub(crate) fn signal(&self, node: Option<&str>, sig: &str) -> Result<(), String> {
        let p = match node {
            None => self.proxy.as_ref(),
            Some(name) => self
                .nodes
                .iter()
                .find(|n| n.name == name)
                .and_then(|n| n.proc.as_ref()),
        };
        p.ok_or_else(|| format!("no process to signal for {node:?}"))?
            .signal(sig)
    }

    /// True while the node's process runs (not killed).
    pub(crate) fn is_alive(&self, name: &str) -> bool {
        self.nodes
            .iter()
            .any(|n| n.name == name && n.proc.is_some())
    }

    /// kill -9 of the proxy, then the same proxy again (same config and state file).
    pub(crate) fn restart_proxy(&mut self) -> Result<(), String> {
        self.proxy = None;
        self.spawn_proxy()
    }

    /// Starts one more node (not yet in the ring) and returns its name and address.
    pub(crate) fn start_node(&mut self) -> Result<NodeProcInfo, String> {
        let name = format!("node{}", self.nodes.len() + 1);
        let proc = procs::start_node(self.kind, &name)?;
        let addr = proc.addr();
        self.nodes.push(NodeProc {
            name: name.clone(),
            addr: addr.clone(),
            proc: Some(proc),
            removed: false,
        });
        Ok(NodeProcInfo { name, addr })
    }

    /// kill -9 of a node.
    pub(crate) fn kill_node(&mut self, name: &str) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == name) {
            n.proc = None;
        }
    }

    pub(crate) fn mark_removed(&mut self, name: &str) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == name) {
            n.removed = true;
        }
    }

    /// Keys held by a node that does not own them under the proxy's final ring
    /// (every key on a removed node counts).
    pub(crate) async fn count_orphans(&self, proxy: &str) -> Result<u64, String> {
        // Every node still running counts, members or not: an aborted add
        // must leave nothing on its joining node either.
        let running: Vec<(String, String)> = self
            .nodes
            .iter()
            .filter(|n| n.proc.is_some())
            .map(|n| (n.name.clone(), n.addr.clone()))
            .collect();
        count_orphans_on(&running, proxy).await
    }
}

/// Keys held by one of `nodes` (name, addr) that does not own them under
/// the proxy's final ring.
pub(crate) async fn count_orphans_on(
    nodes: &[(String, String)],
    proxy: &str,
) -> Result<u64, String> {
    let (ring, _) = rings(proxy).await?;
    let mut orphans = 0;
    for (name, addr) in nodes {
        let mut nc = Client::new(addr, Duration::from_secs(10));
        let mut cursor = b"0".to_vec();
        loop {
            let r = nc.call(&[b"SCAN", &cursor, b"COUNT", b"1000"]).await?;
            let Reply::Array(parts) = r else {
                return Err(format!("SCAN on {name}: {}", r.text()));
            };
            let [Reply::Bulk(Some(next)), Reply::Array(keys)] = &parts[..] else {
                return Err(format!("SCAN on {name}: unexpected reply"));
            };
            for k in keys {
                if let Reply::Bulk(Some(k)) = k {
                    if &ring.node(ring.locate(k)).name != name {
                        orphans += 1;
                    }
                }
            }
            if next == b"0" {
                break;
            }
            cursor = next.clone();
        }
    }
    Ok(orphans)
}

/// The proxy's rings from CLUSTER RING: the current one, and during a
/// change the next one (members and joining node, without a leaving node).
pub(crate) async fn rings(proxy: &str) -> Result<(Ring, Ring), String> {
    let mut c = Client::new(proxy, Duration::from_secs(10));
    let nodes_text = c.call(&[b"CLUSTER", b"RING"]).await?.text();
    let (mut now, mut next) = (Vec::new(), Vec::new());
    for line in nodes_text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(addr), Some(weight)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let spec = NodeSpec {
            name: name.into(),
            addr: addr.into(),
            weight: weight.trim_start_matches("weight=").parse().unwrap_or(1),
        };
        let role = line.rsplit("role=").next().unwrap_or("member");
        if role != "joining" {
            now.push(spec.clone());
        }
        if role != "leaving" {
            next.push(spec);
        }
    }
    let ring = |specs| Ring::new(specs, RingConfig::default(), 1).map_err(|e| e.to_string());
    Ok((ring(now)?, ring(next)?))
}

/// Name and address of a started node.
pub(crate) struct NodeProcInfo {
    pub name: String,
    pub addr: String,
}
