//! `shardis check --fleet P`: the consistency checker over a fleet of P
//! proxies sharing their topology in etcd.
//!
//! Starts etcd, the nodes and P proxies (`cluster.rs`), spreads its
//! recording workers over the proxies (worker w bound to proxy w mod P),
//! and runs the scenarios of `scenarios.rs` in sequence, each under that
//! load: ADDNODE and REMOVENODE issued on one proxy, kill -9 of the leader
//! mid-copy, SIGSTOP of a non-leader across a whole change, etcd restarted
//! mid-change, a CONFIG RELOAD that adds a node. Then it verifies through
//! every proxy and directly on the nodes (`direct.rs`). Each scenario gets a
//! line in the report with the violations its clients saw while it ran;
//! the run fails (non-zero exit) on any violation. Called by `check::run`.

mod cluster;
mod direct;
mod etcd;
mod scenarios;

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::workload::{self, Mix, Shared, Worker};
use super::CheckArgs;
use crate::procs::NodeKind;
use cluster::{FleetCluster, FleetOptions};
use scenarios::Outcome;

/// Every scenario, in the order they run.
pub const SCENARIOS: [&str; 6] = [
    "addnode",
    "removenode",
    "kill-leader",
    "stop-follower",
    "etcd-restart",
    "reload-add",
];
/// Each phase of a change (catch-up, cutover pause, sweep) held this much
/// longer, so the clients' writes land in every one.
const PHASE_DELAY_MS: u64 = 300;

/// The load's counters at one moment, to report a scenario's share.
#[derive(Clone, Copy)]
struct Snapshot {
    ops: u64,
    errors: u64,
    violations: u64,
}

fn snapshot(s: &Shared) -> Snapshot {
    let v = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Snapshot {
        ops: v(&s.ops),
        errors: v(&s.errors),
        violations: v(&s.lost)
            + v(&s.stale)
            + v(&s.resurrected)
            + v(&s.wrong_counters)
            + v(&s.tx_sum),
    }
}

/// Runs the fleet check; `Ok(true)` when no violation was found.
pub(crate) async fn run(mut args: CheckArgs, backend: NodeKind, mix: Mix) -> Result<bool, String> {
    // Slow enough copies that the leader's kill and etcd's restart land
    // mid-copy.
    args.copy_rate = args.copy_rate.min(if args.short { 1_500 } else { 5_000 });
    if args.short {
        args.preload = args.preload.min(8_000);
    }
    let chosen: Vec<&str> = match args.scenarios.as_str() {
        "all" => SCENARIOS.to_vec(),
        list => list.split(',').map(str::trim).collect(),
    };
    if let Some(bad) = chosen.iter().find(|s| !SCENARIOS.contains(s)) {
        return Err(format!(
            "--scenarios: unknown {bad:?}; expected all or some of {}",
            SCENARIOS.join(",")
        ));
    }
    if !(2..=5).contains(&args.fleet) {
        return Err(format!(
            "--fleet: expected 2 to 5 proxies, got {}",
            args.fleet
        ));
    }
    let t0 = Instant::now();
    let opts = FleetOptions {
        proxies: args.fleet,
        nodes: args.nodes,
        copy_rate: args.copy_rate,
        skip_resync: args.inject_skip_resync,
        threads: args.threads,
        phase_delay_ms: PHASE_DELAY_MS,
    };
    let mut fleet = tokio::task::block_in_place(|| FleetCluster::start(backend, &opts))?;
    let addrs = fleet.addrs();
    eprintln!(
        "check: {} {} nodes, {} proxies on {} sharing etcd on {}",
        args.nodes,
        backend.label(),
        addrs.len(),
        addrs.join(", "),
        fleet.etcd.endpoint()
    );
    scenarios::wait_settled(&addrs, 1, 30).await?;
    super::preload(&addrs[0], args.preload, args.value_size).await?;

    let shared = Arc::new(Shared::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for w in 0..args.workers.max(2 * addrs.len()) {
        let proxy = &addrs[w % addrs.len()];
        let worker = Worker::new(w, proxy, shared.clone(), stop.clone(), Duration::ZERO, mix);
        handles.push(tokio::spawn(worker.run()));
    }
    let reporter = tokio::spawn(super::report_every_second(
        addrs[0].clone(),
        shared.clone(),
        stop.clone(),
        t0,
    ));
    let settle = Duration::from_secs_f64(args.settle_secs);
    let mut lines = Vec::new();
    let mut scenario_violations = 0;
    tokio::time::sleep(settle).await;
    for name in chosen {
        shared.set_phase(name);
        let before = snapshot(&shared);
        let started = Instant::now();
        let out = run_one(&mut fleet, name, args.threads).await;
        let out = out.map_err(|e| format!("scenario {name}: {e}"))?;
        tokio::time::sleep(settle).await;
        let after = snapshot(&shared);
        let live = after.violations - before.violations;
        let violations = live + out.violations;
        scenario_violations += violations;
        lines.push(scenario_line(
            name,
            &out,
            started.elapsed(),
            before,
            after,
            violations,
        ));
    }

    shared.set_phase("verify");
    stop.store(true, Ordering::Relaxed);
    let mut workers = Vec::new();
    for h in handles {
        workers.push(h.await.map_err(|e| e.to_string())?);
    }
    let _ = reporter.await;
    let mut report = super::report::Report::default();
    for p in &addrs {
        let r = workload::verify(p, &workers, &shared).await?;
        report.add_violations(&r);
        report.coll_keys = r.coll_keys;
        report.coll_ttls = r.coll_ttls;
        report.tx_transfers = r.tx_transfers;
        report.tx_cas_committed = r.tx_cas_committed;
        report.tx_cas_aborted = r.tx_cas_aborted;
        let amnesties = shared.amnesties();
        report.lost_untouched +=
            super::verify_preload(p, args.preload, args.value_size, &amnesties).await?;
    }
    let nodes = fleet.node_list();
    let on_nodes = direct::verify_on_nodes(&addrs[0], &nodes, &workers, &shared).await?;
    report.add_violations(&on_nodes);
    report.lost += shared.lost.load(Ordering::Relaxed);
    report.stale += shared.stale.load(Ordering::Relaxed);
    report.resurrected += shared.resurrected.load(Ordering::Relaxed);
    report.wrong_counters += shared.wrong_counters.load(Ordering::Relaxed);
    report.tx_sum += shared.tx_sum.load(Ordering::Relaxed);
    report.orphans = super::cluster::count_orphans_on(&nodes, &addrs[0]).await?;
    report.seconds = t0.elapsed().as_secs_f64();
    report.ops = shared.ops.load(Ordering::Relaxed);
    report.errors = shared.errors.load(Ordering::Relaxed);
    report.max_error_window_ms = shared.max_error_window_ms.load(Ordering::Relaxed);
    report.max_stall_ms = shared.max_stall_ms.load(Ordering::Relaxed);
    report.scenarios = lines;
    report.scenario_violations = scenario_violations;
    let ok = report.violations() == 0;
    let label = format!(
        "{} (fleet of {} proxies on etcd)",
        backend.label(),
        addrs.len()
    );
    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(out, "{}", report.json(&label));
    } else {
        let _ = write!(out, "{}", report.text(&label));
    }
    Ok(ok)
}

async fn run_one(fleet: &mut FleetCluster, name: &str, threads: usize) -> Result<Outcome, String> {
    let last = fleet.members.len() - 1;
    match name {
        "addnode" => scenarios::add_node(fleet, 1).await,
        "removenode" => {
            let victim = fleet.nodes[1].name.clone();
            scenarios::remove_node(fleet, last, &victim).await
        }
        "kill-leader" => scenarios::kill_leader(fleet).await,
        "stop-follower" => scenarios::stop_follower(fleet).await,
        "etcd-restart" => scenarios::restart_etcd(fleet).await,
        _ => scenarios::reload_add(fleet, last, threads).await,
    }
}

fn scenario_line(
    name: &str,
    out: &Outcome,
    took: Duration,
    before: Snapshot,
    after: Snapshot,
    violations: u64,
) -> String {
    let ops = after.ops - before.ops;
    let errors = after.errors - before.errors;
    format!(
        "{name:<14} epoch={:<3} secs={:<5.1} acked={:<7} errors={:<5} violations={violations}  {}",
        out.epoch,
        took.as_secs_f64(),
        ops - errors,
        errors,
        out.note
    )
}
