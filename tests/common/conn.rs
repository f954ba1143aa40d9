//! Talking to a node or the proxy: the `redis` crate with timeouts, raw
//! bytes over a `TcpStream`, and the crate's own blocking RESP client.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

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

/// [`connect`], logged in with `password` (a node `shardis up` started).
pub fn connect_with_password(port: u16, password: &str) -> redis::Connection {
    let mut con = connect(port);
    let _: () = redis::cmd("AUTH").arg(password).query(&mut con).unwrap();
    con
}

/// The name of the node that owns `key` (`CLUSTER KEYNODE`).
pub fn keynode(con: &mut redis::Connection, key: &str) -> String {
    redis::cmd("CLUSTER")
        .arg("KEYNODE")
        .arg(key)
        .query(con)
        .unwrap()
}

/// MSETs `{prefix}{i}` = `v{i}` for i in 0..n through `con`, 500 at a time.
pub fn mset_keys(con: &mut redis::Connection, prefix: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let pairs: Vec<(String, String)> = chunk
            .iter()
            .map(|i| (format!("{prefix}{i}"), format!("v{i}")))
            .collect();
        let _: () = redis::cmd("MSET").arg(&pairs).query(con).unwrap();
    }
}

/// How many of the keys [`mset_keys`] wrote read back with their value.
pub fn mset_keys_readable(con: &mut redis::Connection, prefix: &str, n: usize) -> usize {
    (0..n)
        .collect::<Vec<_>>()
        .chunks(500)
        .map(|chunk| {
            let keys: Vec<String> = chunk.iter().map(|i| format!("{prefix}{i}")).collect();
            let vals: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(con).unwrap();
            chunk
                .iter()
                .zip(vals)
                .filter(|(i, v)| v.as_deref() == Some(format!("v{i}").as_str()))
                .count()
        })
        .sum()
}

/// `CLUSTER RINGINFO`: the ring and the change in progress, as `key:value` lines.
pub fn cluster_info(con: &mut redis::Connection) -> String {
    redis::cmd("CLUSTER").arg("RINGINFO").query(con).unwrap()
}

/// `CLUSTER ADDNODE addr NAME name`, which must answer OK.
pub fn add_node(con: &mut redis::Connection, addr: &str, name: &str) {
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDNODE")
        .arg(addr)
        .arg("NAME")
        .arg(name)
        .query(con)
        .unwrap();
}

/// Waits (at most `secs`) until `ok` holds on `CLUSTER RINGINFO`; returns
/// it. Fails naming `what` and the last RINGINFO.
pub fn wait_info(
    con: &mut redis::Connection,
    secs: u64,
    what: &str,
    ok: impl Fn(&str) -> bool,
) -> String {
    super::poll_until(secs, what, || cluster_info(con), ok)
}

/// Waits (at most `secs`) until the topology change ended (`state:ok`).
pub fn wait_state_ok(con: &mut redis::Connection, secs: u64) -> String {
    wait_info(con, secs, "state:ok", |i| ring_field(i, "state") == "ok")
}

/// One `key:value` field of `CLUSTER RINGINFO` (empty when absent).
pub fn ring_field(info: &str, key: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The admin listener's address, as `CLUSTER RINGINFO` reports it.
pub fn admin_addr(con: &mut redis::Connection) -> String {
    let info = cluster_info(con);
    let addr = ring_field(&info, "admin_listen");
    assert!(addr.starts_with("127.0.0.1:"), "no admin_listen in {info}");
    addr
}

/// `DBSIZE` of the node (or proxy) on `port`.
pub fn dbsize(port: u16) -> i64 {
    redis::cmd("DBSIZE").query(&mut connect(port)).unwrap()
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

/// Sends `args` on a fresh connection without reading the reply (a script
/// that will run long, say).
pub fn start_call(port: u16, args: &[&str]) -> Raw {
    let mut c = Raw::connect(port);
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&args);
    c
}

/// Calls PING until it is refused with `-BUSY` (a script passed
/// `busy-reply-threshold`); the refusal.
pub fn until_busy(c: &mut Raw) -> String {
    let t = Instant::now();
    loop {
        let r = c.call(&["PING"]);
        if r.starts_with("-BUSY") {
            return r;
        }
        assert_eq!(r, "+PONG\r\n");
        assert!(t.elapsed() < Duration::from_secs(5), "never busy");
        std::thread::sleep(Duration::from_millis(10));
    }
}
