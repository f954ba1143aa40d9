//! Placement parity with a real twemproxy: one `nutcracker` in front of ten
//! redis-servers, one pool per hash function × distribution (ketama,
//! modula) × {plain, named, weighted, named and weighted}, every pool on
//! its own database so the servers can tell the pools apart. 20 000 keys of
//! every shape go into each pool through nutcracker; each server then says
//! which keys it holds. Then `shardis proxy` starts on the same
//! nutcracker.yml, and `CLUSTER KEYNODE` on each pool's port must name that
//! server for every key.
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
/// Keys per pool, every shape.
const KEYS_PER_POOL: usize = 20_000;
/// The port twemproxy leaves out of a server's default name.
const KETAMA_PORT: u16 = 11211;
/// Requests written before reading their replies.
const PIPELINE: usize = 500;
/// Every hash function twemproxy has, by the name its `hash:` takes.
const HASHES: [&str; 12] = [
    "one_at_a_time",
    "md5",
    "crc16",
    "crc32",
    "crc32a",
    "fnv1_64",
    "fnv1a_64",
    "fnv1_32",
    "fnv1a_32",
    "hsieh",
    "murmur",
    "jenkins",
];

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
                // 200 to 800 bytes, one in ten up to 3 200.
                let spread = if i % 80 == 5 { 3_000 } else { 600 };
                let mut k = format!("long{i}:").into_bytes();
                k.resize(200 + (i * 37) % spread, b'a' + (i % 26) as u8);
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

/// One reply without nesting: a status, error or integer line, or a bulk.
fn read_reply(r: &mut impl BufRead) -> Vec<u8> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).expect("a reply");
    if line.first() != Some(&b'$') {
        return line;
    }
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    if n < 0 {
        return line;
    }
    let mut body = vec![0; n as usize + 2];
    std::io::Read::read_exact(r, &mut body).expect("a bulk reply");
    body.truncate(n as usize);
    body
}

/// `request(key)` for every key through `port`, pipelined; `check` sees
/// each key with its reply.
fn pipeline(
    port: u16,
    keys: &[Vec<u8>],
    request: impl Fn(&[u8], &mut Vec<u8>),
    mut check: impl FnMut(&[u8], Vec<u8>),
) {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the pool");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    for chunk in keys.chunks(PIPELINE) {
        buf.clear();
        for k in chunk {
            request(k, &mut buf);
        }
        writer.write_all(&buf).unwrap();
        for k in chunk {
            check(k, read_reply(&mut reader));
        }
    }
}

/// SETs every key through `port`; every reply must be +OK.
fn write_keys(port: u16, keys: &[Vec<u8>]) {
    let set = |k: &[u8], buf: &mut Vec<u8>| resp(&[b"SET", k, b"v"], buf);
    pipeline(port, keys, set, |k, reply| {
        assert_eq!(
            reply,
            b"+OK\r\n",
            "SET {:?} through port {port}",
            String::from_utf8_lossy(k)
        );
    });
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

    let listed: Vec<String> = KeyHash::ALL.iter().map(|h| h.to_string()).collect();
    assert_eq!(listed, HASHES, "every hash twemproxy has, and only those");
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

    let written = keys(KEYS_PER_POOL);
    for (_, port, ..) in &pools {
        write_keys(*port, &written);
    }
    let write_time = started.elapsed();

    // Where each server says each pool's keys are: per pool, the server
    // of each written key, by its index.
    let index: HashMap<&[u8], usize> = written
        .iter()
        .enumerate()
        .map(|(i, k)| (&k[..], i))
        .collect();
    let mut found: Vec<Vec<Option<usize>>> = vec![vec![None; written.len()]; pools.len()];
    let server_ports: Vec<u16> = redis.iter().map(|r| r.port).collect();
    let held: Vec<Vec<Vec<Vec<u8>>>> = std::thread::scope(|s| {
        let each = server_ports.iter().map(|port| {
            s.spawn(|| {
                let mut con = common::connect(*port);
                (0..pools.len()).map(|db| keys_on(&mut con, db)).collect()
            })
        });
        let each: Vec<_> = each.collect();
        each.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (si, dbs) in held.iter().enumerate() {
        for (db, keys) in dbs.iter().enumerate() {
            for k in keys {
                let at = *index.get(&k[..]).expect("only written keys");
                let was = found[db][at].replace(si);
                assert!(was.is_none(), "a key on two servers (db {db})");
            }
        }
    }
    drop(held);

    let read_time = started.elapsed();
    nc.assert_no_panic();
    nc.kill();
    wait_closed(pools[0].1);

    // The same file, unchanged, under shardis; each pool asked where each key is.
    let mut shardis = Proc::spawn(
        Command::new(common::BIN)
            .args(["proxy", "--config"])
            .arg(&path)
            .args(["-s", &low_port().to_string(), "-a", "127.0.0.1"])
            .stdout(Stdio::null()),
        pools[0].1,
        "shardis proxy",
    );
    shardis.wait_ready();
    // Four clients at once, each asking about every fourth pool.
    let report: Vec<Report> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let (pools, parsed, found) = (&pools, &parsed, &found);
                let (ports, written) = (&server_ports, &written);
                s.spawn(move || {
                    (w..pools.len())
                        .step_by(4)
                        .map(|i| {
                            let pool = &parsed.pools[i];
                            assert_eq!(pool.name, pools[i].0);
                            check_pool(pool, pools[i].1, written, &found[i], ports)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    let total: usize = report.iter().map(|r| r.2).sum();
    println!(
        "{} pools, {total} keys, a server on 11211: {on_11211}, written in {:.1?}, found on the servers by {:.1?}, checked by {:.1?}",
        report.len(),
        write_time,
        read_time,
        started.elapsed()
    );
    let misses: Vec<_> = report.iter().filter(|r| r.1 != r.2).collect();
    assert!(
        misses.is_empty(),
        "pools that disagree with nutcracker: {misses:#?}"
    );
    shardis.assert_no_panic();
}

/// A pool's name, keys agreeing, keys asked about, and the first that did
/// not agree (key, what shardis said, the server holding it).
type Report = (String, usize, usize, Option<(String, String, String)>);

/// `CLUSTER KEYNODE` on the pool's port for every key, compared with the
/// server nutcracker put it on.
fn check_pool(
    pool: &nutcracker::Pool,
    port: u16,
    written: &[Vec<u8>],
    found: &[Option<usize>],
    servers: &[u16],
) -> Report {
    let name = &pool.name;
    let addr_of: HashMap<String, String> = pool
        .node_specs()
        .into_iter()
        .map(|s| (s.name, s.addr))
        .collect();
    let mut agree = 0;
    let mut first_miss = None;
    let keynode = |k: &[u8], buf: &mut Vec<u8>| resp(&[b"CLUSTER", b"KEYNODE", k], buf);
    let mut at = 0;
    pipeline(port, written, keynode, |k, reply| {
        let server = found[at].unwrap_or_else(|| {
            panic!(
                "{name}: key {:?} is on no server",
                String::from_utf8_lossy(k)
            )
        });
        at += 1;
        let want = format!("127.0.0.1:{}", servers[server]);
        let said = String::from_utf8_lossy(&reply).into_owned();
        if addr_of.get(&said) == Some(&want) {
            agree += 1;
        } else if first_miss.is_none() {
            first_miss = Some((String::from_utf8_lossy(k).into_owned(), said, want));
        }
    });
    (name.clone(), agree, written.len(), first_miss)
}

/// Until nothing listens on `port` any more.
fn wait_closed(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(Instant::now() < deadline, "port {port} still answers");
        std::thread::sleep(Duration::from_millis(20));
    }
}
