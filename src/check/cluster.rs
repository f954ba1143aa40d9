//! The checker's own cluster: node processes (built-in or redis-server) and a
//! proxy process with a state file, all on free loopback ports, all killed on
//! drop (see [`crate::procs`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use super::client::{Client, Reply};
use crate::procs::{self, NodeKind, Proc, WorkDir};
use crate::ring::{NodeSpec, Ring, RingConfig};

/// A started node.
pub struct NodeProc {
    pub name: String,
    pub addr: String,
    /// None once killed.
    proc: Option<Proc>,
    /// Left the ring (still running; must hold no key).
    removed: bool,
}

/// Nodes plus a proxy. Fields drop in order: the proxy, then the nodes, then
/// the directory they wrote into.
pub struct CheckCluster {
    proxy: Option<Proc>,
    pub nodes: Vec<NodeProc>,
    kind: NodeKind,
    pub proxy_port: u16,
    config_path: PathBuf,
    skip_resync: bool,
    dir: WorkDir,
}

impl CheckCluster {
    pub fn start(
        kind: NodeKind,
        n: usize,
        copy_rate: u64,
        skip_resync: bool,
    ) -> Result<CheckCluster, String> {
        let dir = WorkDir::create(&format!("shardis-check-{}", std::process::id()))?;
        let mut c = CheckCluster {
            proxy: None,
            nodes: Vec::new(),
            kind,
            proxy_port: procs::free_port()?,
            config_path: dir.join("proxy.toml"),
            skip_resync,
            dir,
        };
        for _ in 0..n {
            c.start_node()?;
        }
        let mut cfg = format!(
            "[proxy]\nlisten = \"127.0.0.1:{}\"\nconnect_timeout_ms = 500\nrequest_timeout_ms = 3000\nstate_file = \"{}\"\n\n[migration]\nbatch = 100\nmax_keys_per_sec = {copy_rate}\ntimeout_ms = 3000\n\n",
            c.proxy_port,
            c.dir.join("topology.toml").display()
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
        self.proxy = Some(procs::start_proxy(
            &self.config_path,
            self.proxy_port,
            &self.dir.join("proxy.log"),
            &[("SHARDIS_FAULT_SKIP_RESYNC", skip)],
        )?);
        Ok(())
    }

    /// kill -9 of the proxy, then the same proxy again (same config and state file).
    pub fn restart_proxy(&mut self) -> Result<(), String> {
        self.proxy = None;
        self.spawn_proxy()
    }

    /// Starts one more node (not yet in the ring) and returns its name and address.
    pub fn start_node(&mut self) -> Result<NodeProcInfo, String> {
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
    pub fn kill_node(&mut self, name: &str) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == name) {
            n.proc = None;
        }
    }

    pub fn mark_removed(&mut self, name: &str) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == name) {
            n.removed = true;
        }
    }

    /// Keys held by a node that does not own them under the proxy's final ring
    /// (every key on a removed node counts).
    pub async fn count_orphans(&self, proxy: &str) -> Result<u64, String> {
        let mut c = Client::new(proxy, Duration::from_secs(10));
        let nodes_text = c.call(&[b"CLUSTER", b"RING"]).await?.text();
        let mut specs = Vec::new();
        for line in nodes_text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(name), Some(addr), Some(weight)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let weight = weight.trim_start_matches("weight=").parse().unwrap_or(1);
            specs.push(NodeSpec {
                name: name.into(),
                addr: addr.into(),
                weight,
            });
        }
        let ring = Ring::new(specs, RingConfig::default(), 1).map_err(|e| e.to_string())?;
        let members: HashSet<&str> = ring.nodes().iter().map(|n| n.name.as_str()).collect();
        let mut orphans = 0;
        for node in self.nodes.iter().filter(|n| n.proc.is_some()) {
            if !members.contains(node.name.as_str()) && !node.removed {
                continue; // never joined (or aborted and dead): nothing to check
            }
            let mut nc = Client::new(&node.addr, Duration::from_secs(10));
            let mut cursor = b"0".to_vec();
            loop {
                let r = nc.call(&[b"SCAN", &cursor, b"COUNT", b"1000"]).await?;
                let Reply::Array(parts) = r else {
                    return Err(format!("SCAN on {}: {}", node.name, r.text()));
                };
                let [Reply::Bulk(Some(next)), Reply::Array(keys)] = &parts[..] else {
                    return Err(format!("SCAN on {}: unexpected reply", node.name));
                };
                for k in keys {
                    if let Reply::Bulk(Some(k)) = k {
                        if ring.node(ring.locate(k)).name != node.name {
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
}

/// Name and address of a started node.
pub struct NodeProcInfo {
    pub name: String,
    pub addr: String,
}
