//! Point generation: how many points each node gets and where they fall, for
//! both schemes.
//!
//! Called only by [`super::Ring::new`]. The ketama arithmetic copies
//! twemproxy's `ketama_update` (`src/hashkit/nc_ketama.c`) down to its `float`
//! rounding, because a one-point difference moves keys and breaks placement
//! compatibility with a twemproxy pool over the same servers.

use super::hash::{le_u32, md5, md5_u64};
use super::{NodeSpec, PointScheme, RingConfig, RingError, MAX_POINTS};
use std::io::Write;

/// Points per MD5 digest in ketama: four little-endian u32s.
const KETAMA_POINTS_PER_HASH: u32 = 4;

/// The points of a ring and what follows from them, before the lookup index.
pub(super) struct Built {
    /// Sorted point positions.
    pub(super) points: Vec<u64>,
    /// `owners[i]` is the node index of `points[i]`.
    pub(super) owners: Vec<u32>,
    /// Points per node.
    pub(super) counts: Vec<usize>,
    /// Fraction of the hash space each node owns.
    pub(super) shares: Vec<f64>,
}

/// Generates, sorts and measures every node's points.
///
/// Equal point values (MD5 collisions of labels; twemproxy leaves their
/// order to `qsort`) are ordered by node name, then label index, so the
/// placement never depends on the order of the node list: the node with
/// the smaller name wins the tie.
///
/// A node whose weight earns it no point is an error unless `allow_pointless`
/// (twemproxy keeps such a server and never sends it a key).
pub(super) fn build(
    nodes: &[NodeSpec],
    config: RingConfig,
    allow_pointless: bool,
) -> Result<Built, RingError> {
    let mut counts = Vec::with_capacity(nodes.len());
    let mut total = 0u64;
    for idx in 0..nodes.len() {
        let n = count(nodes, idx, config);
        if n == 0 && !allow_pointless {
            return Err(RingError::NoPoints(nodes[idx].name.clone()));
        }
        total = total.saturating_add(n);
        if total > MAX_POINTS {
            return Err(RingError::TooManyPoints);
        }
        counts.push(n);
    }

    // Generated in node order, label order within a node: a stable sort
    // by (value, name rank) then keeps label order inside a tie.
    let mut pairs = Vec::with_capacity(total as usize);
    for (idx, node) in nodes.iter().enumerate() {
        generate(node, idx as u32, counts[idx], config.scheme, &mut pairs);
    }
    let rank = name_ranks(nodes);
    pairs.sort_by_key(|&(value, idx)| (value, rank[idx as usize]));

    let space = match config.scheme {
        PointScheme::Ketama => 2f64.powi(32),
        PointScheme::Vnode => 2f64.powi(64),
    };
    let mut shares = vec![0f64; nodes.len()];
    let last = pairs.last().map_or(0, |p| p.0);
    let mut prev: Option<u64> = None;
    for &(value, idx) in &pairs {
        // Point `value` owns (prev, value]; the first one also owns the wrap (last, end).
        let arc = match prev {
            Some(p) => (value - p) as f64,
            None => space - last as f64 + value as f64,
        };
        shares[idx as usize] += arc / space;
        prev = Some(value);
    }

    Ok(Built {
        points: pairs.iter().map(|p| p.0).collect(),
        owners: pairs.iter().map(|p| p.1).collect(),
        counts: counts.iter().map(|&c| c as usize).collect(),
        shares,
    })
}

/// `rank[i]` = position of node `i`'s name in sorted name order.
fn name_ranks(nodes: &[NodeSpec]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| nodes[a].name.cmp(&nodes[b].name));
    let mut rank = vec![0u32; nodes.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r as u32;
    }
    rank
}

/// Number of points node `idx` gets under `config`, before any are generated.
pub(super) fn count(nodes: &[NodeSpec], idx: usize, config: RingConfig) -> u64 {
    match config.scheme {
        PointScheme::Ketama => ketama_count(nodes, idx, config.vnodes),
        PointScheme::Vnode => u64::from(config.vnodes) * u64::from(nodes[idx].weight),
    }
}

/// twemproxy: `floorf((float)(pct * 160 / 4 * (float)nlive + 0.0000000001)) * 4`
/// with `pct = (float)weight / (float)total_weight`. Every step is `f32` except
/// the `+ 1e-10`, which C performs in `double` (the literal is a double) before
/// the result is narrowed back to `float` for `floorf`.
fn ketama_count(nodes: &[NodeSpec], idx: usize, vnodes: u32) -> u64 {
    let total: u64 = nodes.iter().map(|n| u64::from(n.weight)).sum();
    let pct = nodes[idx].weight as f32 / total as f32;
    let per_hash = KETAMA_POINTS_PER_HASH as f32;
    let scaled = pct * vnodes as f32 / per_hash * nodes.len() as f32;
    let floored = ((f64::from(scaled) + 0.0000000001) as f32).floor();
    floored as u64 * u64::from(KETAMA_POINTS_PER_HASH)
}

/// Appends node `idx`'s points to `out` as `(point, idx)`.
///
/// Labels are formatted into one reused buffer: a ring of 10 million points
/// would otherwise make 10 million small allocations.
pub(super) fn generate(
    node: &NodeSpec,
    idx: u32,
    n: u64,
    scheme: PointScheme,
    out: &mut Vec<(u64, u32)>,
) {
    let mut label = Vec::with_capacity(node.name.len() + 12);
    match scheme {
        PointScheme::Ketama => {
            for i in 0..n / u64::from(KETAMA_POINTS_PER_HASH) {
                label.clear();
                // Writing to a Vec cannot fail.
                let _ = write!(label, "{}-{}", node.name, i);
                let digest = md5(&label);
                for group in 0..KETAMA_POINTS_PER_HASH as usize {
                    out.push((u64::from(le_u32(&digest, group)), idx));
                }
            }
        }
        PointScheme::Vnode => {
            for i in 0..n {
                label.clear();
                let _ = write!(label, "{}:{}", node.name, i);
                out.push((md5_u64(&label), idx));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(weights: &[u32]) -> Vec<NodeSpec> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| NodeSpec {
                name: format!("n{i}"),
                addr: format!("127.0.0.1:{}", 7001 + i),
                weight,
            })
            .collect()
    }

    #[test]
    fn ketama_counts_follow_twemproxy_formula() {
        // (weights, vnodes, expected points per node)
        let cases: &[(&[u32], u32, &[u64])] = &[
            (&[1; 10], 160, &[160; 10]),
            (&[1, 1, 2], 160, &[120, 120, 240]),
            (&[1, 2], 160, &[104, 212]),
            (&[3, 3, 3], 160, &[160, 160, 160]),
            (&[1], 160, &[160]),
            (&[1, 1], 40, &[40, 40]),
            (&[1, 1, 1], 10, &[8, 8, 8]),
        ];
        for (weights, vnodes, want) in cases {
            let ns = nodes(weights);
            let got: Vec<u64> = (0..ns.len())
                .map(|i| ketama_count(&ns, i, *vnodes))
                .collect();
            assert_eq!(&got, want, "weights {weights:?} vnodes {vnodes}");
        }
    }

    #[test]
    fn vnode_counts_scale_with_weight() {
        let ns = nodes(&[1, 3]);
        let config = RingConfig {
            scheme: PointScheme::Vnode,
            vnodes: 100,
        };
        assert_eq!(count(&ns, 0, config), 100);
        assert_eq!(count(&ns, 1, config), 300);
    }
}
