//! The demo's own cluster: node processes (built-in `shardis node` or
//! `redis-server`) and one `shardis proxy` over them, each on a free loopback
//! port, configured through a generated TOML file in a private temp directory.
//!
//! Every process is a child of this one and is killed (and reaped) when the
//! [`DemoCluster`] is dropped, on every path out of the demo. Built-in nodes and
//! the proxy also get `--exit-with-parent`, so even a `kill -9` of the demo
//! leaves nothing behind.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the nodes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// `shardis node`, this very executable.
    Builtin,
    /// `redis-server` from `PATH`, without persistence.
    Redis,
}

impl NodeKind {
    /// A short label for reports.
    pub fn label(self) -> &'static str {
        match self {
            NodeKind::Builtin => "built-in",
            NodeKind::Redis => "redis-server",
        }
    }
}

/// One started node process.
pub struct NodeProc {
    /// Its name in the ring (`node1`, `node2`, …).
    pub name: String,
    /// `127.0.0.1:port`.
    pub addr: String,
    /// OS process id, for `/proc/PID/status`.
    pub pid: u32,
    child: Child,
}

/// Nodes plus a proxy, all children of this process.
pub struct DemoCluster {
    kind: NodeKind,
    /// Every node started, including ones added later or removed from the ring.
    pub nodes: Vec<NodeProc>,
    /// `127.0.0.1:port` of the proxy (empty until [`DemoCluster::start_proxy`]).
    pub proxy_addr: String,
    proxy: Option<Child>,
    dir: PathBuf,
}

/// A port nothing listens on right now: bind port 0 and let the kernel choose.
pub fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Waits until `port` answers PING with +PONG, or the child exits, or 15 s pass.
fn wait_ping(port: u16, child: &mut Child, what: &str) -> Result<(), String> {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "{what} on port {port} exited during start-up ({status})"
            ));
        }
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
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
            return Err(format!(
                "{what} on port {port} did not answer PING within 15 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

impl DemoCluster {
    /// Starts `n` nodes named `node1..node{n}` (no proxy yet).
    pub fn start_nodes(kind: NodeKind, n: usize) -> Result<DemoCluster, String> {
        let dir = std::env::temp_dir().join(format!(
            "shardis-demo-{}-{}",
            std::process::id(),
            kind.label()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut c = DemoCluster {
            kind,
            nodes: Vec::new(),
            proxy_addr: String::new(),
            proxy: None,
            dir,
        };
        for _ in 0..n {
            c.start_node()?;
        }
        Ok(c)
    }

    /// Starts one more node, not yet in the ring; returns its index in `nodes`.
    pub fn start_node(&mut self) -> Result<usize, String> {
        let port = free_port()?;
        let name = format!("node{}", self.nodes.len() + 1);
        let spawned = match self.kind {
            NodeKind::Builtin => {
                let exe = std::env::current_exe().map_err(|e| e.to_string())?;
                Command::new(exe)
                    .args(["node", "--port", &port.to_string(), "--exit-with-parent"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
            }
            NodeKind::Redis => Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn(),
        };
        let mut child =
            spawned.map_err(|e| format!("cannot start a {} node: {e}", self.kind.label()))?;
        if let Err(e) = wait_ping(port, &mut child, &name) {
            kill(&mut child);
            return Err(e);
        }
        self.nodes.push(NodeProc {
            name,
            addr: format!("127.0.0.1:{port}"),
            pid: child.id(),
            child,
        });
        Ok(self.nodes.len() - 1)
    }

    /// Writes the proxy's config over every node started so far and starts it.
    pub fn start_proxy(&mut self) -> Result<(), String> {
        let port = free_port()?;
        let mut cfg = format!(
            "# Generated by shardis demo.\n[proxy]\nlisten = \"127.0.0.1:{port}\"\n\
             request_timeout_ms = 10000\n\n[migration]\nbatch = 500\ntimeout_ms = 10000\n\n"
        );
        for n in &self.nodes {
            cfg.push_str(&format!(
                "[[nodes]]\naddr = \"{}\"\nname = \"{}\"\n\n",
                n.addr, n.name
            ));
        }
        let path = self.dir.join("proxy.toml");
        std::fs::write(&path, cfg).map_err(|e| format!("{}: {e}", path.display()))?;
        let log = std::fs::File::create(self.dir.join("proxy.log")).map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = Command::new(exe)
            .args(["proxy", "--config", &path.to_string_lossy()])
            .arg("--exit-with-parent")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start the proxy: {e}"))?;
        if let Err(e) = wait_ping(port, &mut child, "proxy") {
            kill(&mut child);
            let log = std::fs::read_to_string(self.dir.join("proxy.log")).unwrap_or_default();
            return Err(format!("{e}\n{log}"));
        }
        self.proxy = Some(child);
        self.proxy_addr = format!("127.0.0.1:{port}");
        Ok(())
    }

    /// The proxy's OS process id.
    pub fn proxy_pid(&self) -> Option<u32> {
        self.proxy.as_ref().map(|p| p.id())
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&NodeProc> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Stops the proxy and every node now (dropping does the same).
    pub fn stop(&mut self) {
        if let Some(mut p) = self.proxy.take() {
            kill(&mut p);
        }
        for n in &mut self.nodes {
            kill(&mut n.child);
        }
        self.nodes.clear();
    }
}

impl Drop for DemoCluster {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A process's resident set size in bytes, from `VmRSS` in `/proc/PID/status`.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A field of `/proc/meminfo` in bytes (`MemTotal`, `MemAvailable`, …).
pub fn meminfo(field: &str) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.split(':').next() == Some(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_rss_and_machine_memory() {
        assert!(rss_bytes(std::process::id()).unwrap() > 0);
        assert!(meminfo("MemTotal").unwrap() >= meminfo("MemAvailable").unwrap());
    }
}
