//! `shardis sim --vnodes-sweep 1,10,…`: imbalance against the number of points
//! per node, for both point schemes, as a table and a hand-written SVG chart.
//!
//! One parallel pass: each key's MD5 gives both scheme hashes (ketama's is the
//! low 32 bits of vnode's), located on every swept ring.

use super::keys::{par_chunks, thread_count, want_progress, KeyGen, MAX_KEY_LEN};
use super::strategies::{node_specs, KeyHash};
use super::table::{count, Table};
use super::SimArgs;
use crate::ring::{PointScheme, Ring, RingConfig};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write;

/// The sweep.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub keys: u64,
    pub nodes: usize,
    pub rows: Vec<Row>,
}

/// Imbalance at one vnodes setting; `None` where the scheme cannot build it
/// (ketama needs ≥ 4 points per node).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub vnodes: u32,
    pub ketama: Option<Imbalance>,
    pub vnode: Option<Imbalance>,
}

/// Keys per node relative to the average.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Imbalance {
    pub max_over_avg: f64,
    pub min_over_avg: f64,
    pub stddev_over_avg: f64,
}

/// Runs the sweep over `args.vnodes_sweep`.
pub(crate) fn run(args: &SimArgs) -> Result<Report, String> {
    let n = args.nodes;
    let build =
        |scheme, vnodes| Ring::new(node_specs(n, &[]), RingConfig { scheme, vnodes }, 0).ok();
    let rings: Vec<(Option<Ring>, Option<Ring>)> = args
        .vnodes_sweep
        .iter()
        .map(|&v| (build(PointScheme::Ketama, v), build(PointScheme::Vnode, v)))
        .collect();
    if rings.iter().all(|(k, v)| k.is_none() && v.is_none()) {
        return Err("no vnodes value in the sweep builds a ring".into());
    }
    let gen = KeyGen::new(args.key_kind, args.seed);
    let progress = want_progress(args.progress).then_some("sweep");
    let slots = rings.len() * 2;
    let parts = par_chunks(
        args.keys,
        thread_count(args.threads),
        progress,
        || vec![0u64; slots * n],
        |acc, range| {
            let mut buf = [0u8; MAX_KEY_LEN];
            for i in range {
                let kh = KeyHash::new(gen.key(i, &mut buf));
                for (r, (k, v)) in rings.iter().enumerate() {
                    if let Some(k) = k {
                        acc[(2 * r) * n + k.locate_hash(u64::from(kh.h64 as u32))] += 1;
                    }
                    if let Some(v) = v {
                        acc[(2 * r + 1) * n + v.locate_hash(kh.h64)] += 1;
                    }
                }
            }
        },
    );
    let mut total = vec![0u64; slots * n];
    for p in parts {
        for (t, x) in total.iter_mut().zip(p) {
            *t += x;
        }
    }
    let stats = |slot: usize| imbalance(&total[slot * n..(slot + 1) * n], args.keys);
    let rows = args
        .vnodes_sweep
        .iter()
        .enumerate()
        .map(|(r, &vnodes)| Row {
            vnodes,
            ketama: rings[r].0.as_ref().map(|_| stats(2 * r)),
            vnode: rings[r].1.as_ref().map(|_| stats(2 * r + 1)),
        })
        .collect();
    Ok(Report {
        keys: args.keys,
        nodes: n,
        rows,
    })
}

fn imbalance(per_node: &[u64], keys: u64) -> Imbalance {
    let avg = keys as f64 / per_node.len() as f64;
    let var = per_node
        .iter()
        .map(|&k| (k as f64 - avg).powi(2))
        .sum::<f64>()
        / per_node.len() as f64;
    Imbalance {
        max_over_avg: *per_node.iter().max().unwrap_or(&0) as f64 / avg,
        min_over_avg: *per_node.iter().min().unwrap_or(&0) as f64 / avg,
        stddev_over_avg: var.sqrt() / avg,
    }
}

/// Writes the sweep table.
pub(crate) fn write(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "Vnodes sweep: {} keys over {} nodes (keys per node / average)",
        count(r.keys),
        r.nodes
    )?;
    let mut t = Table::new(&[
        "vnodes",
        "ketama max",
        "ketama min",
        "ketama std",
        "vnode max",
        "vnode min",
        "vnode std",
    ]);
    let cells = |i: Option<Imbalance>| match i {
        Some(i) => vec![
            format!("{:.4}", i.max_over_avg),
            format!("{:.4}", i.min_over_avg),
            format!("{:.4}", i.stddev_over_avg),
        ],
        None => vec!["n/a".into(), "n/a".into(), "n/a".into()],
    };
    for row in &r.rows {
        let mut cells_row = vec![row.vnodes.to_string()];
        cells_row.extend(cells(row.ketama));
        cells_row.extend(cells(row.vnode));
        t.row(cells_row);
    }
    t.write(out)?;
    writeln!(out, "  n/a: the scheme cannot build that ring (ketama makes points in groups of 4: vnodes ≥ 4; at most 10M points)")
}

/// A line chart of max/avg and min/avg against vnodes (log scale), both schemes.
pub(crate) fn svg(r: &Report) -> String {
    const W: f64 = 760.0;
    const H: f64 = 440.0;
    const L: f64 = 70.0;
    const R: f64 = 170.0;
    const T: f64 = 50.0;
    const B: f64 = 60.0;
    let xs: Vec<f64> = r
        .rows
        .iter()
        .map(|row| f64::from(row.vnodes.max(1)).log10())
        .collect();
    let (x0, x1) = (
        xs.iter().copied().fold(f64::MAX, f64::min),
        xs.iter().copied().fold(f64::MIN, f64::max),
    );
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let all = r
        .rows
        .iter()
        .flat_map(|row| [row.ketama, row.vnode])
        .flatten();
    let (mut y0, mut y1) = (1.0f64, 1.0f64);
    for i in all {
        y0 = y0.min(i.min_over_avg);
        y1 = y1.max(i.max_over_avg);
    }
    // Axis on a round step giving at most ~10 grid lines.
    let step = [0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0]
        .into_iter()
        .find(|s| (y1 - y0) / s <= 10.0)
        .unwrap_or(10.0);
    let (y0, y1) = ((y0 / step).floor() * step, (y1 / step).ceil() * step);
    let px = |x: f64| L + (x - x0) / (x1 - x0) * (W - L - R);
    let py = |y: f64| T + (y1 - y) / (y1 - y0).max(1e-9) * (H - T - B);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="15" text-anchor="middle">Keys per node / average vs vnodes ({} nodes, {} keys)</text>"#,
        (L + W - R) / 2.0,
        r.nodes,
        count(r.keys)
    );
    let mut y = y0;
    while y <= y1 + 1e-9 {
        let _ = writeln!(
            s,
            r##"<line x1="{L}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#ddd"/>"##,
            py(y),
            W - R
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{y:.2}</text>"#,
            L - 8.0,
            py(y) + 4.0
        );
        y += step;
    }
    for (row, &x) in r.rows.iter().zip(&xs) {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{T}" x2="{0:.1}" y2="{1}" stroke="#eee"/>"##,
            px(x),
            H - B
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            px(x),
            H - B + 18.0,
            row.vnodes
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{L}" y="{T}" width="{}" height="{}" fill="none" stroke="#333"/>"##,
        W - L - R,
        H - T - B
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">vnodes per node (log scale)</text>"#,
        (L + W - R) / 2.0,
        H - 18.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" transform="rotate(-90 18 {0})" text-anchor="middle">keys / average</text>"#,
        (T + H - B) / 2.0
    );

    type Pick = fn(&Row) -> Option<f64>;
    let series: [(&str, &str, &str, Pick); 4] = [
        ("ketama max", "#d62728", "", |row| {
            row.ketama.map(|i| i.max_over_avg)
        }),
        ("ketama min", "#d62728", "6 4", |row| {
            row.ketama.map(|i| i.min_over_avg)
        }),
        ("vnode max", "#1f77b4", "", |row| {
            row.vnode.map(|i| i.max_over_avg)
        }),
        ("vnode min", "#1f77b4", "6 4", |row| {
            row.vnode.map(|i| i.min_over_avg)
        }),
    ];
    for (k, (label, color, dash, pick)) in series.iter().enumerate() {
        let pts: Vec<String> = r
            .rows
            .iter()
            .zip(&xs)
            .filter_map(|(row, &x)| pick(row).map(|y| format!("{:.1},{:.1}", px(x), py(y))))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
            pts.join(" ")
        );
        for p in &pts {
            let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(s, r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>"#);
        }
        let ly = T + 10.0 + 22.0 * k as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{0}" y1="{ly}" x2="{1}" y2="{ly}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{2}" y="{3}">{label}</text>"#,
            W - R + 15.0,
            W - R + 45.0,
            W - R + 52.0,
            ly + 4.0
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_vnodes_means_less_imbalance() {
        let args = SimArgs {
            keys: 100_000,
            vnodes_sweep: vec![1, 10, 160, 1000],
            ..SimArgs::default()
        };
        let r = run(&args).unwrap();
        assert!(
            r.rows[0].ketama.is_none(),
            "ketama cannot build 1 point per node"
        );
        let v: Vec<f64> = r
            .rows
            .iter()
            .map(|row| row.vnode.unwrap().max_over_avg)
            .collect();
        assert!(v[0] > v[2] && v[1] > v[3], "{v:?}");
        let chart = svg(&r);
        assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"));
        assert_eq!(chart.matches("<polyline").count(), 4);
    }
}
