//! Hand-written SVG charts of a demo run, for the report: keys per node
//! (before, after the join, after the leave) and latency percentiles per run.
//!
//! Plain strings, no plotting library: the charts are simple enough that a few
//! rectangles, lines and labels say it all, and the output stays diffable.

use std::fmt::Write as _;

use super::report::{DemoReport, Distribution};

const W: f64 = 860.0;
const H: f64 = 420.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;
const COLORS: [&str; 3] = ["#4e79a7", "#f28e2b", "#59a14f"];

/// A horizontal grid line across the plot at height `y`, labelled on the left.
fn gridline(out: &mut String, y: f64, label: &str) {
    let _ = writeln!(
        out,
        "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
         <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>",
        W - RIGHT,
        LEFT - 6.0,
        y + 4.0,
    );
}

fn open(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" \
         font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        W / 2.0,
        esc(title)
    );
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn legend(out: &mut String, names: &[String]) {
    let mut x = LEFT;
    for (i, name) in names.iter().enumerate() {
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"32\" width=\"10\" height=\"10\" fill=\"{}\"/>\
             <text x=\"{}\" y=\"41\">{}</text>",
            COLORS[i % COLORS.len()],
            x + 14.0,
            esc(name)
        );
        x += 24.0 + 7.0 * name.len() as f64;
    }
}

/// A tick step of 1, 2 or 5 × 10^k giving about five ticks up to `max`.
fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// Grouped vertical bars of keys per node, one colour per snapshot, with a
/// dashed line at the average of the first snapshot.
pub(crate) fn keys_per_node(r: &DemoReport) -> String {
    let mut snaps: Vec<(String, &Distribution)> =
        vec![(format!("{} nodes", r.nodes), &r.distribution)];
    if let Some(j) = &r.join {
        snaps.push((format!("after {}", j.change), &j.distribution_after));
    }
    if let Some(l) = &r.leave {
        snaps.push((format!("after {}", l.change), &l.distribution_after));
    }
    // Every node that appears in any snapshot, in start order.
    let mut names: Vec<&str> = Vec::new();
    for (_, d) in &snaps {
        for n in &d.nodes {
            if !names.contains(&n.name.as_str()) {
                names.push(&n.name);
            }
        }
    }
    let max = snaps
        .iter()
        .flat_map(|(_, d)| d.nodes.iter().map(|n| n.keys))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let step = nice_step(max);
    let top = (max / step).ceil() * step;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let y = |v: f64| TOP + ph - v / top * ph;
    let mut out = String::new();
    open(
        &mut out,
        &format!(
            "Keys per node ({} keys, DBSIZE on each node)",
            super::report::group(r.keys)
        ),
    );
    legend(
        &mut out,
        &snaps.iter().map(|s| s.0.clone()).collect::<Vec<_>>(),
    );
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        gridline(&mut out, y(v), &super::report::group(v as u64));
        v += step;
    }
    let group_w = pw / names.len().max(1) as f64;
    let bar_w = group_w * 0.8 / snaps.len() as f64;
    for (i, name) in names.iter().enumerate() {
        let gx = LEFT + i as f64 * group_w + group_w * 0.1;
        for (s, (_, d)) in snaps.iter().enumerate() {
            let Some(n) = d.nodes.iter().find(|n| n.name == *name) else {
                continue;
            };
            let x = gx + s as f64 * bar_w;
            let _ = writeln!(
                out,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\">\
                 <title>{name}: {} keys ({:.2}%)</title></rect>",
                y(n.keys as f64),
                bar_w - 1.0,
                ph - (y(n.keys as f64) - TOP),
                COLORS[s % COLORS.len()],
                n.keys,
                n.share * 100.0
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            gx + group_w * 0.4,
            TOP + ph + 16.0,
            esc(name)
        );
    }
    let avg = r.distribution.total as f64 / r.distribution.nodes.len().max(1) as f64;
    let _ = writeln!(
        out,
        "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{ya:.1}\" y2=\"{ya:.1}\" stroke=\"#333\" stroke-dasharray=\"5,4\"/>\
         <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#333\">average of {} nodes</text>",
        W - RIGHT,
        W - RIGHT,
        y(avg) - 4.0,
        r.distribution.nodes.len(),
        ya = y(avg)
    );
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">max/avg {:.3}, min/avg {:.3} with {} nodes</text>",
        W / 2.0,
        H - 20.0,
        r.distribution.max_over_avg,
        r.distribution.min_over_avg,
        r.distribution.nodes.len()
    );
    out.push_str("</svg>\n");
    out
}

/// Grouped bars of p50 / p99 / p99.9 per latency run, on a log scale in ms.
pub(crate) fn latency(r: &DemoReport) -> String {
    let mut out = String::new();
    open(
        &mut out,
        "Latency through the proxy (ms, log scale; open loop from intended send time)",
    );
    legend(&mut out, &["p50".into(), "p99".into(), "p99.9".into()]);
    let vals: Vec<[f64; 3]> = r
        .latency
        .iter()
        .map(|l| [l.p50_us, l.p99_us, l.p999_us].map(|us| (us as f64 / 1000.0).max(0.001)))
        .collect();
    let hi = vals
        .iter()
        .flatten()
        .fold(0.01f64, |a, &b| a.max(b))
        .log10()
        .ceil();
    let lo = vals
        .iter()
        .flatten()
        .fold(1e9f64, |a, &b| a.min(b))
        .log10()
        .floor()
        .min(hi - 1.0);
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let y = |ms: f64| TOP + ph - (ms.log10() - lo) / (hi - lo) * ph;
    let mut e = lo;
    while e <= hi {
        let v = 10f64.powf(e);
        let label = if v < 1.0 {
            format!("{v} ms")
        } else {
            format!("{v:.0} ms")
        };
        gridline(&mut out, y(v), &label);
        e += 1.0;
    }
    let group_w = pw / r.latency.len().max(1) as f64;
    let bar_w = group_w * 0.8 / 3.0;
    for (i, (l, v)) in r.latency.iter().zip(&vals).enumerate() {
        let gx = LEFT + i as f64 * group_w + group_w * 0.1;
        for (k, ms) in v.iter().enumerate() {
            let _ = writeln!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\">\
                 <title>{} {}: {ms} ms</title></rect>",
                gx + k as f64 * bar_w,
                y(*ms),
                bar_w - 1.0,
                (TOP + ph - y(*ms)).max(0.0),
                COLORS[k],
                esc(&l.label()),
                ["p50", "p99", "p99.9"][k]
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
             <text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">{} ops/s</text>",
            TOP + ph + 16.0,
            esc(&l.label()),
            TOP + ph + 32.0,
            super::report::group(l.ops_per_sec.round() as u64),
            cx = gx + group_w * 0.4
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_steps_are_round() {
        for (max, want) in [(100_000.0, 20_000.0), (9.0, 2.0), (1.0, 0.2)] {
            assert!((nice_step(max) - want).abs() < want * 1e-9, "{max}");
        }
    }
}
