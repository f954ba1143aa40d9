//! The fleet checker's processes: etcd, the nodes, and P proxies sharing
//! the topology in etcd, each proxy with its own config file and port (kept
//! across a restart, so a restarted proxy is the same member). Everything is
//! killed on drop, by its own handle; the work directory goes last.

use std::path::PathBuf;

use super::etcd::Etcd;
use crate::procs::{self, NodeKind, Proc, WorkDir};

/// The lease of every proxy: a stopped proxy holds a change up this long.
pub(crate) const LEASE_TTL_S: u64 = 2;

/// One proxy of the fleet.
pub(crate) struct Member {
    proc: Option<Proc>,
    pub port: u16,
    config: PathBuf,
    log: PathBuf,
}

/// A started node.
pub(crate) struct FleetNode {
    pub name: String,
    pub addr: String,
    _proc: Proc,
}

/// Options of the fleet.
pub(crate) struct FleetOptions {
    pub proxies: usize,
    pub nodes: usize,
    pub copy_rate: u64,
    pub skip_resync: bool,
    pub threads: usize,
    pub phase_delay_ms: u64,
}

/// Fields drop in order: proxies, nodes, etcd, then the directory.
pub(crate) struct FleetCluster {
    pub members: Vec<Member>,
    pub nodes: Vec<FleetNode>,
    pub etcd: Etcd,
    kind: NodeKind,
    env: Vec<(&'static str, String)>,
    section: String,
    dir: WorkDir,
}

impl FleetCluster {
    pub(crate) fn start(kind: NodeKind, o: &FleetOptions) -> Result<FleetCluster, String> {
        Etcd::require_installed()?;
        let dir = WorkDir::create(&format!("shardis-check-fleet-{}", std::process::id()))?;
        let etcd = Etcd::start(dir.join("etcd"))?;
        let section = format!(
            "[migration]\nbatch = 100\ncopy_rate = \"unlimited\"\nmax_keys_per_sec = {}\ntimeout_ms = 3000\n\n[topology]\nstore = \"etcd\"\nendpoints = [\"{}\"]\nprefix = \"/check\"\nlease_ttl_s = {LEASE_TTL_S}\n\n",
            o.copy_rate,
            etcd.endpoint()
        );
        let env = vec![
            (
                "SHARDIS_FAULT_SKIP_RESYNC",
                (o.skip_resync as u8).to_string(),
            ),
            ("SHARDIS_FAULT_PHASE_DELAY_MS", o.phase_delay_ms.to_string()),
        ];
        let mut c = FleetCluster {
            members: Vec::new(),
            nodes: Vec::new(),
            etcd,
            kind,
            env,
            section,
            dir,
        };
        for _ in 0..o.nodes {
            c.start_node()?;
        }
        let listed: Vec<(String, String)> = c
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.addr.clone()))
            .collect();
        for i in 0..o.proxies {
            let port = procs::free_port()?;
            let m = Member {
                proc: None,
                port,
                config: c.dir.join(&format!("proxy{i}.toml")),
                log: c.dir.join(&format!("proxy{i}.log")),
            };
            c.members.push(m);
            c.write_config(i, &listed, o.threads)?;
            c.spawn(i)?;
        }
        Ok(c)
    }

    /// Writes proxy `i`'s config listing `nodes` (name, addr).
    pub(crate) fn write_config(
        &self,
        i: usize,
        nodes: &[(String, String)],
        threads: usize,
    ) -> Result<(), String> {
        let m = &self.members[i];
        let mut cfg = format!(
            "[proxy]\nlisten = \"127.0.0.1:{}\"\nconnect_timeout_ms = 300\nrequest_timeout_ms = 3000\nthreads = {threads}\n\n{}",
            m.port, self.section
        );
        cfg.push_str(&procs::nodes_toml(
            nodes.iter().map(|(n, a)| (n.as_str(), a.as_str())),
        ));
        std::fs::write(&m.config, cfg).map_err(|e| format!("{}: {e}", m.config.display()))
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let m = &mut self.members[i];
        m.proc = Some(procs::start_proxy(&m.config, m.port, &m.log, &env)?);
        Ok(())
    }

    pub(crate) fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.members[i].port)
    }

    pub(crate) fn addrs(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.addr(i)).collect()
    }

    /// kill -9 of proxy `i`.
    pub(crate) fn kill_proxy(&mut self, i: usize) {
        self.members[i].proc = None;
    }

    /// Proxy `i` again, same port and config.
    pub(crate) fn restart_proxy(&mut self, i: usize) -> Result<(), String> {
        self.members[i].proc = None;
        self.spawn(i)
    }

    /// Sends `sig` (`-STOP`, `-CONT`) to proxy `i`.
    pub(crate) fn signal_proxy(&self, i: usize, sig: &str) -> Result<(), String> {
        self.members[i]
            .proc
            .as_ref()
            .ok_or_else(|| format!("proxy {i} is not running"))?
            .signal(sig)
    }

    /// Starts one more node (not yet in the ring): its name and address.
    pub(crate) fn start_node(&mut self) -> Result<(String, String), String> {
        let name = format!("node{}", self.nodes.len() + 1);
        let proc = procs::start_node(self.kind, &name)?;
        let addr = proc.addr();
        self.nodes.push(FleetNode {
            name: name.clone(),
            addr: addr.clone(),
            _proc: proc,
        });
        Ok((name, addr))
    }

    /// Every running node, as (name, addr).
    pub(crate) fn node_list(&self) -> Vec<(String, String)> {
        self.nodes
            .iter()
            .map(|n| (n.name.clone(), n.addr.clone()))
            .collect()
    }
}
