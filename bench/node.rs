//! The built-in node's per-command cost and the share of it taken by the
//! transaction gate: `cargo bench --bench node`.
//!
//! `dispatch` runs GET, SET (100 B) and INCR through the node's real
//! dispatcher, without sockets (table lookup, the gate held shared, the
//! handler, WATCH's touch check). `gate` is taking and releasing the gate
//! alone: what every command pays so that EXEC can be atomic; `two atomic
//! adds` is the floor any lock costs, to calibrate a busy machine.
//!
//! `large request` writes one MSET of 10 000 and of 100 000 arguments to
//! the node's query buffer in 4 KB pieces, running the node's decoding and
//! dispatch after each piece as after each read from a socket: ten times
//! the arguments should cost ten times as much, not a hundred. (Without
//! sockets on purpose: over loopback the reads would merge into fewer,
//! larger ones, and how many depends on the machine.)
//!
//! `scan` walks a hash, a set and a sorted set of 10^4, 10^5 and 10^6
//! members to the end with HSCAN/SSCAN/ZSCAN COUNT 100 (`cargo bench
//! --bench node -- scan`): a step costs O(COUNT), so ten times the members
//! should cost ten times as much per walk.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion};
use shardis::backend::bench::Bench;

fn node(c: &mut Criterion) {
    let mut b = Bench::new();
    let mut out = BytesMut::with_capacity(1 << 16);
    let value = vec![b'v'; 100];
    b.run(&[b"SET", b"key:1", &value], &mut out);
    let mut g = c.benchmark_group("node");
    g.bench_function("dispatch GET", |bench| {
        bench.iter(|| {
            out.clear();
            b.run(black_box(&[b"GET", b"key:1"]), &mut out);
        })
    });
    g.bench_function("dispatch SET 100 B", |bench| {
        bench.iter(|| {
            out.clear();
            b.run(black_box(&[b"SET", b"key:1", &value]), &mut out);
        })
    });
    g.bench_function("dispatch INCR", |bench| {
        bench.iter(|| {
            out.clear();
            b.run(black_box(&[b"INCR", b"counter"]), &mut out);
        })
    });
    g.bench_function("gate taken shared", |bench| bench.iter(|| b.gate()));
    // Calibration: the floor for any lock, one atomic add and one subtract.
    let n = std::sync::atomic::AtomicU64::new(0);
    g.bench_function("two atomic adds", |bench| {
        bench.iter(|| {
            n.fetch_add(1, std::sync::atomic::Ordering::Acquire);
            n.fetch_sub(1, std::sync::atomic::Ordering::Release);
        })
    });
    g.finish();
}

/// MSET of `args` arguments (key and value pairs, after the name), RESP-encoded.
fn mset(args: usize) -> Vec<u8> {
    let mut req = format!("*{}\r\n$4\r\nMSET\r\n", args + 1).into_bytes();
    for i in 0..args / 2 {
        let key = format!("key:{i:08}");
        let value = format!("value:{i:08}");
        for a in [key, value] {
            req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    req
}

fn large_request(c: &mut Criterion) {
    let mut g = c.benchmark_group("node large request");
    g.sample_size(10);
    for args in [10_000, 100_000] {
        let req = mset(args);
        let mut out = BytesMut::with_capacity(1 << 10);
        g.bench_function(format!("MSET {args} arguments in 4 KB pieces"), |bench| {
            bench.iter_batched_ref(
                Bench::new,
                |b| {
                    out.clear();
                    for piece in req.chunks(4096) {
                        assert!(b.feed(piece, &mut out));
                    }
                    assert_eq!(&out[..], b"+OK\r\n");
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

/// A node holding a hash `h`, a set `s` and a sorted set `z` of `n` members each.
fn filled(n: usize) -> Bench {
    let mut b = Bench::new();
    let mut out = BytesMut::with_capacity(1 << 16);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let names: Vec<Vec<u8>> = chunk
            .iter()
            .map(|i| format!("member:{i}").into_bytes())
            .collect();
        let scores: Vec<Vec<u8>> = chunk.iter().map(|i| i.to_string().into_bytes()).collect();
        let mut hset: Vec<&[u8]> = vec![b"HSET", b"h"];
        let mut sadd: Vec<&[u8]> = vec![b"SADD", b"s"];
        let mut zadd: Vec<&[u8]> = vec![b"ZADD", b"z"];
        for (m, sc) in names.iter().zip(&scores) {
            hset.extend([&m[..], b"v"]);
            sadd.push(m);
            zadd.extend([&sc[..], &m[..]]);
        }
        for req in [hset, sadd, zadd] {
            out.clear();
            b.run(&req, &mut out);
        }
    }
    b
}

/// Walks `key` with `cmd … COUNT 100` from cursor 0 back to 0; the steps taken.
fn walk(b: &mut Bench, out: &mut BytesMut, cmd: &[u8], key: &[u8]) -> usize {
    let mut cursor = b"0".to_vec();
    let mut steps = 0;
    loop {
        out.clear();
        b.run(&[cmd, key, &cursor, b"COUNT", b"100"], out);
        steps += 1;
        // `*2\r\n$<len>\r\n<cursor>\r\n…`
        let len_end = out[5..].iter().position(|&c| c == b'\r').unwrap() + 5;
        cursor = out[len_end + 2..]
            .split(|&c| c == b'\r')
            .next()
            .unwrap()
            .to_vec();
        if cursor == b"0" {
            return steps;
        }
    }
}

fn scan(c: &mut Criterion) {
    let mut g = c.benchmark_group("scan");
    g.sample_size(10);
    let sizes: Vec<usize> = std::env::var("SCAN_BENCH_SIZES")
        .map(|v| v.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|_| vec![10_000, 100_000, 1_000_000]);
    for n in sizes {
        let mut b = filled(n);
        let mut out = BytesMut::with_capacity(1 << 16);
        for (cmd, key) in [("HSCAN", "h"), ("SSCAN", "s"), ("ZSCAN", "z")] {
            assert!(walk(&mut b, &mut out, cmd.as_bytes(), key.as_bytes()) >= n / 100);
            g.bench_function(format!("{cmd} walk of {n} COUNT 100"), |bench| {
                bench.iter(|| walk(&mut b, &mut out, cmd.as_bytes(), key.as_bytes()))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, node, large_request, scan);
criterion_main!(benches);
