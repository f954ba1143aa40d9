//! The default `shardis sim` report: how one ring spreads the keys, what a join
//! or leave moves, whether the projected data fits the nodes, and what a hot
//! key does.
//!
//! One parallel pass over the key stream hashes each key once and locates it
//! on the current ring and, when asked, on the grown and shrunk rings.

use super::keys::{best_ns_per_op, par_chunks, thread_count, want_progress, KeyGen, MAX_KEY_LEN};
use super::strategies::node_specs;
use super::table::{bytes, count, duration, pct, si, Table};
use super::SimArgs;
use crate::ring::{Ring, RingConfig};
use serde::Serialize;
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

/// Everything the distribution pass measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub keys: u64,
    pub scheme: String,
    pub vnodes: u32,
    pub key_kind: super::KeyKind,
    pub seed: u64,
    pub threads: usize,
    pub nodes: Vec<NodeRow>,
    /// Largest keys/expected ratio (expected = total × weight share).
    pub max_over_expected: f64,
    /// Smallest keys/expected ratio.
    pub min_over_expected: f64,
    /// Standard deviation of keys/expected across nodes.
    pub stddev_ratio: f64,
    pub capacity: Capacity,
    pub join: Option<Movement>,
    pub leave: Option<Movement>,
    pub hot_key: Option<super::hot_key::HotKey>,
    pub perf: Perf,
}

/// One node's load.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NodeRow {
    pub name: String,
    pub weight: u32,
    pub points: usize,
    pub keys: u64,
    /// Measured fraction of the keys.
    pub share: f64,
    /// weight / total weight.
    pub expected_share: f64,
    /// Fraction of the hash space its points own.
    pub hash_space_share: f64,
    /// Projected bytes at `capacity.projected_keys`.
    pub projected_bytes: f64,
    /// (capacity − projected) / capacity; negative means it does not fit.
    pub headroom: f64,
}

/// The capacity projection and its assumptions.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Capacity {
    pub projected_keys: u64,
    pub value_size: u64,
    pub avg_key_len: f64,
    pub entry_overhead: u64,
    pub bytes_per_key: f64,
    pub node_capacity: u64,
    pub total_bytes: f64,
    pub max_node_bytes: f64,
    pub fits: bool,
    pub min_headroom: f64,
    /// Nodes of this capacity needed at the measured imbalance (estimate).
    pub nodes_needed: u64,
}

/// Keys that change owner when nodes join or leave.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Movement {
    pub nodes_before: usize,
    pub nodes_after: usize,
    pub moved: u64,
    pub fraction: f64,
    /// Ideal fraction: joined/(N+joined) or removed/N (weights ignored).
    pub ideal: f64,
    /// Join: keys each old node gives away. Leave: keys each remaining node receives.
    pub per_node: Vec<u64>,
    /// Moves that did not need to happen (join: to an old node; leave: off a remaining node).
    pub unnecessary: u64,
}

/// Speed of the pass and of a lookup.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Perf {
    pub wall_secs: f64,
    /// Keys per second over all threads (format + hash + every locate).
    pub keys_per_sec: f64,
    /// Ring lookups (locate_hash) per second over all threads during the pass.
    pub lookups_per_sec: f64,
    /// One `locate_hash`, single thread, hashes precomputed.
    pub lookup_ns: f64,
    /// One key hash (hash tag + MD5), single thread.
    pub key_hash_ns: f64,
}

#[derive(Clone)]
struct Acc {
    keys: Vec<u64>,
    key_bytes: u64,
    join_from: Vec<u64>,
    join_unneeded: u64,
    leave_to: Vec<u64>,
    leave_unneeded: u64,
}

/// Runs the pass.
pub(crate) fn run(args: &SimArgs) -> Result<Report, String> {
    let n = args.nodes;
    let config = RingConfig {
        scheme: args.points,
        vnodes: args.vnodes,
    };
    let specs = node_specs(n + args.add, &args.weights);
    let base = Ring::new(specs[..n].to_vec(), config, 0).map_err(|e| e.to_string())?;
    let joined = if args.add > 0 {
        Some(base.with_nodes(specs.clone()).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let left = if args.remove > 0 {
        Some(
            base.with_nodes(specs[..n - args.remove].to_vec())
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    let remaining = n - args.remove;
    let gen = KeyGen::new(args.key_kind, args.seed);
    let threads = thread_count(args.threads);
    let progress = want_progress(args.progress).then_some("sim");

    let started = Instant::now();
    let init = Acc {
        keys: vec![0; n],
        key_bytes: 0,
        join_from: vec![0; n],
        join_unneeded: 0,
        leave_to: vec![0; remaining],
        leave_unneeded: 0,
    };
    let accs = par_chunks(
        args.keys,
        threads,
        progress,
        || init.clone(),
        |acc, range| {
            let mut buf = [0u8; MAX_KEY_LEN];
            for i in range {
                let key = gen.key(i, &mut buf);
                acc.key_bytes += key.len() as u64;
                // Every ring shares the scheme: one hash, several lookups.
                let h = base.key_hash(key);
                let owner = base.locate_hash(h);
                acc.keys[owner] += 1;
                if let Some(j) = &joined {
                    let now = j.locate_hash(h);
                    if now != owner {
                        acc.join_from[owner] += 1;
                        acc.join_unneeded += u64::from(now < n);
                    }
                }
                if let Some(l) = &left {
                    let now = l.locate_hash(h);
                    if now != owner {
                        acc.leave_to[now] += 1;
                        acc.leave_unneeded += u64::from(owner < remaining);
                    }
                }
            }
        },
    );
    let wall = started.elapsed().as_secs_f64();
    let mut total = init;
    for a in accs {
        add_into(&mut total.keys, &a.keys);
        add_into(&mut total.join_from, &a.join_from);
        add_into(&mut total.leave_to, &a.leave_to);
        total.key_bytes += a.key_bytes;
        total.join_unneeded += a.join_unneeded;
        total.leave_unneeded += a.leave_unneeded;
    }

    let keys = args.keys;
    let weight_sum: f64 = base.nodes().iter().map(|s| f64::from(s.weight)).sum();
    let ratios: Vec<f64> = (0..n)
        .map(|i| total.keys[i] as f64 / (keys as f64 * f64::from(base.node(i).weight) / weight_sum))
        .collect();
    let mean_ratio = ratios.iter().sum::<f64>() / n as f64;
    let stddev = (ratios.iter().map(|r| (r - mean_ratio).powi(2)).sum::<f64>() / n as f64).sqrt();
    let max_ratio = ratios.iter().copied().fold(f64::MIN, f64::max);

    let avg_key_len = total.key_bytes as f64 / keys as f64;
    let projected_keys = args.project_keys.unwrap_or(keys);
    let bytes_per_key = args.value_size as f64 + avg_key_len + args.entry_overhead as f64;
    let cap = args.node_capacity as f64;
    let nodes: Vec<NodeRow> = (0..n)
        .map(|i| {
            let share = total.keys[i] as f64 / keys as f64;
            let projected = share * projected_keys as f64 * bytes_per_key;
            NodeRow {
                name: base.node(i).name.clone(),
                weight: base.node(i).weight,
                points: base.points_of(i),
                keys: total.keys[i],
                share,
                expected_share: f64::from(base.node(i).weight) / weight_sum,
                hash_space_share: base.share_of(i),
                projected_bytes: projected,
                headroom: (cap - projected) / cap,
            }
        })
        .collect();
    let total_bytes = projected_keys as f64 * bytes_per_key;
    let max_node_bytes = nodes.iter().map(|r| r.projected_bytes).fold(0.0, f64::max);
    let capacity = Capacity {
        projected_keys,
        value_size: args.value_size,
        avg_key_len,
        entry_overhead: args.entry_overhead,
        bytes_per_key,
        node_capacity: args.node_capacity,
        total_bytes,
        max_node_bytes,
        fits: max_node_bytes <= cap,
        min_headroom: nodes.iter().map(|r| r.headroom).fold(f64::MAX, f64::min),
        // Equal weights assumed: the fullest node holds max_ratio/N of the data.
        nodes_needed: (total_bytes * max_ratio / cap).ceil() as u64,
    };

    let join = joined.as_ref().map(|_| Movement {
        nodes_before: n,
        nodes_after: n + args.add,
        moved: total.join_from.iter().sum(),
        fraction: total.join_from.iter().sum::<u64>() as f64 / keys as f64,
        ideal: args.add as f64 / (n + args.add) as f64,
        per_node: total.join_from.clone(),
        unnecessary: total.join_unneeded,
    });
    let leave = left.as_ref().map(|_| Movement {
        nodes_before: n,
        nodes_after: remaining,
        moved: total.leave_to.iter().sum(),
        fraction: total.leave_to.iter().sum::<u64>() as f64 / keys as f64,
        ideal: args.remove as f64 / n as f64,
        per_node: total.leave_to.clone(),
        unnecessary: total.leave_unneeded,
    });
    let lookups_per_key = 1 + usize::from(joined.is_some()) + usize::from(left.is_some());
    let hot_key = match args.hot_key_share {
        Some(s) => Some(super::hot_key::measure(&base, &gen, s)?),
        None => None,
    };
    Ok(Report {
        keys,
        scheme: args.points.to_string(),
        vnodes: args.vnodes,
        key_kind: args.key_kind,
        seed: args.seed,
        threads,
        nodes,
        max_over_expected: max_ratio,
        min_over_expected: ratios.iter().copied().fold(f64::MAX, f64::min),
        stddev_ratio: stddev,
        capacity,
        join,
        leave,
        hot_key,
        perf: Perf {
            wall_secs: wall,
            keys_per_sec: keys as f64 / wall,
            lookups_per_sec: (keys as f64 * lookups_per_key as f64) / wall,
            lookup_ns: lookup_ns(&base),
            key_hash_ns: key_hash_ns(&base, &gen),
        },
    })
}

fn add_into(total: &mut [u64], part: &[u64]) {
    for (t, p) in total.iter_mut().zip(part) {
        *t += p;
    }
}

/// Nanoseconds per `locate_hash` over 2^14 precomputed pseudo-random hashes (best of 30 runs).
pub(crate) fn lookup_ns(ring: &Ring) -> f64 {
    let mask = match ring.config().scheme {
        crate::ring::PointScheme::Ketama => u64::from(u32::MAX),
        crate::ring::PointScheme::Vnode => u64::MAX,
    };
    let hashes: Vec<u64> = (0..1u64 << 14)
        .map(|i| super::keys::splitmix64(i) & mask)
        .collect();
    best_ns_per_op(hashes.len(), || {
        let mut acc = 0usize;
        for &h in &hashes {
            acc = acc.wrapping_add(ring.locate_hash(black_box(h)));
        }
        black_box(acc);
    })
}

/// Nanoseconds per key hash (tag + MD5) over 10 000 keys (best of 30 runs).
fn key_hash_ns(ring: &Ring, gen: &KeyGen) -> f64 {
    const N: u64 = 10_000;
    let mut buf = [0u8; MAX_KEY_LEN];
    best_ns_per_op(N as usize, || {
        let mut acc = 0u64;
        for i in 0..N {
            acc = acc.wrapping_add(ring.key_hash(black_box(gen.key(i, &mut buf))));
        }
        black_box(acc);
    })
}

/// Writes the report as tables.
pub(crate) fn write(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "Distribution: {} {} keys over {} nodes, ring {} ({} vnodes), {} threads",
        count(r.keys),
        format!("{:?}", r.key_kind).to_lowercase(),
        r.nodes.len(),
        r.scheme,
        r.vnodes,
        r.threads
    )?;
    let c = &r.capacity;
    let mut t = Table::new(&[
        "node",
        "weight",
        "points",
        "keys",
        "share",
        "expected",
        "hash space",
        "projected",
        "headroom",
    ]);
    for row in &r.nodes {
        t.row(vec![
            row.name.clone(),
            row.weight.to_string(),
            row.points.to_string(),
            count(row.keys),
            pct(row.share),
            pct(row.expected_share),
            pct(row.hash_space_share),
            bytes(row.projected_bytes),
            pct(row.headroom),
        ]);
    }
    t.write(out)?;
    writeln!(
        out,
        "  imbalance (keys / expected): max {:.4}  min {:.4}  std dev {:.4}",
        r.max_over_expected, r.min_over_expected, r.stddev_ratio
    )?;
    writeln!(
        out,
        "\nCapacity: {} keys × ({} value + {:.1} key + {} overhead assumed per entry) = {:.1} B/key, {} in total",
        count(c.projected_keys),
        c.value_size,
        c.avg_key_len,
        c.entry_overhead,
        c.bytes_per_key,
        bytes(c.total_bytes)
    )?;
    writeln!(
        out,
        "  fullest node {} of {} per node: {} (headroom {}); nodes of this size needed at this imbalance: ~{}",
        bytes(c.max_node_bytes),
        bytes(c.node_capacity as f64),
        if c.fits { "FITS" } else { "DOES NOT FIT" },
        pct(c.min_headroom),
        c.nodes_needed
    )?;
    for (label, m, per) in [
        ("Join", &r.join, "given away"),
        ("Leave", &r.leave, "received"),
    ] {
        let Some(m) = m else { continue };
        writeln!(
            out,
            "\n{label} {} → {} nodes: {} keys moved = {} (ideal {}), unnecessary moves {}",
            m.nodes_before,
            m.nodes_after,
            count(m.moved),
            pct(m.fraction),
            pct(m.ideal),
            m.unnecessary
        )?;
        let mut t = Table::new(&["node", per, "of moved"]);
        for (i, &k) in m.per_node.iter().enumerate() {
            t.row(vec![
                r.nodes[i].name.clone(),
                count(k),
                pct(k as f64 / m.moved.max(1) as f64),
            ]);
        }
        t.write(out)?;
        let spread = m.per_node.iter().filter(|&&k| k > 0).count();
        writeln!(out, "  spread over {spread} of {} nodes", m.per_node.len())?;
    }
    if let Some(h) = &r.hot_key {
        super::hot_key::write(h, out)?;
    }
    let p = &r.perf;
    writeln!(
        out,
        "\nSpeed: {} wall, {} keys/s, {} ring lookups/s over {} threads; one lookup {:.1} ns, one key hash {:.1} ns (single thread)",
        duration(p.wall_secs),
        si(p.keys_per_sec),
        si(p.lookups_per_sec),
        r.threads,
        p.lookup_ns,
        p.key_hash_ns
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_leave_move_only_what_they_must() {
        let args = SimArgs {
            keys: 100_000,
            add: 1,
            remove: 1,
            hot_key_share: Some(0.4),
            ..SimArgs::default()
        };
        let r = run(&args).unwrap();
        let (j, l) = (r.join.unwrap(), r.leave.unwrap());
        assert_eq!(j.unnecessary, 0);
        assert_eq!(l.unnecessary, 0);
        assert!(
            j.per_node.iter().all(|&k| k > 0),
            "join takes from every old node: {:?}",
            j.per_node
        );
        assert!(
            l.per_node.iter().all(|&k| k > 0),
            "leave gives to every remaining node: {:?}",
            l.per_node
        );
        assert_eq!(l.moved, r.nodes[9].keys);
        let h = r.hot_key.unwrap();
        assert!(h.by_vnodes.iter().all(|row| row.node_load >= 0.4));
    }

    #[test]
    fn one_terabyte_projection_is_arithmetic_on_shares() {
        let args = SimArgs {
            keys: 50_000,
            project_keys: Some(1_000_000_000),
            ..SimArgs::default()
        };
        let r = run(&args).unwrap();
        let c = &r.capacity;
        assert!(
            (6.0..11.0).contains(&c.avg_key_len),
            "user:<n> keys: {}",
            c.avg_key_len
        );
        let want_total = 1e9 * (1024.0 + c.avg_key_len + 64.0);
        assert!((c.total_bytes - want_total).abs() < 1.0);
        let sum: f64 = r.nodes.iter().map(|n| n.projected_bytes).sum();
        assert!((sum - want_total).abs() / want_total < 1e-9);
        // 10^9 × ~1.1 KB over 10 nodes is ~109 GB per node on average: not 100 GB.
        assert!(!c.fits);
    }
}
