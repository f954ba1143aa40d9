//! A demo run as Markdown tables, for `bench/report.sh` to embed in
//! `test_report.md`: headline figures, keys per node, join and leave, latency.
//! Only figures from the [`DemoReport`] it is given; no text about the machine
//! (the report script writes that).

use std::fmt::Write as _;

use super::report::{group, latency_cells, Change, DemoReport, Distribution};

fn distribution(out: &mut String, d: &Distribution) {
    let _ = writeln!(out, "| node | keys | share | ÷ average |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    let avg = d.total as f64 / d.nodes.len().max(1) as f64;
    for n in &d.nodes {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2}% | {:.3} |",
            n.name,
            group(n.keys),
            n.share * 100.0,
            n.keys as f64 / avg.max(1e-9)
        );
    }
    let _ = writeln!(out, "| **total** | **{}** | 100% | |", group(d.total));
    let _ = writeln!(
        out,
        "\nmax/avg **{:.3}**, min/avg **{:.3}**, standard deviation {:.2}% of the average.\n",
        d.max_over_avg, d.min_over_avg, d.stddev_pct
    );
}

fn change_row(out: &mut String, c: &Change) {
    let _ = writeln!(
        out,
        "| {} | {} ({:.2}%) | {:.2}% | {} | {} | {} | {:.1} | {} / {} missing | {} / {} missing |",
        c.change,
        group(c.moved_keys),
        c.moved_pct,
        c.ideal_pct,
        group(c.ring_rebuild_us),
        group(c.migration_ms),
        c.cutover_pause_ms,
        c.command_ms,
        group(c.reads_during.keys),
        c.reads_during.missing + c.reads_during.wrong,
        group(c.verify_after.keys),
        c.verify_after.missing + c.verify_after.wrong,
    );
}

/// The demo's figures as Markdown.
pub(crate) fn demo(r: &DemoReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} keys `user:1..user:{}` of {} B written through the proxy into {} {} nodes \
         (ring: {}) at **{} keys/s** ({} connections, pipelined MSET); read back: {} missing.\n",
        group(r.keys),
        r.keys,
        r.value_size,
        r.nodes,
        r.node_kind,
        r.ring,
        group(r.write.keys_per_sec.round() as u64),
        r.write.connections,
        r.verify_initial.missing + r.verify_initial.wrong
    );
    let _ = writeln!(out, "#### Keys per node (DBSIZE on each node)\n");
    distribution(&mut out, &r.distribution);

    let _ = writeln!(out, "#### Join and leave under reads\n");
    let _ = writeln!(
        out,
        "| change | keys moved | ideal | ring rebuild µs | migration ms | cutover pause ms | command ms | reads during the change | verify after |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for c in [&r.join, &r.leave].into_iter().flatten() {
        change_row(&mut out, c);
    }
    if let Some(l) = &r.leave {
        let _ = writeln!(
            out,
            "\n{} holds {} keys after leaving. Moved % = keys on the joining node after \
             the join, or on the leaving node before the leave, over all keys; ideal = one node's fair share (1 / 11 nodes).\n",
            l.node,
            l.removed_node_keys_after.unwrap_or(0)
        );
    }

    let _ = writeln!(out, "#### Latency through the proxy\n");
    let _ = writeln!(
        out,
        "| run | ops/s | p50 ms | p99 ms | p99.9 ms | max ms | errors |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for l in &r.latency {
        let _ = writeln!(out, "| {} |", latency_cells(l).join(" | "));
    }
    let _ = writeln!(
        out,
        "\n`at N rps`: open loop, {} connections, latency from each request's intended send \
         time; `max cC PP`: closed loop, C connections, P requests per batch. The load \
         generator runs in the demo process on the same cores as the proxy and the nodes.",
        r.latency
            .iter()
            .find(|l| l.target_rps.is_some())
            .map_or(0, |l| l.connections)
    );
    out
}
