//! The built-in node's per-command cost and the share of it taken by the
//! transaction gate: `cargo bench --bench node`.
//!
//! `dispatch` runs GET, SET (100 B) and INCR through the node's real
//! dispatcher, without sockets (table lookup, the gate held shared, the
//! handler, WATCH's touch check). `gate` is taking and releasing the gate
//! alone: what every command pays so that EXEC can be atomic; `two atomic
//! adds` is the floor any lock costs, to calibrate a busy machine.

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

criterion_group!(benches, node);
criterion_main!(benches);
