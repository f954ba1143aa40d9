//! Ring lookup benchmarks: `cargo bench --bench ring`.
//!
//! Measures a full `locate` (hash tag + MD5 + binary search), the key hash
//! alone and `locate_hash` alone, for both point schemes over 10 nodes × 160
//! vnodes — the numbers behind the proxy's per-request routing cost.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use shardis::ring::{NodeSpec, PointScheme, Ring, RingConfig, DEFAULT_VNODES};

fn ring(scheme: PointScheme) -> Ring {
    let nodes = (1..=10)
        .map(|i| NodeSpec {
            name: format!("node{i}"),
            addr: format!("127.0.0.1:{}", 7000 + i),
            weight: 1,
        })
        .collect();
    Ring::new(
        nodes,
        RingConfig {
            scheme,
            vnodes: DEFAULT_VNODES,
        },
        0,
    )
    .expect("ring")
}

/// 4096 realistic keys, cycled so the point array stays cache-resident as in the proxy.
fn keys() -> Vec<Vec<u8>> {
    (0..4096u32)
        .map(|i| format!("user:{}", i.wrapping_mul(2_654_435_761)).into_bytes())
        .collect()
}

fn bench(c: &mut Criterion) {
    let keys = keys();
    for scheme in [PointScheme::Ketama, PointScheme::Vnode] {
        let r = ring(scheme);
        let hashes: Vec<u64> = keys.iter().map(|k| r.key_hash(k)).collect();
        let mut i = 0usize;
        c.bench_function(&format!("{scheme}/locate (hash + search)"), |b| {
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(r.locate(black_box(&keys[i])))
            })
        });
        c.bench_function(&format!("{scheme}/key_hash"), |b| {
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(r.key_hash(black_box(&keys[i])))
            })
        });
        c.bench_function(&format!("{scheme}/locate_hash (search only)"), |b| {
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(r.locate_hash(black_box(hashes[i])))
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
