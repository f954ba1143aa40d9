//! Placement parity with a real twemproxy: one `nutcracker` in front of ten
//! redis-servers, one pool per hash function × distribution (ketama,
//! modula) × {plain, named, weighted, named and weighted}, every pool on
//! its own database so the servers can tell the pools apart. Keys of every
//! shape go in through nutcracker; each server then says which keys it
//! holds, and the ring shardis builds from the same nutcracker.yml must put
//! every key on that server.
//!
//! Skips with a reason when `nutcracker` or `redis-server` is missing;
//! fails instead under SHARDIS_REQUIRE_REDIS=1.

mod common;

use common::{have_tool, tempdir, Proc};
use shardis::nutcracker;
use shardis::ring::{Distribution, KeyHash};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

const SERVERS: usize = 10;
/// Keys per pool for md5 and fnv1a_64 (twemproxy's default) pools.
const FULL_KEYS: usize = 20_000;
/// Keys per pool for every other hash: all shapes, fewer of each.
const SAMPLE_KEYS: usize = 3_000;
/// The port twemproxy leaves out of a server's default name.
const KETAMA_PORT: u16 = 11211;
/// SETs written before reading their replies.
const PIPELINE: usize = 500;

/// Names of varied lengths and no sorted order: twemproxy orders a pool's
/// servers by name, shorter first, which `modula` depends on.
const NAMES: [&str; SERVERS] = [
    "gamma-3",
    "b",
    "alpha",
    "kappa-long-name",
    "d",
    "eps",
    "z",
    "m2",
    "omega",
    "n",
];

/// Ports below the ephemeral range, probed free; each test process starts
/// at its own offset so parallel runs rarely meet.
fn low_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let _ = NEXT.compare_exchange(
        0,
        20_000 + (std::process::id() % 6_000) as u16,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    loop {
        let p = NEXT.fetch_add(1, Ordering::SeqCst);
        assert!(p < 32_700, "no free port below 32768");
        if TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Variant {
    named: bool,
    weighted: bool,
    hash_tag: Option<&'static str>,
}

const VARIANTS: [Variant; 4] = [
    Variant {
        named: false,
        weighted: false,
        hash_tag: None,
    },
    Variant {
        named: true,
        weighted: false,
        hash_tag: Some("{}"),
    },
    Variant {
        named: false,
        weighted: true,
        hash_tag: Some("{}"),
    },
    Variant {
        named: true,
        weighted: true,
        hash_tag: Some("::"),
    },
];

/// Keys of every shape, unique within one pool: plain, hash-tagged (and
/// braces without a tag), colon-separated, UTF-8, binary with CR/LF/NUL and
/// high bytes (twemproxy reads them as signed chars), long, and one empty.
fn keys(n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    out.push(Vec::new());
    let mut i = 0usize;
    while out.len() < n {
        let k = match i % 8 {
            0 => format!("key:{i}").into_bytes(),
            1 => format!("{{user{}}}.field{i}", i % 97).into_bytes(),
            2 => format!("user:{}:{i}", i % 89).into_bytes(),
            3 => format!("ключ-{i}-🔑-日本").into_bytes(),
            4 => {
                let mut k = format!("bin{i}").into_bytes();
                k.extend((0..(i % 13) + 1).map(|j| ((i * 31 + j * 77) % 256) as u8));
                k.extend_from_slice(b"\r\n\0\xff\x80");
                k
            }
            5 => {
                let mut k = format!("long{i}:").into_bytes();
                k.resize(200 + (i * 37) % 3000, b'a' + (i % 26) as u8);
                k
            }
            6 => format!("{{}}{i}{{x}}").into_bytes(),
            _ => vec![
                b'\x80' + (i % 100) as u8,
                (i / 100 % 256) as u8,
                (i / 25600) as u8,
            ],
        };
        out.push(k);
        i += 1;
    }
    out
}

fn resp(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// SETs every key through `port`, pipelined; every reply must be +OK.
fn write_keys(port: u16, keys: &[Vec<u8>]) {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect nutcracker");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    let mut line = String::new();
    for chunk in keys.chunks(PIPELINE) {
        buf.clear();
        for k in chunk {
            resp(&[b"SET", k, b"v"], &mut buf);
        }
        writer.write_all(&buf).unwrap();
        for k in chunk {
            line.clear();
            reader.read_line(&mut line).expect("reply from nutcracker");
            assert_eq!(
                line,
                "+OK\r\n",
                "SET {:?} through port {port}",
                String::from_utf8_lossy(k)
            );
        }
    }
}

/// Every key of database `db` on the server at `port`.
fn keys_on(con: &mut redis::Connection, db: usize) -> Vec<Vec<u8>> {
    redis::cmd("SELECT").arg(db).query::<()>(con).unwrap();
    redis::cmd("KEYS").arg("*").query(con).unwrap()
}

fn yaml(pools: &[(String, u16, KeyHash, Distribution, Variant)], redis: &[Proc]) -> String {
    let mut y = String::new();
    for (db, (name, port, hash, dist, v)) in pools.iter().enumerate() {
        y += &format!("{name}:\n  listen: 127.0.0.1:{port}\n  hash: {hash}\n");
        y += &format!("  distribution: {dist}\n  redis: true\n  redis_db: {db}\n");
        if let Some(tag) = v.hash_tag {
            y += &format!("  hash_tag: \"{tag}\"\n");
        }
        y += "  timeout: 5000\n  auto_eject_hosts: false\n  servers:\n";
        for (i, r) in redis.iter().enumerate() {
            let weight = if v.weighted { i + 1 } else { 1 };
            let name = if v.named {
                format!(" {}", NAMES[i])
            } else {
                String::new()
            };
            y += &format!("   - 127.0.0.1:{}:{weight}{name}\n", r.port);
        }
    }
    y
}

#[test]
fn every_hash_and_distribution_places_keys_where_nutcracker_does() {
    if !have_tool("nutcracker") || !have_tool("redis-server") {
        return;
    }
    let started = Instant::now();
    let dir = tempdir::Dir::new();
    // One server on 11211 when it is free: twemproxy names a server there
    // by its host alone, and unnamed pools must still agree.
    let on_11211 = TcpListener::bind(("127.0.0.1", KETAMA_PORT)).is_ok();
    let redis: Vec<Proc> = (0..SERVERS)
        .map(|i| {
            let port = if i == 0 && on_11211 {
                KETAMA_PORT
            } else {
                low_port()
            };
            let mut p = Proc::spawn(
                Command::new("redis-server")
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args(["--save", "", "--appendonly", "no", "--databases", "128"])
                    .stdout(Stdio::null()),
                port,
                "redis-server",
            );
            p.wait_ready();
            p
        })
        .collect();

    let mut pools = Vec::new();
    for hash in KeyHash::ALL {
        for dist in [Distribution::Ketama, Distribution::Modula] {
            for (vi, v) in VARIANTS.iter().enumerate() {
                pools.push((format!("{hash}_{dist}_{vi}"), low_port(), hash, dist, *v));
            }
        }
    }
    let path = dir.path().join("nutcracker.yml");
    let text = yaml(&pools, &redis);
    std::fs::write(&path, &text).unwrap();
    let check = Command::new("nutcracker")
        .args(["-t", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(check.status.success(), "nutcracker -t: {check:?}");
    let parsed = nutcracker::parse("nutcracker.yml", &text).expect("shardis reads it");
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);

    let stats = low_port();
    let mut nc = Proc::spawn(
        Command::new("nutcracker")
            .arg("-c")
            .arg(&path)
            .args(["-s", &stats.to_string(), "-a", "127.0.0.1", "-v", "2"])
            .arg("-o")
            .arg(dir.path().join("nutcracker.log"))
            .stdout(Stdio::null()),
        pools[0].1,
        "nutcracker",
    );
    nc.wait_ready();

    let mut written = Vec::with_capacity(pools.len());
    for (_, port, hash, _, _) in &pools {
        let n = if matches!(hash, KeyHash::Md5 | KeyHash::Fnv1a64) {
            FULL_KEYS
        } else {
            SAMPLE_KEYS
        };
        let ks = keys(n);
        write_keys(*port, &ks);
        written.push(ks);
    }
    let write_time = started.elapsed();

    // Where each server says each pool's keys are.
    let mut found: Vec<HashMap<Vec<u8>, usize>> = vec![HashMap::new(); pools.len()];
    for (si, r) in redis.iter().enumerate() {
        let mut con = common::connect(r.port);
        for (db, f) in found.iter_mut().enumerate() {
            for k in keys_on(&mut con, db) {
                assert!(f.insert(k, si).is_none(), "a key on two servers (db {db})");
            }
        }
    }

    let mut report = Vec::new();
    for (i, (name, ..)) in pools.iter().enumerate() {
        let pool = &parsed.pools[i];
        assert_eq!(&pool.name, name);
        let ring = pool.ring(1).expect("ring from the parsed pool");
        let specs = pool.node_specs();
        let mut agree = 0;
        let mut first_miss = None;
        for k in &written[i] {
            let server = *found[i].get(k).unwrap_or_else(|| {
                panic!(
                    "{name}: key {:?} is on no server",
                    String::from_utf8_lossy(k)
                )
            });
            let want = format!("127.0.0.1:{}", redis[server].port);
            if specs[ring.locate(k)].addr == want {
                agree += 1;
            } else if first_miss.is_none() {
                first_miss = Some(String::from_utf8_lossy(k).into_owned());
            }
        }
        assert_eq!(found[i].len(), written[i].len(), "{name}: stray keys");
        report.push((name.clone(), agree, written[i].len(), first_miss));
    }
    let total: usize = report.iter().map(|r| r.2).sum();
    println!(
        "{} pools, {total} keys, a server on 11211: {on_11211}, written in {:.1?}, checked in {:.1?}",
        report.len(),
        write_time,
        started.elapsed()
    );
    let misses: Vec<_> = report.iter().filter(|r| r.1 != r.2).collect();
    assert!(
        misses.is_empty(),
        "pools that disagree with nutcracker: {misses:#?}"
    );
    nc.assert_no_panic();
}
