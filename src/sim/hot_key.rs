//! Hot keys: what one key taking a fixed share of all requests does to its
//! node, and why more vnodes cannot help.
//!
//! Part of the distribution report (`shardis sim --hot-key-share 0.4`). Loads
//! come from the rings' hash-space shares, so larger vnode settings cost no
//! extra pass over the keys.

use super::keys::{KeyGen, MAX_KEY_LEN};
use super::table::{pct, Table};
use crate::ring::{Ring, RingConfig, MAX_POINTS};
use serde::Serialize;
use std::io::Write;

/// Load when one key takes a fixed share of all requests.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HotKey {
    pub share: f64,
    pub key: String,
    /// Per vnodes setting: (vnodes, hot node, hot node's load, max/avg load).
    pub by_vnodes: Vec<HotRow>,
}

/// Hot-key load under one vnodes setting (from hash-space shares).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HotRow {
    pub vnodes: u32,
    pub node: String,
    pub node_load: f64,
    pub max_over_avg_load: f64,
    pub max_over_avg_without_hot_key: f64,
}

/// Hot-key load for the given vnodes and two larger settings, from hash-space
/// shares (no extra pass): more points even out the cold keys but cannot split
/// one key.
pub(crate) fn measure(base: &Ring, gen: &KeyGen, share: f64) -> Result<HotKey, String> {
    let mut buf = [0u8; MAX_KEY_LEN];
    let key = gen.key(0, &mut buf).to_vec();
    let c = base.config();
    let mut by_vnodes = Vec::new();
    for vnodes in [
        c.vnodes,
        c.vnodes.saturating_mul(10),
        c.vnodes.saturating_mul(100),
    ] {
        let points = u64::from(vnodes)
            * base
                .nodes()
                .iter()
                .map(|s| u64::from(s.weight))
                .sum::<u64>();
        if points > MAX_POINTS / 2 && vnodes != c.vnodes {
            continue;
        }
        let ring = Ring::new(base.nodes().to_vec(), RingConfig { vnodes, ..c }, 0)
            .map_err(|e| e.to_string())?;
        let hot = ring.locate(&key);
        let n = ring.nodes().len() as f64;
        let load = |i: usize| (1.0 - share) * ring.share_of(i) + if i == hot { share } else { 0.0 };
        let max_load = (0..ring.nodes().len()).map(load).fold(0.0, f64::max);
        let max_cold = (0..ring.nodes().len())
            .map(|i| ring.share_of(i))
            .fold(0.0, f64::max);
        by_vnodes.push(HotRow {
            vnodes,
            node: ring.node(hot).name.clone(),
            node_load: load(hot),
            max_over_avg_load: max_load * n,
            max_over_avg_without_hot_key: max_cold * n,
        });
    }
    Ok(HotKey {
        share,
        key: String::from_utf8_lossy(&key).into_owned(),
        by_vnodes,
    })
}

/// Writes the hot-key table.
pub(crate) fn write(h: &HotKey, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "\nHot key '{}' takes {} of requests (loads from hash-space shares):",
        h.key,
        pct(h.share)
    )?;
    let mut t = Table::new(&[
        "vnodes",
        "hot key's node",
        "its load",
        "max/avg load",
        "max/avg without it",
    ]);
    for row in &h.by_vnodes {
        t.row(vec![
            row.vnodes.to_string(),
            row.node.clone(),
            pct(row.node_load),
            format!("{:.3}", row.max_over_avg_load),
            format!("{:.3}", row.max_over_avg_without_hot_key),
        ]);
    }
    t.write(out)?;
    writeln!(
        out,
        "  more vnodes even out the other keys; the hot key's node stays above {}",
        pct(h.share)
    )?;
    Ok(())
}
