//! Test harness: real processes on loopback ports — built-in nodes, redis-server,
//! the proxy — each killed when its handle drops, so no test leaves an orphan.
//!
//! Every process's stderr is captured: a `panicked at` line in it fails the
//! test when the handle drops (or earlier, at [`Proc::assert_no_panic`]),
//! with the tail of that stderr in the message. Nothing to remember: every
//! process here is a [`Proc`].
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use shardis::client::blocking::answers_ping;
use shardis::procs::StderrCapture;

pub mod http;

pub const BIN: &str = env!("CARGO_BIN_EXE_shardis");

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    shardis::procs::free_port().unwrap()
}

/// A block of `n` consecutive free ports.
pub fn free_block(n: usize) -> u16 {
    'search: for _ in 0..50 {
        let base = free_port();
        if base as usize + n >= 65_000 {
            continue;
        }
        for p in base..base + n as u16 {
            if std::net::TcpListener::bind(("127.0.0.1", p)).is_err() {
                continue 'search;
            }
        }
        return base;
    }
    panic!("no block of {n} free ports");
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

/// A child process killed on drop, its stderr captured; a panic in it fails
/// the test.
pub struct Proc {
    pub child: Child,
    pub port: u16,
    stderr: StderrCapture,
    /// What it is (`node`, `proxy`, …), for messages.
    name: String,
    /// `name (port N)`, for failure reports.
    what: String,
    /// Set by a test that makes this process panic on purpose.
    panics_expected: bool,
}

impl Proc {
    /// Spawns `cmd` (stdout as the caller set it, stderr captured); `what`
    /// names it in failure messages.
    pub fn spawn(cmd: &mut Command, port: u16, what: &str) -> Proc {
        Proc::spawn_logged(cmd, port, what, None)
    }

    /// [`Proc::spawn`], with its stderr also copied to `log`.
    pub fn spawn_logged(
        cmd: &mut Command,
        port: u16,
        what: &str,
        log: Option<std::fs::File>,
    ) -> Proc {
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        let stderr = StderrCapture::attach(&mut child, log);
        Proc {
            child,
            port,
            stderr,
            name: what.to_string(),
            what: format!("{what} (port {port})"),
            panics_expected: false,
        }
    }

    /// This process is made to panic on purpose: its panics fail nothing.
    pub fn expect_panics(&mut self) {
        self.panics_expected = true;
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills and reaps the process, then reads the rest of its stderr.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.finish();
    }

    /// Waits until it answers PING; fails with the tail of its stderr if it
    /// exits first or stays silent for 15 s.
    pub fn wait_ready(&mut self) {
        if let Err(e) = shardis::procs::wait_ping(self.port, &mut self.child, &self.name) {
            self.kill();
            panic!(
                "{e}\n--- last lines of its stderr ---\n{}",
                self.stderr.tail(40)
            );
        }
    }

    /// Fails now if the process has printed a panic so far.
    pub fn assert_no_panic(&self) {
        if let Some(report) = self.stderr.panic_report(&self.what) {
            panic!("{report}");
        }
    }

    /// The last `n` lines of its stderr.
    pub fn stderr_tail(&self, n: usize) -> String {
        self.stderr.tail(n)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        if self.panics_expected {
            return;
        }
        // A second panic while unwinding would abort the whole test binary;
        // the test is failing already, so just print what the child said.
        if std::thread::panicking() {
            if let Some(report) = self.stderr.panic_report(&self.what) {
                eprintln!("{report}");
            }
            return;
        }
        self.assert_no_panic();
    }
}

/// Waits until something answers PING on `port`.
pub fn wait_ping(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if answers_ping(port, Duration::from_secs(5)) {
            return;
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
    let mut p = Proc::spawn(
        Command::new(BIN)
            .args(["node", "--port", &port.to_string()])
            .stdout(Stdio::null()),
        port,
        "node",
    );
    p.wait_ready();
    p
}

/// Starts a redis-server with no persistence.
pub fn start_redis(port: u16) -> Proc {
    let mut p = Proc::spawn(
        Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                // As the built-in node's (see src/listen.rs): bursts of
                // pinned connections must not overflow the accept queue.
                "--tcp-backlog",
                "4096",
            ])
            .stdout(Stdio::null()),
        port,
        "redis-server",
    );
    p.wait_ready();
    p
}

/// The kind of node a test runs its proxy over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Builtin,
    Redis,
}

impl Backend {
    /// Whether this machine can run it (redis-server installed); under
    /// SHARDIS_REQUIRE_REDIS=1 a missing redis-server fails instead.
    pub fn is_available(self) -> bool {
        self == Backend::Builtin || have_tool("redis-server")
    }

    /// Starts one node of this kind on a free port.
    pub fn start(self) -> Proc {
        match self {
            Backend::Builtin => start_node(free_port()),
            Backend::Redis => start_redis(free_port()),
        }
    }

    /// A proxy over `n` fresh nodes of this kind.
    pub fn cluster(self, n: usize) -> Cluster {
        match self {
            Backend::Builtin => Cluster::builtin(n),
            Backend::Redis => Cluster::redis(n),
        }
    }
}

/// Runs each named `fn(Backend)` as two tests, `on_builtin_nodes::NAME` and
/// `on_redis_server_nodes::NAME`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod on_builtin_nodes {
            $(#[test]
            fn $name() {
                super::$name(super::Backend::Builtin)
            })*
        }
        mod on_redis_server_nodes {
            $(#[test]
            fn $name() {
                super::$name(super::Backend::Redis)
            })*
        }
    };
}

/// Writes a proxy config over `nodes` and starts `shardis proxy`.
pub fn start_proxy(nodes: &[String], extra: &str) -> (Proc, tempdir::Dir) {
    let dir = tempdir::Dir::new();
    let (path, port) = write_proxy_config(&dir, nodes, extra);
    (start_proxy_with(&path, port), dir)
}

/// Starts `shardis proxy --config path` expected to listen on `port`.
pub fn start_proxy_with(path: &std::path::Path, port: u16) -> Proc {
    start_proxy_env(path, port, &[], None)
}

/// [`start_proxy_with`], with extra environment variables and, when given,
/// a file that gets a copy of its stderr (to check what it logged).
pub fn start_proxy_env(
    path: &std::path::Path,
    port: u16,
    env: &[(&str, &str)],
    log: Option<std::fs::File>,
) -> Proc {
    let mut p = Proc::spawn_logged(
        Command::new(BIN)
            .args(["proxy", "--config", path.to_str().unwrap()])
            .envs(env.iter().copied())
            .stdout(Stdio::null()),
        port,
        "proxy",
        log,
    );
    p.wait_ready();
    p
}

/// Writes a proxy config over `nodes` (as [`start_proxy`] does) and returns
/// its path and port without starting anything.
pub fn write_proxy_config(
    dir: &tempdir::Dir,
    nodes: &[String],
    extra: &str,
) -> (std::path::PathBuf, u16) {
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
    (path, port)
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

/// A blocking RESP connection that returns whole raw replies and panics on
/// a transport error: [`RespConn`] for tests that only compare replies.
pub struct Raw {
    conn: RespConn,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let conn = RespConn::connect_loopback(port, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("connect to {port}: {e}"));
        Raw { conn }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        self.conn.send(args).unwrap_or_else(|e| panic!("send: {e}"));
    }

    pub fn reply(&mut self) -> Vec<u8> {
        self.conn
            .read_reply()
            .unwrap_or_else(|e| panic!("reply: {e}"))
    }

    pub fn call_bytes(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(args);
        self.reply()
    }

    pub fn call(&mut self, args: &[&str]) -> String {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        String::from_utf8_lossy(&self.call_bytes(&args)).into_owned()
    }

    pub fn check(&mut self, args: &[&str], want: &str) {
        assert_eq!(self.call(args), want, "reply to {args:?}");
    }

    /// An integer reply's value.
    pub fn int(&mut self, args: &[&str]) -> i64 {
        let r = self.call(args);
        r.strip_prefix(':')
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{args:?} gave {r:?}"))
    }

    /// One `field:value` line of INFO.
    pub fn info_field(&mut self, section: &str, field: &str) -> u64 {
        let info = self.call(&["INFO", section]);
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {info}"))
    }
}

/// The crate's blocking RESP client: whole replies (framed with the crate's
/// own `ReplyFramer`), every read under a timeout; for pipelining, `queue`
/// several requests, `flush`, then `read_reply` as many times.
pub use shardis::client::blocking::Conn as RespConn;

/// The tests' shorthand on [`RespConn`].
pub trait RespCmd {
    /// One request with text arguments, one reply; panics on a transport error.
    fn cmd(&mut self, args: &[&str]) -> Vec<u8>;
}

impl RespCmd for RespConn {
    fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        self.call_str(args)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }
}

/// After a client that held the only pinned connection allowed to `key`'s
/// node left (or was killed): waits until `second` may block there again (a
/// short BLPOP answers `*-1` instead of the limit's error), then proves the
/// node forgot the one that left: an element pushed with `admin` stays.
pub fn assert_pin_given_back(second: &mut RespConn, admin: &mut RespConn, key: &str, who: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = second.cmd(&["BLPOP", key, "0.05"]);
        if r == b"*-1\r\n" {
            break;
        }
        let r = String::from_utf8_lossy(&r);
        assert!(Instant::now() < deadline, "the pin never came back: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(admin.cmd(&["RPUSH", key, "x"]), b":1\r\n");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        admin.cmd(&["LLEN", key]),
        b":1\r\n",
        "nobody popped for {who}"
    );
}

/// `shardis up` on free ports, run in an empty directory (so no
/// config/default.toml is found): killed on drop, with its directory.
pub struct Up {
    pub proc: Proc,
    pub first_node_port: u16,
    pub nodes: usize,
    pub dir: tempdir::Dir,
}

impl Up {
    /// The command line for `nodes` built-in nodes, before it is spawned.
    pub fn command(
        port: u16,
        first_node_port: u16,
        nodes: usize,
        dir: &std::path::Path,
    ) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.current_dir(dir)
            .args([
                "up",
                "--nodes",
                &nodes.to_string(),
                "--port",
                &port.to_string(),
            ])
            .args(["--first-node-port", &first_node_port.to_string()]);
        cmd
    }

    /// Starts it with `extra` arguments and waits for the proxy and every node.
    pub fn start(nodes: usize, extra: &[&str]) -> Up {
        let dir = tempdir::Dir::new();
        let first = free_block(nodes);
        let port = free_port();
        let proc = Proc::spawn(
            Up::command(port, first, nodes, dir.path())
                .args(extra)
                .stdout(Stdio::null()),
            port,
            "shardis up",
        );
        let up = Up {
            proc,
            first_node_port: first,
            nodes,
            dir,
        };
        wait_ping(port);
        for p in first..first + nodes as u16 {
            wait_ping(p);
        }
        up
    }

    pub fn port(&self) -> u16 {
        self.proc.port
    }

    /// SIGTERM, then the exit status and everything it wrote to stderr.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        Command::new("kill")
            .args(["-TERM", &self.proc.pid().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.proc.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "up did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        self.proc.stderr.finish();
        let err = self.proc.stderr_tail(usize::MAX);
        assert!(!err.contains("panicked at"), "{err}");
        (status, err)
    }
}

/// Whether something accepts connections on `port`.
pub fn is_listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// Waits (up to `secs`) until nothing listens on any of `ports`.
pub fn wait_closed(ports: impl Iterator<Item = u16> + Clone, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while ports.clone().any(is_listening) {
        assert!(Instant::now() < deadline, "a node is still listening");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SETs `{prefix}{i}` = i for i in 0..n through `port`.
pub fn set_keys(port: u16, prefix: &str, n: usize) {
    let mut con = connect(port);
    for i in 0..n {
        let _: () = redis::cmd("SET")
            .arg(format!("{prefix}{i}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
}

/// The crate root, where the client scripts and installed libraries live.
pub fn manifest() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether an installed client library is there; skips (or fails when
/// required) with the command that installs it.
pub fn have(path: &std::path::Path, install: &str) -> bool {
    if path.exists() {
        return true;
    }
    assert!(
        !redis_required(),
        "{} is required (SHARDIS_REQUIRE_REDIS=1); install it with: {install}",
        path.display()
    );
    eprintln!(
        "skipping: {} not found; install with: {install}",
        path.display()
    );
    false
}

pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run client");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "client failed:\n{text}");
    text
}

/// A stand-in node on loopback: answers every request it decodes with
/// `reply`, each `delay` after it arrived. Serves until the returned flag is
/// set (or 120 s, whichever is first).
pub fn fake_node(
    reply: &'static [u8],
    delay: Duration,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(120);
        while !stopped.load(Ordering::Relaxed) && Instant::now() < end {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let stopped = stopped.clone();
            std::thread::spawn(move || {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                let mut buf = bytes::BytesMut::new();
                let limits = shardis::resp::Limits::default();
                let mut chunk = [0u8; 16 * 1024];
                while !stopped.load(Ordering::Relaxed) && Instant::now() < end {
                    match s.read(&mut chunk) {
                        Ok(0) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        Err(_) => continue,
                    }
                    while let Ok(Some(_)) = shardis::resp::decode_request(&mut buf, &limits) {
                        std::thread::sleep(delay);
                        if s.write_all(reply).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, stop)
}

/// Resident memory of process `pid`, in bytes (VmRSS from /proc).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc status");
    kb * 1024
}

/// One `field:value` line of `INFO section`, as a number.
pub fn info_number(port: u16, section: &str, field: &str) -> u64 {
    let mut con = connect(port);
    let info: String = redis::cmd("INFO").arg(section).query(&mut con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {info}"))
        .trim()
        .parse()
        .unwrap()
}
