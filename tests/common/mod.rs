//! Test harness: real processes on loopback ports — built-in nodes, redis-server,
//! the proxy — each killed when its handle drops, so no test leaves an orphan.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod http;

pub const BIN: &str = env!("CARGO_BIN_EXE_shardis");

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// True when `SHARDIS_REQUIRE_REDIS=1`: tests needing redis tools must run.
pub fn redis_required() -> bool {
    std::env::var("SHARDIS_REQUIRE_REDIS")
        .map(|v| v == "1")
        .unwrap_or(false)
}

/// Whether `tool` is on PATH; when it is not, the caller skips with a printed
/// reason — unless redis is required, which makes it a failure.
pub fn have_tool(tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !found {
        assert!(
            !redis_required(),
            "{tool} is required (SHARDIS_REQUIRE_REDIS=1) but not on PATH"
        );
        eprintln!("skipping: {tool} not found on PATH (set SHARDIS_REQUIRE_REDIS=1 to make this a failure)");
    }
    found
}

/// A child process killed on drop.
pub struct Proc {
    pub child: Child,
    pub port: u16,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until something answers PING on `port`.
pub fn wait_ping(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(r) = try_raw(port, b"*1\r\n$4\r\nPING\r\n", 7) {
            if r == b"+PONG\r\n" {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "nothing answered PING on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a built-in node.
pub fn start_node(port: u16) -> Proc {
    let child = Command::new(BIN)
        .args(["node", "--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start node");
    let p = Proc { child, port };
    wait_ping(port);
    p
}

/// Starts a redis-server with no persistence.
pub fn start_redis(port: u16) -> Proc {
    let child = Command::new("redis-server")
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
        .spawn()
        .expect("start redis-server");
    let p = Proc { child, port };
    wait_ping(port);
    p
}

/// Writes a proxy config over `nodes` and starts `shardis proxy`.
pub fn start_proxy(nodes: &[String], extra: &str) -> (Proc, tempdir::Dir) {
    let dir = tempdir::Dir::new();
    let port = free_port();
    let mut cfg = format!("[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 500\nrequest_timeout_ms = 2000\n{extra}\n");
    for (i, n) in nodes.iter().enumerate() {
        cfg.push_str(&format!(
            "[[nodes]]\naddr = \"{n}\"\nname = \"node{}\"\n",
            i + 1
        ));
    }
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    (start_proxy_with(&path, port), dir)
}

/// Starts `shardis proxy --config path` expected to listen on `port`.
pub fn start_proxy_with(path: &std::path::Path, port: u16) -> Proc {
    let child = Command::new(BIN)
        .args(["proxy", "--config", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start proxy");
    let p = Proc { child, port };
    wait_ping(port);
    p
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

/// A `redis` crate connection with timeouts.
pub fn connect(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    con.set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    con
}

/// Sends `req` and reads until `want_len` bytes arrived (or 5 s passed).
pub fn try_raw(port: u16, req: &[u8], want_len: usize) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(req)?;
    read_n(&mut s, want_len)
}

pub fn raw(port: u16, req: &[u8], want_len: usize) -> Vec<u8> {
    try_raw(port, req, want_len).unwrap()
}

/// Reads exactly `n` bytes, or what came before EOF/timeout.
pub fn read_n(s: &mut TcpStream, n: usize) -> std::io::Result<Vec<u8>> {
    let mut out = vec![0u8; n];
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while got < n && Instant::now() < deadline {
        match s.read(&mut out[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                break
            }
            Err(e) => return Err(e),
        }
    }
    out.truncate(got);
    Ok(out)
}

/// Reads until the peer closes (or 5 s).
pub fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

pub mod tempdir {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    static N: AtomicUsize = AtomicUsize::new(0);

    /// A temporary directory removed on drop.
    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> Dir {
            let p = std::env::temp_dir().join(format!(
                "shardis-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
