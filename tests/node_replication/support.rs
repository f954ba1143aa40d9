//! What the replication tests share: nodes started as replicas, waiting
//! for a replica to catch up, a whole keyspace read back for comparison,
//! and a loopback relay whose connections a test can cut.
// Each test binary uses a part of it: what it leaves is no defect.
#![allow(dead_code)]

use crate::common::{Proc, BIN};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Starts a built-in node replicating from `primary` (host:port).
pub fn start_replica(port: u16, primary: &str) -> Proc {
    let mut p = Proc::spawn(
        Command::new(BIN)
            .args(["node", "--port", &port.to_string(), "--replicaof", primary])
            .stdout(Stdio::null()),
        port,
        "replica node",
    );
    p.wait_ready();
    p
}

/// `INFO section` of the node on `port`, as field → value.
pub fn info(port: u16, section: &str) -> BTreeMap<String, String> {
    let mut con = crate::common::connect(port);
    let text: String = redis::cmd("INFO").arg(section).query(&mut con).unwrap();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

pub fn field(port: u16, section: &str, name: &str) -> String {
    info(port, section)
        .remove(name)
        .unwrap_or_else(|| panic!("no {name} in INFO {section} of {port}"))
}

pub fn number(port: u16, section: &str, name: &str) -> i64 {
    field(port, section, name).parse().unwrap()
}

/// Waits until `replica` is linked to `primary` and has applied all the
/// primary has written.
pub fn wait_synced(primary: u16, replica: u16, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let r = info(replica, "replication");
        let p = number(primary, "replication", "master_repl_offset");
        let up = r.get("master_link_status").map(String::as_str) == Some("up");
        if up
            && r.get("slave_repl_offset")
                .and_then(|o| o.parse::<i64>().ok())
                == Some(p)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replica {replica} did not catch up with {primary} ({p}): {r:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every key of the node on `port` with its type, expiry time and value in
/// a form that compares equal when the values are (sets and hashes sorted).
pub fn keyspace(port: u16) -> BTreeMap<String, (String, i64, String)> {
    let mut con = crate::common::connect(port);
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    keys.sort();
    let mut out = BTreeMap::new();
    for chunk in keys.chunks(500) {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("TYPE").arg(k).cmd("PEXPIRETIME").arg(k);
        }
        let meta: Vec<redis::Value> = p.query(&mut con).unwrap();
        let mut p = redis::pipe();
        let mut types = Vec::new();
        for (i, k) in chunk.iter().enumerate() {
            let t = match &meta[2 * i] {
                redis::Value::SimpleString(s) => s.clone(),
                v => format!("{v:?}"),
            };
            match t.as_str() {
                "string" => p.cmd("GET").arg(k),
                "list" => p.cmd("LRANGE").arg(k).arg(0).arg(-1),
                "hash" => p.cmd("HGETALL").arg(k),
                "set" => p.cmd("SMEMBERS").arg(k),
                "zset" => p.cmd("ZRANGE").arg(k).arg(0).arg(-1).arg("WITHSCORES"),
                "stream" => p.cmd("XRANGE").arg(k).arg("-").arg("+"),
                _ => p.cmd("TYPE").arg(k),
            };
            types.push(t);
        }
        let values: Vec<redis::Value> = p.query(&mut con).unwrap();
        for (i, k) in chunk.iter().enumerate() {
            let at = match meta[2 * i + 1] {
                redis::Value::Int(n) => n,
                _ => -3,
            };
            let mut v = format!("{:?}", values[i]);
            if matches!(types[i].as_str(), "set" | "hash") {
                v = normalise(&values[i], types[i] == "hash");
            }
            out.insert(k.clone(), (types[i].clone(), at, v));
        }
    }
    out
}

fn normalise(v: &redis::Value, pairs: bool) -> String {
    let items: Vec<String> = match v {
        redis::Value::Array(a) => a.iter().map(|x| format!("{x:?}")).collect(),
        redis::Value::Set(a) => a.iter().map(|x| format!("{x:?}")).collect(),
        redis::Value::Map(m) => m.iter().map(|(a, b)| format!("{a:?}={b:?}")).collect(),
        other => vec![format!("{other:?}")],
    };
    let mut items: Vec<String> = if pairs {
        items.chunks(2).map(|c| c.join("=")).collect()
    } else {
        items
    };
    items.sort();
    items.join(",")
}

/// Asserts both nodes hold the same keys with the same values and expiry.
pub fn assert_same_keyspace(a: u16, b: u16) -> usize {
    let (ka, kb) = (keyspace(a), keyspace(b));
    if ka != kb {
        let only_a: Vec<_> = ka.keys().filter(|k| !kb.contains_key(*k)).take(5).collect();
        let only_b: Vec<_> = kb.keys().filter(|k| !ka.contains_key(*k)).take(5).collect();
        let differ: Vec<_> = ka
            .iter()
            .filter(|(k, v)| kb.get(*k).is_some_and(|w| w != *v))
            .take(3)
            .map(|(k, v)| format!("{k}: {v:?} vs {:?}", kb[k]))
            .collect();
        panic!(
            "keyspaces differ: {} vs {} keys; only on {a}: {only_a:?}; only on {b}: {only_b:?}; differing: {differ:?}",
            ka.len(),
            kb.len()
        );
    }
    ka.len()
}

/// A loopback relay to `target`: what connects to its port is piped to
/// the target until [`Relay::cut`] closes every connection so far.
pub struct Relay {
    pub port: u16,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    pub fn start(target: u16) -> Relay {
        let listener: TcpListener = crate::common::bind_free();
        let port = listener.local_addr().unwrap().port();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (conns.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                c.lock().unwrap().push(client.try_clone().unwrap());
                c.lock().unwrap().push(server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Relay { port, conns, stop }
    }

    /// Closes every connection relayed so far (new ones are relayed).
    pub fn cut(&self) {
        for s in self.conns.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cut();
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
