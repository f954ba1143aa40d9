//! What the demo measured, as data (serialised to `--json`) and as text for a
//! terminal: the keys-per-node table with a bar chart in Unicode blocks, the
//! join/leave figures, the latency table and the closing summary.
//!
//! Pure formatting over plain structs; the scenario in `mod.rs` fills them.

use std::fmt::Write as _;

use serde::Serialize;

use super::keys::{ReadStats, WriteStats};
use super::latency::LatencyRun;

/// Widest bar in the chart, in terminal cells.
const BAR_CELLS: usize = 40;

/// Keys on one node, counted with DBSIZE on the node itself.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct NodeKeys {
    pub name: String,
    pub addr: String,
    pub keys: u64,
    /// Fraction of all keys, 0..1.
    pub share: f64,
}

/// Keys per node across the ring.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Distribution {
    pub nodes: Vec<NodeKeys>,
    pub total: u64,
    pub max_over_avg: f64,
    pub min_over_avg: f64,
    /// Standard deviation of keys per node, in % of the average.
    pub stddev_pct: f64,
}

impl Distribution {
    /// Builds shares and imbalance from `(name, addr, keys)`.
    pub(crate) fn new(counts: Vec<(String, String, u64)>) -> Distribution {
        let total: u64 = counts.iter().map(|c| c.2).sum();
        let n = counts.len().max(1) as f64;
        let avg = total as f64 / n;
        let max = counts.iter().map(|c| c.2).max().unwrap_or(0) as f64;
        let min = counts.iter().map(|c| c.2).min().unwrap_or(0) as f64;
        let var = counts
            .iter()
            .map(|c| (c.2 as f64 - avg).powi(2))
            .sum::<f64>()
            / n;
        let ratio = |x: f64| if avg > 0.0 { x / avg } else { 0.0 };
        Distribution {
            nodes: counts
                .into_iter()
                .map(|(name, addr, keys)| NodeKeys {
                    name,
                    addr,
                    keys,
                    share: if total > 0 {
                        keys as f64 / total as f64
                    } else {
                        0.0
                    },
                })
                .collect(),
            total,
            max_over_avg: ratio(max),
            min_over_avg: ratio(min),
            stddev_pct: ratio(var.sqrt()) * 100.0,
        }
    }

    /// Keys of the node called `name` (0 when absent).
    pub(crate) fn keys_of(&self, name: &str) -> u64 {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .map_or(0, |n| n.keys)
    }
}

/// A topology change and what clients saw during and after it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Change {
    /// `add node11` / `remove node3`.
    pub change: String,
    pub node: String,
    /// How long CLUSTER ADDNODE / REMOVENODE took to answer +OK.
    pub command_ms: f64,
    /// From CLUSTER RINGINFO.
    pub ring_rebuild_us: u64,
    pub migration_ms: u64,
    pub cutover_pause_ms: u64,
    pub keys_copied: u64,
    pub proxy_moved_fraction: f64,
    /// Keys that changed node (the joining node's keys, or the leaving node's).
    pub moved_keys: u64,
    pub moved_pct: f64,
    /// 1 / (nodes after a join, or nodes before a leave), in %.
    pub ideal_pct: f64,
    /// CLUSTER RINGINFO states seen while waiting for `ok`.
    pub states_seen: Vec<String>,
    /// Time from the command to `state:ok`, as seen by polling.
    pub wait_ms: f64,
    pub reads_during: ReadStats,
    pub verify_after: ReadStats,
    /// Keys still on the removed node afterwards (leave only).
    pub removed_node_keys_after: Option<u64>,
    pub distribution_after: Distribution,
}

/// Everything `shardis demo` measured.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct DemoReport {
    pub nodes: usize,
    pub node_kind: String,
    pub keys: u64,
    pub value_size: usize,
    pub ring: String,
    pub write: WriteStats,
    pub verify_initial: ReadStats,
    pub distribution: Distribution,
    pub join: Option<Change>,
    pub leave: Option<Change>,
    pub latency: Vec<LatencyRun>,
    pub total_secs: f64,
}

/// 1234567 → `1 234 567`.
pub(crate) fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// A horizontal bar of `frac` × [`BAR_CELLS`] cells, in eighths of a cell.
pub(crate) fn bar(frac: f64) -> String {
    const EIGHTHS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = (frac.clamp(0.0, 1.0) * (BAR_CELLS * 8) as f64).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    if !eighths.is_multiple_of(8) {
        s.push(EIGHTHS[eighths % 8]);
    }
    s
}

/// The keys-per-node table with one bar per node, scaled to the fullest node.
pub(crate) fn distribution_table(d: &Distribution) -> String {
    let mut out = String::new();
    let max = d.nodes.iter().map(|n| n.keys).max().unwrap_or(0).max(1);
    let avg = d.total as f64 / d.nodes.len().max(1) as f64;
    let _ = writeln!(
        out,
        "  {:<8} {:<16} {:>10} {:>7} {:>6}  keys per node",
        "node", "address", "keys", "share", "÷avg"
    );
    for n in &d.nodes {
        let _ = writeln!(
            out,
            "  {:<8} {:<16} {:>10} {:>6.2}% {:>6.3}  {}",
            n.name,
            n.addr,
            group(n.keys),
            n.share * 100.0,
            if avg > 0.0 { n.keys as f64 / avg } else { 0.0 },
            bar(n.keys as f64 / max as f64)
        );
    }
    let _ = writeln!(
        out,
        "  {:<8} {:<16} {:>10} {:>6.2}%",
        "total",
        "",
        group(d.total),
        100.0
    );
    let _ = writeln!(
        out,
        "  imbalance: max/avg {:.3}, min/avg {:.3}, stddev {:.2}% of the average ({} nodes)",
        d.max_over_avg,
        d.min_over_avg,
        d.stddev_pct,
        d.nodes.len()
    );
    out
}

/// `N keys read, M found, 0 missing, 0 wrong, 0 errors`.
pub(crate) fn read_line(r: &ReadStats) -> String {
    format!(
        "{} keys read, {} found, {} missing, {} wrong, {} errors",
        group(r.keys),
        group(r.found),
        group(r.missing),
        group(r.wrong),
        group(r.errors)
    )
}

/// The figures of one join or leave.
pub(crate) fn change_text(c: &Change) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  CLUSTER {} answered +OK in {:.1} ms; state ok after {:.0} ms (states seen: {})",
        if c.change.starts_with("add") {
            "ADDNODE"
        } else {
            "REMOVENODE"
        },
        c.command_ms,
        c.wait_ms,
        c.states_seen.join(" → ")
    );
    let _ = writeln!(
        out,
        "  moved: {} keys = {:.2}% of all keys (ideal {:.2}%; proxy copied {})",
        group(c.moved_keys),
        c.moved_pct,
        c.ideal_pct,
        group(c.keys_copied)
    );
    let _ = writeln!(
        out,
        "  ring rebuild {} µs, migration {} ms, cutover pause {} ms",
        group(c.ring_rebuild_us),
        group(c.migration_ms),
        c.cutover_pause_ms
    );
    let _ = writeln!(
        out,
        "  reads during the change: {}",
        read_line(&c.reads_during)
    );
    let _ = writeln!(out, "  verify after: {}", read_line(&c.verify_after));
    if let Some(k) = c.removed_node_keys_after {
        let _ = writeln!(out, "  {} holds {} keys now", c.node, group(k));
    }
    out
}

/// Microseconds as milliseconds with three decimals.
fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// A latency run's row: label, ops/s, p50, p99, p99.9 and max in ms, errors.
pub(crate) fn latency_cells(r: &LatencyRun) -> [String; 7] {
    [
        r.label(),
        group(r.ops_per_sec.round() as u64),
        ms(r.p50_us),
        ms(r.p99_us),
        ms(r.p999_us),
        ms(r.max_us),
        r.errors.to_string(),
    ]
}

/// The latency table: one row per run.
pub(crate) fn latency_table(runs: &[LatencyRun]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<22} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "run", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "errors"
    );
    for r in runs {
        let [label, ops, p50, p99, p999, max, errors] = latency_cells(r);
        let _ = writeln!(
            out,
            "  {label:<22} {ops:>10} {p50:>9} {p99:>9} {p999:>9} {max:>9} {errors:>7}"
        );
    }
    out
}

/// The closing summary: one line per figure, labels in one column.
pub(crate) fn summary(r: &DemoReport) -> String {
    let mut rows: Vec<(String, String)> = vec![
        (
            "data".into(),
            format!(
                "{} keys × {} B on {} {} nodes, written at {} keys/s",
                group(r.keys),
                r.value_size,
                r.nodes,
                r.node_kind,
                group(r.write.keys_per_sec.round() as u64)
            ),
        ),
        (
            "imbalance".into(),
            format!(
                "max/avg {:.3}, min/avg {:.3} (ring: {})",
                r.distribution.max_over_avg, r.distribution.min_over_avg, r.ring
            ),
        ),
    ];
    for c in [&r.join, &r.leave].into_iter().flatten() {
        let missing = c.reads_during.missing + c.verify_after.missing;
        rows.push((
            c.change.clone(),
            format!(
                "moved {:.2}% (ideal {:.2}%), rebuild {} µs, migration {} ms, pause {} ms; {} missing",
                c.moved_pct,
                c.ideal_pct,
                group(c.ring_rebuild_us),
                group(c.migration_ms),
                c.cutover_pause_ms,
                missing
            ),
        ));
    }
    for l in &r.latency {
        rows.push((
            l.label(),
            format!(
                "p50 {} ms, p99 {} ms, p99.9 {} ms, {} ops/s",
                ms(l.p50_us),
                ms(l.p99_us),
                ms(l.p999_us),
                group(l.ops_per_sec.round() as u64)
            ),
        ));
    }
    rows.push(("total time".into(), format!("{:.1} s", r.total_secs)));
    let width = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (label, text) in rows {
        let _ = writeln!(out, "  {label:<width$}  {text}");
    }
    out
}

/// Where the nodes listen, briefly: `127.0.0.1:7001..7010` when the ports
/// run consecutively, else every port (free ports are picked one by one, so
/// the first and the last say nothing of the others).
pub(crate) fn addr_span(addrs: &[&str]) -> String {
    let split: Vec<Option<(&str, u16)>> = addrs
        .iter()
        .map(|a| {
            a.rsplit_once(':')
                .and_then(|(h, p)| Some((h, p.parse().ok()?)))
        })
        .collect();
    let Some(Some((host, first))) = split.first().copied() else {
        return addrs.join(", ");
    };
    let same_host = split.iter().all(|s| s.is_some_and(|(h, _)| h == host));
    let consecutive = split
        .iter()
        .enumerate()
        .all(|(i, s)| s.is_some_and(|(_, p)| p as usize == first as usize + i));
    match (same_host, consecutive) {
        (true, true) if addrs.len() > 1 => {
            format!("{host}:{first}..{}", first as usize + addrs.len() - 1)
        }
        (true, _) => {
            let ports: Vec<String> = split.iter().map(|s| s.unwrap().1.to_string()).collect();
            format!("{host} ports {}", ports.join(", "))
        }
        _ => addrs.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_of_addresses_is_a_range_only_when_the_ports_are_consecutive() {
        let range = ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"];
        assert_eq!(addr_span(&range), "127.0.0.1:7001..7003");
        let scattered = ["127.0.0.1:39035", "127.0.0.1:41000", "127.0.0.1:37893"];
        assert_eq!(addr_span(&scattered), "127.0.0.1 ports 39035, 41000, 37893");
        assert_eq!(addr_span(&["127.0.0.1:7001"]), "127.0.0.1 ports 7001");
        assert_eq!(addr_span(&["a:1", "b:2"]), "a:1, b:2");
    }

    #[test]
    fn groups_digits_by_three() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1 000");
        assert_eq!(group(1234567), "1 234 567");
    }

    #[test]
    fn bars_use_eighth_blocks() {
        assert_eq!(bar(1.0).chars().count(), BAR_CELLS);
        assert_eq!(bar(0.0), "");
        assert_eq!(bar(1.0 / (BAR_CELLS * 2) as f64), "▌");
    }

    #[test]
    fn distribution_reports_imbalance() {
        let d = Distribution::new(vec![
            ("a".into(), "x".into(), 90),
            ("b".into(), "y".into(), 110),
        ]);
        assert_eq!(d.total, 200);
        assert!((d.max_over_avg - 1.1).abs() < 1e-9);
        assert!((d.min_over_avg - 0.9).abs() < 1e-9);
        assert!((d.stddev_pct - 10.0).abs() < 1e-9);
        let t = distribution_table(&d);
        assert!(
            t.contains("keys per node") && t.contains("max/avg 1.100"),
            "{t}"
        );
    }
}
