//! A twemproxy site in miniature: redis-servers, a `nutcracker.yml` over
//! them, and the same file served by real `nutcracker` or by shardis; a raw
//! client that speaks to a pool over TCP or its unix socket and returns
//! reply bytes unchanged.

use super::common::{free_port, have_tool, redis_args, tempdir, Proc, BIN};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether nutcracker and redis-server are here (a skip is recorded if not).
pub fn tools() -> bool {
    have_tool("nutcracker") && have_tool("redis-server")
}

pub fn redis_servers(n: usize, extra: &[&str]) -> Vec<Proc> {
    (0..n)
        .map(|_| {
            let port = free_port();
            let p = Proc::spawn(
                Command::new("redis-server")
                    .args(redis_args(port))
                    .args(extra)
                    .stdout(Stdio::null()),
                port,
                "redis-server",
            );
            wait_answering(port);
            p
        })
        .collect()
}

/// A directory holding the YAML (and whatever else a run writes).
pub struct Site {
    pub dir: tempdir::Dir,
    pub yml: PathBuf,
}

impl Site {
    pub fn new(yaml: &str) -> Site {
        let dir = tempdir::Dir::new();
        let yml = dir.path().join("nutcracker.yml");
        std::fs::write(&yml, yaml).unwrap();
        Site { dir, yml }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Real nutcracker over the file; `ready` is a pool port that answers PING.
    pub fn nutcracker(&self, ready: u16, stats: u16) -> Proc {
        let mut p = Proc::spawn(
            Command::new("nutcracker")
                .arg("-c")
                .arg(&self.yml)
                .args(["-s", &stats.to_string(), "-a", "127.0.0.1", "-i", "100"])
                .arg("-o")
                .arg(self.path("nutcracker.log"))
                .stdout(Stdio::null()),
            ready,
            "nutcracker",
        );
        p.wait_ready();
        p
    }

    /// shardis over the same file, with `args` after it.
    pub fn shardis(&self, ready: u16, args: &[&str]) -> Proc {
        let mut p = Proc::spawn(
            Command::new(BIN)
                .args(["proxy", "--config"])
                .arg(&self.yml)
                .args(args)
                .stdout(Stdio::null()),
            ready,
            "shardis proxy",
        );
        p.wait_ready();
        p
    }
}

/// Where a pool listens.
#[derive(Clone, Debug)]
pub enum At {
    Tcp(u16),
    Unix(PathBuf),
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// One client connection: requests in, reply bytes out.
pub struct Client {
    rd: BufReader<Box<dyn Stream>>,
    wr: Box<dyn Stream>,
}

impl Client {
    pub fn connect(at: &At) -> Client {
        let t = Some(Duration::from_secs(10));
        let (rd, wr): (Box<dyn Stream>, Box<dyn Stream>) = match at {
            At::Tcp(port) => {
                let s = TcpStream::connect(("127.0.0.1", *port)).expect("connect to the pool");
                s.set_read_timeout(t).unwrap();
                (Box::new(s.try_clone().unwrap()), Box::new(s))
            }
            At::Unix(path) => {
                let s = UnixStream::connect(path).expect("connect to the pool's socket");
                s.set_read_timeout(t).unwrap();
                (Box::new(s.try_clone().unwrap()), Box::new(s))
            }
        };
        Client {
            rd: BufReader::new(rd),
            wr,
        }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.wr.write_all(&out).unwrap();
    }

    /// One whole reply, its bytes as they came; empty when the connection
    /// was closed instead.
    pub fn reply(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.read_value(&mut out);
        out
    }

    fn read_value(&mut self, out: &mut Vec<u8>) {
        let start = out.len();
        if self.rd.read_until(b'\n', out).unwrap_or(0) == 0 {
            return;
        }
        let line = String::from_utf8_lossy(&out[start..])
            .trim_end()
            .to_string();
        let n: i64 = line[1..].parse().unwrap_or(-1);
        match line.as_bytes()[0] {
            b'$' if n >= 0 => {
                let mut body = vec![0; n as usize + 2];
                self.rd.read_exact(&mut body).unwrap();
                out.extend_from_slice(&body);
            }
            b'*' => {
                for _ in 0..n.max(0) {
                    self.read_value(out);
                }
            }
            _ => {}
        }
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(args);
        self.reply()
    }
}

/// Printable reply bytes, for messages.
pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// SETs each key to its own value through `at`, pipelined; all must be +OK.
pub fn write_keys(at: &At, keys: &[Vec<u8>]) {
    write_keys_as(at, None, keys)
}

/// [`write_keys`] after `AUTH password` when given.
pub fn write_keys_as(at: &At, password: Option<&[u8]>, keys: &[Vec<u8>]) {
    let mut c = Client::connect(at);
    if let Some(pw) = password {
        assert_eq!(show(&c.call(&[b"AUTH", pw])), "+OK\r\n", "AUTH via {at:?}");
    }
    for chunk in keys.chunks(200) {
        for k in chunk {
            c.send(&[b"SET", k, k]);
        }
        for k in chunk {
            assert_eq!(show(&c.reply()), "+OK\r\n", "SET {} via {at:?}", show(k));
        }
    }
}

/// Which server (index) holds each key of database `db`.
pub fn placement(redis: &[Proc], db: u32) -> std::collections::BTreeMap<Vec<u8>, usize> {
    placement_as(redis, db, None)
}

/// [`placement`] on servers that want `password` first.
pub fn placement_as(
    redis: &[Proc],
    db: u32,
    password: Option<&[u8]>,
) -> std::collections::BTreeMap<Vec<u8>, usize> {
    let mut out = std::collections::BTreeMap::new();
    for (i, r) in redis.iter().enumerate() {
        let mut c = Client::connect(&At::Tcp(r.port));
        if let Some(pw) = password {
            assert_eq!(show(&c.call(&[b"AUTH", pw])), "+OK\r\n");
        }
        c.call(&[b"SELECT", db.to_string().as_bytes()]);
        for k in keys_of(&mut c) {
            assert!(out.insert(k, i).is_none(), "a key on two servers");
        }
    }
    out
}

/// Every key of the selected database (via KEYS *; values are short).
fn keys_of(c: &mut Client) -> Vec<Vec<u8>> {
    let r = c.call(&[b"KEYS", b"*"]);
    let mut keys = Vec::new();
    let mut rest = &r[r.iter().position(|b| *b == b'\n').unwrap() + 1..];
    while !rest.is_empty() {
        let nl = rest.iter().position(|b| *b == b'\n').unwrap();
        let n: usize = std::str::from_utf8(&rest[1..nl - 1])
            .unwrap()
            .parse()
            .unwrap();
        keys.push(rest[nl + 1..nl + 1 + n].to_vec());
        rest = &rest[nl + 1 + n + 2..];
    }
    keys
}

pub fn flushall(redis: &[Proc]) {
    for r in redis {
        assert_eq!(
            show(&Client::connect(&At::Tcp(r.port)).call(&[b"FLUSHALL"])),
            "+OK\r\n"
        );
    }
}

/// Keys of varied shapes: plain, hash-tagged, UTF-8, binary, long.
pub fn keys(n: usize, prefix: &str) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| match i % 5 {
            0 => format!("{prefix}:{i}").into_bytes(),
            1 => format!("{{{prefix}{}}}.f{i}", i % 7).into_bytes(),
            2 => format!("{prefix}-ключ-{i}-日本").into_bytes(),
            3 => {
                let mut k = format!("{prefix}bin{i}").into_bytes();
                k.extend_from_slice(b"\r\n\0\xff\x80");
                k
            }
            _ => format!("{prefix}{}{i}", "x".repeat(300)).into_bytes(),
        })
        .collect()
}

/// Waits until `port` answers a PING at all (+PONG or -NOAUTH).
pub fn wait_answering(port: u16) {
    for _ in 0..600 {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut b = [0u8; 64];
            if s.write_all(b"PING\r\n").is_ok() && s.read(&mut b).is_ok_and(|n| n > 0) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("nothing answers on port {port}");
}

pub fn wait_gone(port: u16) {
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", port)).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("port {port} still listening");
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}
