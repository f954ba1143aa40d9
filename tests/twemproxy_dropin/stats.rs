//! The stats port: the same traffic through nutcracker and through
//! shardis, then the JSON of each compared — the same keys at every level,
//! the same counts where the meaning matches.

use super::common::free_port;
use super::site::{self, show, At, Client, Site};
use serde_json::{Map, Value};
use std::io::Read;
use std::time::Duration;

/// Counts compared per pool and per server. Not `fragments`: nutcracker
/// 0.5.0 reports 0 for an MGET it splits across servers, shardis counts
/// one per server.
const POOL_COUNTS: &[&str] = &[
    "client_eof",
    "client_err",
    "client_connections",
    "server_ejects",
    "forward_error",
];
const SERVER_COUNTS: &[&str] = &[
    "server_eof",
    "server_err",
    "server_timedout",
    "server_connections",
    "requests",
    "request_bytes",
    "responses",
    "response_bytes",
    "in_queue",
    "in_queue_bytes",
    "out_queue",
    "out_queue_bytes",
];

fn yaml(p: [u16; 2], r: &[u16]) -> String {
    format!(
        "web:
  listen: 127.0.0.1:{}
  hash: fnv1a_64
  distribution: ketama
  redis: true
  servers:
   - 127.0.0.1:{}:1 web-a
   - 127.0.0.1:{}:1 web-b
jobs:
  listen: 127.0.0.1:{}
  hash: md5
  distribution: modula
  redis: true
  servers:
   - 127.0.0.1:{}:1
",
        p[0], r[0], r[1], p[1], r[2]
    )
}

fn traffic(p: [u16; 2]) {
    let mut c = Client::connect(&At::Tcp(p[0]));
    for i in 0..40 {
        let k = format!("k{i}");
        assert_eq!(show(&c.call(&[b"SET", k.as_bytes(), b"value"])), "+OK\r\n");
        c.call(&[b"GET", k.as_bytes()]);
    }
    c.call(&[b"GET", b"missing"]);
    // Across both servers: one fragment per server.
    let mget: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(mget.iter().map(|k| k.as_bytes()));
    c.call(&args);
    drop(c);
    let mut j = Client::connect(&At::Tcp(p[1]));
    j.call(&[b"INCR", b"jobs"]);
    j.call(&[b"LPUSH", b"queue", b"a", b"b"]);
    // This client stays: client_connections is 1 on `jobs`.
    std::mem::forget(j);
}

fn fetch(port: u16) -> Map<String, Value> {
    std::thread::sleep(Duration::from_millis(400));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => m,
        other => panic!("not a JSON object: {other:?}\n{text}"),
    }
}

fn keys(m: &Map<String, Value>) -> Vec<String> {
    let mut k: Vec<String> = m.keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn the_stats_port_reports_what_nutcracker_reports_for_the_same_traffic() {
    if !site::tools() {
        return;
    }
    let redis = site::redis_servers(3, &[]);
    let r: Vec<u16> = redis.iter().map(|r| r.port).collect();
    let p = [free_port(), free_port()];
    let site = Site::new(&yaml(p, &r));
    let stats = free_port();
    let mut nc = site.nutcracker(p[0], stats);
    traffic(p);
    let by_nutcracker = fetch(stats);
    nc.kill();
    site::wait_gone(p[0]);
    site::flushall(&redis);
    let shardis = site.shardis(p[0], &["-s", &stats.to_string(), "-a", "127.0.0.1"]);
    traffic(p);
    let by_shardis = fetch(stats);
    assert_eq!(keys(&by_shardis), keys(&by_nutcracker));
    for k in ["total_connections", "curr_connections"] {
        assert_eq!(by_shardis[k], by_nutcracker[k], "{k}");
    }
    let mut compared = 0;
    for pool in ["web", "jobs"] {
        let (Value::Object(a), Value::Object(b)) = (&by_nutcracker[pool], &by_shardis[pool]) else {
            panic!("pool {pool} missing");
        };
        assert_eq!(keys(b), keys(a), "pool {pool}");
        for k in POOL_COUNTS {
            assert_eq!(b[*k], a[*k], "pool {pool}: {k}");
            compared += 1;
        }
        println!(
            "pool {pool}: fragments: nutcracker {} shardis {}",
            a["fragments"], b["fragments"]
        );
        for (server, v) in a {
            let Value::Object(sa) = v else { continue };
            let Value::Object(sb) = &b[server] else {
                panic!("server {server} missing")
            };
            assert_eq!(keys(sb), keys(sa), "server {server}");
            for k in SERVER_COUNTS {
                assert_eq!(sb[*k], sa[*k], "pool {pool}, server {server}: {k}");
                compared += 1;
            }
        }
    }
    println!("{compared} counts agree; nutcracker: {by_nutcracker:?}");
    shardis.assert_no_panic();
}
