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

criterion_group!(benches, node, large_request);
criterion_main!(benches);
