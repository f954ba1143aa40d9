//! What the operator plane costs per request: `cargo bench --bench operator`.
//!
//! Every keyed request pays, on the proxy's hot path: one command-series
//! update (calls, errors, latency bucket), one nodes-engaged bucket, the
//! hot-key sample check (1 in 16 takes the sketch's mutex), the slow-log
//! threshold comparison, the MONITOR check (none attached: one atomic
//! load), one node-series update in the upstream actor, and
//! four clock reads (arrival, send, reply read, reply ready) — shared by every
//! request of a pipelined batch. `per_request` runs all of it for a lone
//! request, `per_request_pipelined_16` for 16 that travel together (reported
//! per request); the other benches split the cost into parts.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shardis::proxy::commands::monitor::Monitors;
use shardis::proxy::ops::hotkeys::HotKeys;
use shardis::proxy::ops::metrics::{command_index, Metrics, NodeMetrics};
use shardis::proxy::ops::slowlog::SlowLog;
use shardis::proxy::policy::lookup;

const KEYS: usize = 10_000;

fn keys() -> Vec<Vec<u8>> {
    (0..KEYS)
        .map(|i| format!("user:{}", 100_000 + i * 7919).into_bytes())
        .collect()
}

fn parts(c: &mut Criterion) {
    let m = Metrics::default();
    let node = NodeMetrics::default();
    let hot = HotKeys::new(128);
    let slow = SlowLog::new(10_000, 128);
    let monitors = Monitors::default();
    let get = lookup(b"GET").unwrap();
    let ks = keys();
    let mut g = c.benchmark_group("operator");
    g.throughput(Throughput::Elements(1));
    g.bench_function("command_index", |b| {
        b.iter(|| command_index(black_box(get)))
    });
    let idx = command_index(get);
    let mut ns = 0u64;
    g.bench_function("record_command", |b| {
        b.iter(|| {
            ns = (ns + 7_919) % 3_000_000;
            m.record(black_box(idx), ns, false, false)
        })
    });
    g.bench_function("record_engaged", |b| {
        b.iter(|| m.engaged(black_box(get), 1))
    });
    g.bench_function("node_observe", |b| {
        b.iter(|| {
            ns = (ns + 7_919) % 3_000_000;
            node.observe(ns, false)
        })
    });
    let mut i = 0;
    g.bench_function("hot_key_sample", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            hot.sample(black_box(&ks[i]))
        })
    });
    g.bench_function("hot_key_offer_unsampled_cost", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            hot.offer(black_box(&ks[i]))
        })
    });
    g.bench_function("slowlog_check", |b| {
        b.iter(|| slow.is_slow(black_box(ns / 1000)))
    });
    g.bench_function("monitor_check_none_attached", |b| {
        b.iter(|| black_box(&monitors).is_attached())
    });
    g.bench_function("clock_read", |b| b.iter(Instant::now));
    // One request alone: every clock read is its own (session arrival,
    // upstream send, upstream reply, session reply).
    g.bench_function("per_request", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            let arrived = Instant::now();
            hot.sample(&ks[i]);
            let sent = Instant::now();
            node.observe(Instant::now().duration_since(sent).as_nanos() as u64, false);
            let took = Instant::now().duration_since(arrived).as_nanos() as u64;
            m.record(idx, took, false, false);
            m.engaged(get, 1);
            black_box(monitors.is_attached());
            black_box(slow.is_slow(took / 1000))
        })
    });
    // Pipelined: the session and the upstream actor read the clock once per
    // batch, so 16 requests that arrive and are answered together share them.
    g.throughput(Throughput::Elements(16));
    g.bench_function("per_request_pipelined_16", |b| {
        b.iter(|| {
            let arrived = Instant::now();
            for _ in 0..16 {
                i = (i + 1) % KEYS;
                hot.sample(&ks[i]);
            }
            let sent = Instant::now();
            let read = Instant::now();
            for _ in 0..16 {
                node.observe(read.duration_since(sent).as_nanos() as u64, false);
            }
            let done = Instant::now();
            for _ in 0..16 {
                let took = done.duration_since(arrived).as_nanos() as u64;
                m.record(idx, took, false, false);
                m.engaged(get, 1);
                black_box(monitors.is_attached());
                black_box(slow.is_slow(took / 1000));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, parts);
criterion_main!(benches);
