//! Multi-key split and merge benchmarks: `cargo bench --bench route`.
//!
//! A multi-key command is split by owner node (key positions from the command
//! table, one ring lookup per key, grouped by node, one fragment encoded per
//! node) and the nodes' replies are merged back in key order
//! ([`merge_fragments`]); fanned-out commands are combined by [`aggregate`].
//! The split here mirrors the proxy's own grouping step by step, without the
//! sockets; the merges call the proxy's functions.

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shardis::proxy::policy::lookup;
use shardis::proxy::policy::{Aggregate, Merge};
use shardis::proxy::route::merge::{aggregate, merge_fragments};
use shardis::resp::{encode, Request};
use shardis::ring::{NodeSpec, Ring, RingConfig};

const KEYS: usize = 100;
const NODES: usize = 10;

fn ring() -> Ring {
    let nodes = (1..=NODES)
        .map(|i| NodeSpec {
            name: format!("node{i}"),
            addr: format!("127.0.0.1:{}", 7000 + i),
            weight: 1,
        })
        .collect();
    Ring::new(nodes, RingConfig::default(), 0).expect("ring")
}

fn keys() -> Vec<Vec<u8>> {
    (0..KEYS)
        .map(|i| format!("user:{}", 100_000 + i * 7919).into_bytes())
        .collect()
}

/// Groups a request's keys by owner node, keeping each key's argument position.
fn group(ring: &Ring, req: &Request) -> Vec<(usize, Vec<usize>)> {
    let spec = lookup(req.name()).expect("known command");
    let positions = spec.key_positions(&req.args).expect("keys");
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for p in positions {
        let node = ring.locate(&req.args[p]);
        match groups.iter_mut().find(|(n, _)| *n == node) {
            Some((_, ps)) => ps.push(p),
            None => groups.push((node, vec![p])),
        }
    }
    groups
}

/// One fragment per node: the command name, then that node's keys (and values).
fn fragments(req: &Request, groups: &[(usize, Vec<usize>)], pairs: bool) -> Vec<Bytes> {
    groups
        .iter()
        .map(|(_, ps)| {
            let mut parts: Vec<&[u8]> = vec![&req.args[0]];
            for &p in ps {
                parts.push(&req.args[p]);
                if pairs {
                    parts.push(&req.args[p + 1]);
                }
            }
            let mut raw = BytesMut::new();
            encode::command(&mut raw, &parts);
            raw.freeze()
        })
        .collect()
}

fn split(c: &mut Criterion) {
    let ring = ring();
    let ks = keys();
    let value = vec![b'v'; 100];
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(ks.iter().map(|k| k.as_slice()));
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for k in &ks {
        mset.push(k);
        mset.push(&value);
    }
    let (mget, mset) = (Request::from_args(&mget), Request::from_args(&mset));
    let mut g = c.benchmark_group("split");
    g.throughput(Throughput::Elements(KEYS as u64));
    g.bench_function("MGET-100: group by node", |b| {
        b.iter(|| black_box(group(&ring, black_box(&mget))))
    });
    g.bench_function("MGET-100: group + encode fragments", |b| {
        b.iter(|| {
            let groups = group(&ring, black_box(&mget));
            black_box(fragments(&mget, &groups, false))
        })
    });
    g.bench_function("MSET-100 100B: group + encode fragments", |b| {
        b.iter(|| {
            let groups = group(&ring, black_box(&mset));
            black_box(fragments(&mset, &groups, true))
        })
    });
    g.finish();
}

/// What each node answers to its MGET fragment: one 100 B value per key,
/// every tenth key missing.
fn mget_replies(groups: &[(usize, Vec<usize>)]) -> Vec<Bytes> {
    let value = vec![b'v'; 100];
    groups
        .iter()
        .map(|(_, ps)| {
            let mut out = BytesMut::new();
            encode::array_len(&mut out, ps.len());
            for &p in ps {
                if p % 10 == 0 {
                    out.extend_from_slice(b"$-1\r\n");
                } else {
                    encode::bulk(&mut out, &value);
                }
            }
            out.freeze()
        })
        .collect()
}

fn merge(c: &mut Criterion) {
    let ring = ring();
    let ks = keys();
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(ks.iter().map(|k| k.as_slice()));
    let req = Request::from_args(&args);
    let groups = group(&ring, &req);
    let order: Vec<Vec<usize>> = groups.iter().map(|(_, ps)| ps.clone()).collect();
    let values = mget_replies(&groups);
    let oks: Vec<Bytes> = groups
        .iter()
        .map(|_| Bytes::from_static(b"+OK\r\n"))
        .collect();
    let ints: Vec<Bytes> = groups
        .iter()
        .map(|(_, ps)| Bytes::from(format!(":{}\r\n", ps.len())))
        .collect();
    let mut g = c.benchmark_group("merge_fragments");
    g.throughput(Throughput::Elements(KEYS as u64));
    g.bench_function(format!("MGET-100 from {} nodes", groups.len()), |b| {
        b.iter(|| {
            black_box(merge_fragments(
                Merge::Values,
                black_box(&values),
                &order,
                KEYS,
                1,
            ))
        })
    });
    g.bench_function("MSET-100 all OK", |b| {
        b.iter(|| {
            black_box(merge_fragments(
                Merge::AllOk,
                black_box(&oks),
                &order,
                KEYS,
                1,
            ))
        })
    });
    g.bench_function("DEL-100 sum", |b| {
        b.iter(|| {
            black_box(merge_fragments(
                Merge::Sum,
                black_box(&ints),
                &order,
                KEYS,
                1,
            ))
        })
    });
    g.finish();

    let sizes: Vec<Bytes> = (0..NODES)
        .map(|i| Bytes::from(format!(":{}\r\n", 100_000 + i)))
        .collect();
    let key_lists: Vec<Bytes> = (0..NODES)
        .map(|n| {
            let mut out = BytesMut::new();
            encode::array_len(&mut out, 100);
            for i in 0..100 {
                encode::bulk(&mut out, format!("user:{}", n * 1000 + i).as_bytes());
            }
            out.freeze()
        })
        .collect();
    let mut g = c.benchmark_group("aggregate");
    g.throughput(Throughput::Elements(NODES as u64));
    g.bench_function("DBSIZE sum of 10", |b| {
        b.iter(|| black_box(aggregate(Aggregate::Sum, black_box(&sizes))))
    });
    g.bench_function("KEYS concat 10 × 100", |b| {
        b.iter(|| black_box(aggregate(Aggregate::Concat, black_box(&key_lists))))
    });
    g.finish();
}

criterion_group!(benches, split, merge);
criterion_main!(benches);
