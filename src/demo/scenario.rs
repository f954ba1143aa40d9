//! The demo's steps in order, each printing its part of the report as soon as
//! it is done: start, write, distribution, join, leave, latency, summary.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cluster::DemoCluster;
use super::conn::{self, Conn};
use super::keys::{self, ReadStats};
use super::latency::{self, LatencyRun, Op, Workload};
use super::progress::Progress;
use super::report::{self, Change, DemoReport, Distribution};
use super::DemoArgs;
use crate::procs::NodeKind;

/// Longest wait for a topology change to reach `state:ok`.
const CHANGE_TIMEOUT_S: u64 = 600;
/// CLUSTER RINGINFO polling interval while a change runs.
const POLL_MS: u64 = 20;
/// Readers running during a change.
const READERS: usize = 2;
/// Connections of the open-loop latency runs (the rate is split over them).
const OPEN_LOOP_CONNS: usize = 2;
/// Connections of the closed-loop latency runs.
const CLOSED_LOOP_CONNS: usize = 8;
/// Requests per batch of the pipelined closed-loop runs.
const CLOSED_LOOP_PIPELINE: usize = 16;
/// Bound on the requests of one closed-loop run.
const CLOSED_LOOP_MAX_REQUESTS: u64 = 50_000_000;

fn heading(title: &str) {
    println!("\n== {title} ==");
}

/// Runs every step; the report is complete even when a check failed, so
/// [`verdict`] decides the exit status after `--json` is written.
pub(crate) async fn run(args: &DemoArgs) -> Result<DemoReport, String> {
    let t0 = Instant::now();
    heading("cluster");
    let mut cluster = DemoCluster::start_nodes(NodeKind::Builtin, args.nodes)?;
    cluster.start_proxy()?;
    let proxy = cluster.proxy_addr.clone();
    let info = conn::text(&conn::call(&proxy, &["CLUSTER", "RINGINFO"]).await?);
    let ring = format!(
        "{}, {} points",
        conn::field(&info, "scheme").unwrap_or("?"),
        conn::field(&info, "points").unwrap_or("?")
    );
    let addrs: Vec<&str> = cluster.nodes.iter().map(|n| n.addr.as_str()).collect();
    println!(
        "  {} built-in nodes on {}, proxy on {}; ring {ring}",
        args.nodes,
        super::report::addr_span(&addrs),
        proxy
    );
    let mut members: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();

    heading("write");
    let bar = Progress::new(args.keys());
    let write = bar
        .show(
            "writing keys",
            keys::write_all(
                &proxy,
                args.keys(),
                args.value_size(),
                args.connections,
                &bar,
            ),
        )
        .await?;
    println!(
        "  wrote {} keys user:1..user:{} of {} B through the proxy in {:.2} s: {} keys/s \
         ({} connections, MSET of {} keys, {} in flight per connection)",
        report::group(write.keys),
        write.keys,
        write.value_size,
        write.secs,
        report::group(write.keys_per_sec.round() as u64),
        write.connections,
        keys::BATCH_KEYS,
        keys::PIPELINE_DEPTH
    );
    let verify_initial = verify(args, &proxy, true).await?;

    heading("distribution (DBSIZE on each node)");
    let distribution = distribution(&cluster, &members).await?;
    print!("{}", report::distribution_table(&distribution));

    heading("add a node");
    let idx = cluster.start_node()?;
    let (name, addr) = (
        cluster.nodes[idx].name.clone(),
        cluster.nodes[idx].addr.clone(),
    );
    println!("  started {name} on {addr}; CLUSTER ADDNODE {addr} NAME {name}");
    members.push(name.clone());
    let join = change(
        args,
        &cluster,
        &members,
        &["CLUSTER", "ADDNODE", &addr, "NAME", &name],
        &name,
        |after: &Distribution| after.keys_of(&name),
    )
    .await?;
    print!("{}", report::change_text(&join));
    print!("{}", report::distribution_table(&join.distribution_after));

    heading(&format!("remove {}", args.remove));
    let leaving = args.remove.clone();
    if !members.contains(&leaving) {
        return Err(format!("--remove: no node named {leaving}"));
    }
    let held = join.distribution_after.keys_of(&leaving);
    members.retain(|m| *m != leaving);
    let mut leave = change(
        args,
        &cluster,
        &members,
        &["CLUSTER", "REMOVENODE", &leaving],
        &leaving,
        |_| held,
    )
    .await?;
    let left = cluster.node(&leaving).expect("started").addr.clone();
    leave.removed_node_keys_after = Some(dbsize(&left).await?);
    print!("{}", report::change_text(&leave));
    print!("{}", report::distribution_table(&leave.distribution_after));

    heading(&format!(
        "latency through the proxy ({:.1} s per run)",
        args.latency_secs()
    ));
    let latency = latency_runs(args, &proxy).await?;
    print!("{}", report::latency_table(&latency));

    cluster.stop();
    let report = DemoReport {
        nodes: args.nodes,
        node_kind: NodeKind::Builtin.label().into(),
        keys: args.keys(),
        value_size: args.value_size(),
        ring,
        write,
        verify_initial,
        distribution,
        join: Some(join),
        leave: Some(leave),
        latency,
        total_secs: t0.elapsed().as_secs_f64(),
    };
    heading("summary");
    print!("{}", report::summary(&report));
    println!("  stopped the proxy and {} nodes", args.nodes + 1);
    Ok(report)
}

/// Reads every key back through the proxy, with a progress bar, and prints the line.
async fn verify(args: &DemoArgs, proxy: &str, print: bool) -> Result<ReadStats, String> {
    let bar = Progress::new(args.keys());
    let st = bar
        .show(
            "reading back",
            keys::verify_all(
                proxy,
                args.keys(),
                args.value_size(),
                args.connections,
                &bar,
            ),
        )
        .await?;
    if !print {
        return Ok(st);
    }
    println!(
        "  verify: {} keys read back (MGET) in {:.2} s: {}",
        report::group(st.keys),
        st.secs,
        report::read_line(&st)
    );
    Ok(st)
}

/// DBSIZE directly on one node.
async fn dbsize(addr: &str) -> Result<u64, String> {
    let r = conn::call(addr, &["DBSIZE"]).await?;
    Ok(conn::int(&r)?.max(0) as u64)
}

/// Keys per ring member, asked of each node directly.
async fn distribution(cluster: &DemoCluster, members: &[String]) -> Result<Distribution, String> {
    let mut counts = Vec::new();
    for name in members {
        let node = cluster
            .node(name)
            .ok_or_else(|| format!("no node {name}"))?;
        counts.push((name.clone(), node.addr.clone(), dbsize(&node.addr).await?));
    }
    Ok(Distribution::new(counts))
}

/// Sends one topology command while readers read, waits for `state:ok`, and
/// gathers what moved and what the readers saw. `moved` picks the moved key
/// count from the distribution after the change.
async fn change(
    args: &DemoArgs,
    cluster: &DemoCluster,
    members: &[String],
    command: &[&str],
    node: &str,
    moved: impl Fn(&Distribution) -> u64,
) -> Result<Change, String> {
    let proxy = cluster.proxy_addr.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..READERS as u64)
        .map(|r| {
            let first = r * args.keys() / READERS as u64;
            tokio::spawn(keys::read_until(
                proxy.clone(),
                args.keys(),
                args.value_size(),
                first,
                stop.clone(),
                // Bounded even if the change never ends: 100 passes over the keys.
                100 * args.keys(),
            ))
        })
        .collect();
    // Let the readers get going before the change starts.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let mut admin = conn::connect(&proxy).await?;
    let t = Instant::now();
    let reply = admin.call_str(command).await?;
    let command_ms = t.elapsed().as_secs_f64() * 1000.0;
    conn::ok(&reply).map_err(|e| format!("{}: {e}", command.join(" ")))?;

    let bar = Progress::new(0);
    let (info, states_seen) = bar.show("migrating", wait_ok(&mut admin, &bar)).await?;
    let wait_ms = t.elapsed().as_secs_f64() * 1000.0;
    stop.store(true, Ordering::Relaxed);
    let mut reads_during = ReadStats::default();
    for r in readers {
        let st = r.await.map_err(|e| e.to_string())??;
        reads_during.keys += st.keys;
        reads_during.found += st.found;
        reads_during.missing += st.missing;
        reads_during.wrong += st.wrong;
        reads_during.errors += st.errors;
        reads_during.secs = reads_during.secs.max(st.secs);
    }
    let field = |k: &str| conn::field(&info, k).unwrap_or("0").to_string();
    let num = |k: &str| field(k).parse::<u64>().unwrap_or(0);

    let distribution_after = distribution(cluster, members).await?;
    let total = distribution_after.total.max(1);
    let moved_keys = moved(&distribution_after);
    let ideal_nodes = if command[1] == "ADDNODE" {
        members.len()
    } else {
        members.len() + 1
    };
    let verify_after = verify(args, &proxy, false).await?;
    Ok(Change {
        change: format!(
            "{} {node}",
            if command[1] == "ADDNODE" {
                "add"
            } else {
                "remove"
            }
        ),
        node: node.to_string(),
        command_ms,
        ring_rebuild_us: num("ring_rebuild_us"),
        migration_ms: num("migration_ms"),
        cutover_pause_ms: num("migration_cutover_pause_ms"),
        keys_copied: num("migration_keys_copied"),
        proxy_moved_fraction: field("migration_moved_fraction").parse().unwrap_or(0.0),
        moved_keys,
        moved_pct: moved_keys as f64 / total as f64 * 100.0,
        ideal_pct: 100.0 / ideal_nodes as f64,
        states_seen,
        wait_ms,
        reads_during,
        verify_after,
        removed_node_keys_after: None,
        distribution_after,
    })
}

/// Polls CLUSTER RINGINFO until `state:ok`; returns the last INFO text and the
/// distinct states seen in order. An `aborted` change is an error.
async fn wait_ok(admin: &mut Conn, bar: &Progress) -> Result<(String, Vec<String>), String> {
    let deadline = Instant::now() + Duration::from_secs(CHANGE_TIMEOUT_S);
    let mut seen: Vec<String> = Vec::new();
    loop {
        let info = conn::text(&admin.call_str(&["CLUSTER", "RINGINFO"]).await?);
        let state = conn::field(&info, "state").unwrap_or("?").to_string();
        let num = |k: &str| conn::field(&info, k).and_then(|v| v.parse::<u64>().ok());
        if let (Some(done), Some(total)) =
            (num("migration_keys_scanned"), num("migration_keys_to_scan"))
        {
            bar.set(done, total);
        }
        if seen.last() != Some(&state) {
            seen.push(state.clone());
        }
        match state.as_str() {
            "ok" => return Ok((info, seen)),
            "aborted" => {
                return Err(format!(
                    "the change was aborted: {}",
                    conn::field(&info, "last_error").unwrap_or("?")
                ))
            }
            _ => {}
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the change did not finish within {CHANGE_TIMEOUT_S} s (state {state})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

/// GET and SET: open loop at `--rate`, then closed loop unpipelined and pipelined.
async fn latency_runs(args: &DemoArgs, proxy: &str) -> Result<Vec<LatencyRun>, String> {
    let secs = args.latency_secs();
    let mut runs = Vec::new();
    for op in [Op::Get, Op::Set] {
        let w = Workload {
            op,
            keys: args.keys(),
            value_size: args.value_size(),
        };
        let (addr, rate) = (proxy.to_string(), args.rate);
        eprintln!("  running {} at {rate:.0} rps for {secs:.1} s", op.name());
        let open = tokio::task::spawn_blocking(move || {
            latency::open_loop(&addr, w, rate, secs, OPEN_LOOP_CONNS)
        })
        .await
        .map_err(|e| e.to_string())??;
        runs.push(open);
        for pipeline in [1, CLOSED_LOOP_PIPELINE] {
            eprintln!(
                "  running {} max c{CLOSED_LOOP_CONNS} P{pipeline} for {secs:.1} s",
                op.name()
            );
            runs.push(
                latency::closed_loop(
                    proxy,
                    w,
                    secs,
                    CLOSED_LOOP_CONNS,
                    pipeline,
                    CLOSED_LOOP_MAX_REQUESTS,
                )
                .await?,
            );
        }
    }
    Ok(runs)
}

/// The exit status: every key read back, during and after every change, and
/// the removed node emptied.
pub(crate) fn verdict(r: &DemoReport) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut reads: Vec<(&str, &ReadStats)> = vec![("initial verify", &r.verify_initial)];
    for c in [&r.join, &r.leave].into_iter().flatten() {
        reads.push((&c.change, &c.reads_during));
        reads.push((&c.change, &c.verify_after));
        if let Some(k) = c.removed_node_keys_after.filter(|&k| k > 0) {
            problems.push(format!("{} still holds {k} keys", c.node));
        }
    }
    for (what, st) in reads {
        if st.missing + st.wrong > 0 {
            problems.push(format!(
                "{what}: {} missing, {} wrong",
                st.missing, st.wrong
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
