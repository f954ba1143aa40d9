//! `shardis sim --compare`: the same keys through every placement strategy in
//! [`super::strategies`] — movement on N→N+1 and N→N−1, imbalance, lookup cost
//! and routing-state size — plus the hash avalanche check.
//!
//! One parallel pass: each key is hashed once (MD5 of its tag) and located on
//! every strategy's current, grown and shrunk placement.

use super::avalanche::{self, Avalanche};
use super::keys::{best_ns_per_op, par_chunks, thread_count, want_progress, KeyGen, MAX_KEY_LEN};
use super::strategies::{all, KeyHash, Placement};
use super::table::{count, pct, Table};
use super::{SimArgs, AVALANCHE_KEYS};
use serde::Serialize;
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

/// Keys in the single-thread lookup timing sample.
const TIMING_KEYS: usize = 10_000;

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub keys: u64,
    pub nodes: usize,
    pub vnodes: u32,
    pub ideal_join: f64,
    pub ideal_leave: f64,
    pub rows: Vec<Row>,
    /// Hash tag + MD5 per key, the cost every md5-based strategy pays first.
    pub md5_key_hash_ns: f64,
    pub wall_secs: f64,
    pub avalanche_keys: u64,
    pub avalanche: Vec<Avalanche>,
}

/// One strategy's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub strategy: String,
    pub moved_join: f64,
    pub moved_leave: f64,
    pub max_over_avg: f64,
    pub min_over_avg: f64,
    pub stddev_over_avg: f64,
    /// Placement lookup from a precomputed MD5 (CRC16 slots hash the key here).
    pub lookup_ns: f64,
    pub metadata_bytes: usize,
}

/// Runs the comparison with the standard avalanche sample.
pub(crate) fn run(args: &SimArgs) -> Result<Report, String> {
    run_with(args, AVALANCHE_KEYS)
}

/// Runs the comparison, hashing `avalanche_keys` keys for the avalanche check.
pub(crate) fn run_with(args: &SimArgs, avalanche_keys: u64) -> Result<Report, String> {
    let n = args.nodes;
    if n < 2 {
        return Err("--compare needs at least 2 nodes (it removes one)".into());
    }
    let base = all(n, args.vnodes);
    let grown: Vec<Box<dyn Placement>> = base.iter().map(|p| p.joined()).collect();
    let shrunk: Vec<Box<dyn Placement>> = base.iter().map(|p| p.left()).collect();
    let gen = KeyGen::new(args.key_kind, args.seed);
    let progress = want_progress(args.progress).then_some("compare");
    let started = Instant::now();
    // Per strategy: (keys per node, moved on join, moved on leave).
    let init = || {
        base.iter()
            .map(|_| (vec![0u64; n], 0u64, 0u64))
            .collect::<Vec<_>>()
    };
    let parts = par_chunks(
        args.keys,
        thread_count(args.threads),
        progress,
        init,
        |acc, range| {
            let mut buf = [0u8; MAX_KEY_LEN];
            for i in range {
                let kh = KeyHash::new(gen.key(i, &mut buf));
                for (s, a) in acc.iter_mut().enumerate() {
                    let owner = base[s].locate(&kh);
                    a.0[owner] += 1;
                    a.1 += u64::from(grown[s].locate(&kh) != owner);
                    a.2 += u64::from(shrunk[s].locate(&kh) != owner);
                }
            }
        },
    );
    let wall_secs = started.elapsed().as_secs_f64();
    let mut total = init();
    for part in parts {
        for (t, p) in total.iter_mut().zip(part) {
            for (x, y) in t.0.iter_mut().zip(&p.0) {
                *x += y;
            }
            t.1 += p.1;
            t.2 += p.2;
        }
    }

    let sample = timing_sample(&gen);
    let keys = args.keys as f64;
    let avg = keys / n as f64;
    let rows = base
        .iter()
        .zip(&total)
        .map(|(p, (per_node, join, leave))| {
            let max = *per_node.iter().max().unwrap_or(&0) as f64;
            let min = *per_node.iter().min().unwrap_or(&0) as f64;
            let var = per_node
                .iter()
                .map(|&k| (k as f64 - avg).powi(2))
                .sum::<f64>()
                / n as f64;
            Row {
                strategy: p.name(),
                moved_join: *join as f64 / keys,
                moved_leave: *leave as f64 / keys,
                max_over_avg: max / avg,
                min_over_avg: min / avg,
                stddev_over_avg: var.sqrt() / avg,
                lookup_ns: lookup_ns(p.as_ref(), &sample),
                metadata_bytes: p.metadata_bytes(),
            }
        })
        .collect();
    Ok(Report {
        keys: args.keys,
        nodes: n,
        vnodes: args.vnodes,
        ideal_join: 1.0 / (n + 1) as f64,
        ideal_leave: 1.0 / n as f64,
        rows,
        md5_key_hash_ns: md5_ns(&gen),
        wall_secs,
        avalanche_keys,
        avalanche: avalanche::measure(avalanche_keys),
    })
}

/// Keys and their hashes for the lookup timing, kept in one arena.
fn timing_sample(gen: &KeyGen) -> (Vec<u8>, Vec<(usize, usize, u64)>) {
    let mut arena = Vec::with_capacity(TIMING_KEYS * 12);
    let mut index = Vec::with_capacity(TIMING_KEYS);
    let mut buf = [0u8; MAX_KEY_LEN];
    for i in 0..TIMING_KEYS as u64 {
        let kh = KeyHash::new(gen.key(i, &mut buf));
        let start = arena.len();
        arena.extend_from_slice(kh.tagged);
        index.push((start, arena.len(), kh.h64));
    }
    (arena, index)
}

fn lookup_ns(p: &dyn Placement, (arena, index): &(Vec<u8>, Vec<(usize, usize, u64)>)) -> f64 {
    best_ns_per_op(index.len(), || {
        let mut acc = 0usize;
        for &(s, e, h64) in index {
            let kh = KeyHash {
                tagged: &arena[s..e],
                h64,
            };
            acc = acc.wrapping_add(p.locate(black_box(&kh)));
        }
        black_box(acc);
    })
}

fn md5_ns(gen: &KeyGen) -> f64 {
    let mut buf = [0u8; MAX_KEY_LEN];
    best_ns_per_op(TIMING_KEYS, || {
        let mut acc = 0u64;
        for i in 0..TIMING_KEYS as u64 {
            acc = acc.wrapping_add(KeyHash::new(black_box(gen.key(i, &mut buf))).h64);
        }
        black_box(acc);
    })
}

/// Writes the comparison table and the avalanche table.
pub(crate) fn write(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "Strategy comparison: {} keys, {} nodes (ring: {} vnodes); join adds node {}, leave removes node {}",
        count(r.keys),
        r.nodes,
        r.vnodes,
        r.nodes + 1,
        r.nodes
    )?;
    let join_head = format!("moved {}→{}", r.nodes, r.nodes + 1);
    let leave_head = format!("moved {}→{}", r.nodes, r.nodes - 1);
    let mut t = Table::new(&[
        "strategy",
        &join_head,
        &leave_head,
        "max/avg",
        "min/avg",
        "std/avg",
        "lookup ns",
        "metadata",
    ]);
    t.row(vec![
        "ideal".into(),
        pct(r.ideal_join),
        pct(r.ideal_leave),
        "1.0000".into(),
        "1.0000".into(),
        "0".into(),
        String::new(),
        String::new(),
    ]);
    for row in &r.rows {
        t.row(vec![
            row.strategy.clone(),
            pct(row.moved_join),
            pct(row.moved_leave),
            format!("{:.4}", row.max_over_avg),
            format!("{:.4}", row.min_over_avg),
            format!("{:.4}", row.stddev_over_avg),
            format!("{:.1}", row.lookup_ns),
            format!("{} B", count(row.metadata_bytes as u64)),
        ]);
    }
    t.write(out)?;
    writeln!(
        out,
        "  lookup ns: single thread, after the key hash; hash tag + MD5 costs {:.1} ns more per key (CRC16 slots hash inside the lookup). Pass wall time {:.2}s.\n",
        r.md5_key_hash_ns, r.wall_secs
    )?;
    avalanche::write(&r.avalanche, r.avalanche_keys, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 200 000 keys in debug builds keep the suite fast; release runs the 10^6
    /// the acceptance figures are defined at.
    const KEYS: u64 = if cfg!(debug_assertions) {
        200_000
    } else {
        1_000_000
    };

    #[test]
    fn consistent_strategies_move_one_nth_and_mod_n_moves_almost_all() {
        let args = SimArgs {
            keys: KEYS,
            compare: true,
            ..SimArgs::default()
        };
        let r = run_with(&args, 50).unwrap();
        let mut text = Vec::new();
        write(&r, &mut text).unwrap();
        println!("{}", String::from_utf8_lossy(&text));
        for row in &r.rows {
            if row.strategy.starts_with("mod-N") {
                assert!(row.moved_join > 0.85 && row.moved_leave > 0.85, "{row:?}");
                continue;
            }
            assert!(row.moved_join <= r.ideal_join + 0.02, "{row:?}");
            assert!(row.moved_leave <= r.ideal_leave + 0.02, "{row:?}");
            assert!(row.moved_join >= r.ideal_join - 0.03, "{row:?}");
            assert!(row.max_over_avg < 1.5, "{row:?}");
        }
    }

    #[test]
    fn runs_are_deterministic() {
        let args = SimArgs {
            keys: 20_000,
            threads: 3,
            key_kind: super::super::KeyKind::Random,
            ..SimArgs::default()
        };
        let a = run_with(&args, 10).unwrap();
        let b = run_with(&SimArgs { threads: 1, ..args }, 10).unwrap();
        for (x, y) in a.rows.iter().zip(&b.rows) {
            assert_eq!(
                (x.moved_join, x.moved_leave, x.max_over_avg),
                (y.moved_join, y.moved_leave, y.max_over_avg)
            );
        }
    }
}
