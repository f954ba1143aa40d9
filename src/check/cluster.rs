//! The checker's own cluster: node processes (built-in or redis-server) and a
//! proxy process with a state file, all on free loopback ports, all killed on drop.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::client::{Client, Reply};
use crate::ring::{NodeSpec, Ring, RingConfig};

#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Builtin,
    Redis,
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Builtin => "built-in",
            Backend::Redis => "redis-server",
        }
    }
}

/// A started node.
pub struct NodeProc {
    pub name: String,
    pub addr: String,
    child: Option<Child>,
    /// Left the ring (still running; must hold no key).
    removed: bool,
}

pub struct CheckCluster {
    backend: Backend,
    pub nodes: Vec<NodeProc>,
    pub proxy_port: u16,
    proxy: Option<Child>,
    dir: std::path::PathBuf,
    config_path: std::path::PathBuf,
    skip_resync: bool,
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn wait_ping(port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{Read, Write};
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 7];
            if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok()
                && s.read_exact(&mut buf).is_ok()
                && &buf == b"+PONG\r\n"
            {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("nothing answered PING on port {port} within 15 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl CheckCluster {
    pub fn start(
        backend: Backend,
        n: usize,
        copy_rate: u64,
        skip_resync: bool,
    ) -> Result<CheckCluster, String> {
        let dir = std::env::temp_dir().join(format!("shardis-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut c = CheckCluster {
            backend,
            nodes: Vec::new(),
            proxy_port: free_port()?,
            proxy: None,
            config_path: dir.join("proxy.toml"),
            dir,
            skip_resync,
        };
        for _ in 0..n {
            c.start_node()?;
        }
        let mut cfg = format!(
            "[proxy]\nlisten = \"127.0.0.1:{}\"\nconnect_timeout_ms = 500\nrequest_timeout_ms = 3000\nstate_file = \"{}\"\n\n[migration]\nbatch = 100\nmax_keys_per_sec = {copy_rate}\ntimeout_ms = 3000\n\n",
            c.proxy_port,
            c.dir.join("topology.toml").display()
        );
        for node in &c.nodes {
            cfg.push_str(&format!(
                "[[nodes]]\naddr = \"{}\"\nname = \"{}\"\n",
                node.addr, node.name
            ));
        }
        std::fs::write(&c.config_path, cfg).map_err(|e| e.to_string())?;
        c.spawn_proxy()?;
        Ok(c)
    }

    fn spawn_proxy(&mut self) -> Result<(), String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let child = Command::new(exe)
            .args([
                "proxy",
                "--config",
                self.config_path.to_str().unwrap_or_default(),
            ])
            .env(
                "SHARDIS_FAULT_SKIP_RESYNC",
                if self.skip_resync { "1" } else { "0" },
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start proxy: {e}"))?;
        self.proxy = Some(child);
        wait_ping(self.proxy_port)
    }

    /// kill -9 of the proxy, then the same proxy again (same config and state file).
    pub fn restart_proxy(&mut self) -> Result<(), String> {
        if let Some(mut p) = self.proxy.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
        self.spawn_proxy()
    }

    /// Starts one more node (not yet in the ring) and returns its name and address.
    pub fn start_node(&mut self) -> Result<NodeProcInfo, String> {
        let port = free_port()?;
        let name = format!("node{}", self.nodes.len() + 1);
        let child = match self.backend {
            Backend::Builtin => {
                let exe = std::env::current_exe().map_err(|e| e.to_string())?;
                Command::new(exe)
                    .args(["node", "--port", &port.to_string()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
            }
            Backend::Redis => Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn(),
        }
        .map_err(|e| format!("start {} node: {e}", self.backend.name()))?;
        let addr = format!("127.0.0.1:{port}");
        self.nodes.push(NodeProc {
            name: name.clone(),
            addr: addr.clone(),
            child: Some(child),
            removed: false,
        });
        wait_ping(port)?;
        Ok(NodeProcInfo { name, addr })
    }

    /// kill -9 of a node.
    pub fn kill_node(&mut self, name: &str) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == name) {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
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
        let nodes_text = c.call(&[b"CLUSTER", b"NODES"]).await?.text();
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
        for node in self.nodes.iter().filter(|n| n.child.is_some()) {
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

impl Drop for CheckCluster {
    fn drop(&mut self) {
        if let Some(mut p) = self.proxy.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
