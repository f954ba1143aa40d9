//! `shardis check`: the consistency checker for online topology changes.
//!
//! Starts its own cluster (built-in nodes or redis-server) and proxy on
//! loopback, runs concurrent clients through the proxy that record every
//! acknowledged operation, and meanwhile runs a scripted sequence: ADDNODE,
//! REMOVENODE, kill -9 of a joining node mid-copy, and a kill -9 / restart of
//! the proxy mid-copy; with `--faults`, the whole fault matrix (`faults.rs`).
//! Then it verifies through the proxy and directly on every
//! node: lost acknowledged writes, stale reads, resurrected deletes, wrong
//! counters, lost TTLs, lost untouched keys, and orphaned copies (keys on a
//! node that does not own them). Prints a line per second and a final report;
//! fails (non-zero exit) on any violation.
//!
//! With `--ha`, the high-availability scenarios instead (`ha/`): kill -9
//! of a primary and of a replica, a planned failover, an old primary's
//! return, Sentinel mode, each under load, with the failover window.
//!
//! With `--fleet P`, the topology-change scenarios over P proxies sharing
//! their topology in etcd instead (`fleet/`): changes issued on one proxy,
//! the leader killed mid-copy, a follower stopped across a change, etcd
//! restarted mid-change, a reload that adds a node; clients on every proxy.
//!
//! Everything it starts is killed on drop; every loop is bounded in time.

mod client;
mod cluster;
mod coll_model;
mod collections;
mod faults;
mod fleet;
mod ha;
mod report;
mod txn;
mod workload;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::procs::NodeKind;
use client::{Client, Reply};
use cluster::{CheckCluster, ClusterOptions, NodeProcInfo};
use workload::{Amnesty, Mix, Shared, Worker};

/// Options of `shardis check`.
#[derive(Clone, Debug, clap::Args)]
pub struct CheckArgs {
    /// Backend nodes: `builtin` (shardis node) or `redis` (redis-server).
    #[arg(long, default_value = "builtin")]
    pub backend: String,
    /// Nodes at the start.
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,
    /// Concurrent client tasks.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Untouched keys written before the load, so copies take a while.
    #[arg(long, default_value_t = 100_000)]
    pub preload: usize,
    /// Value size of the preloaded keys.
    #[arg(long, default_value_t = 256)]
    pub value_size: usize,
    /// Migration copy rate limit (keys/s), so the load overlaps every phase.
    #[arg(long, default_value_t = 50_000)]
    pub copy_rate: u64,
    /// Seconds of load between phases.
    #[arg(long, default_value_t = 2.0)]
    pub settle_secs: f64,
    /// The short version for CI: fewer keys and shorter phases.
    #[arg(long)]
    pub short: bool,
    /// Hard bound on the whole run, in seconds.
    #[arg(long, default_value_t = 600)]
    pub max_secs: u64,
    /// Print the final report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Self-test: run the proxy with writes during a copy never re-synced; the
    /// check must then fail.
    #[arg(long, hide = true)]
    pub inject_skip_resync: bool,
    /// Also run the fault matrix: each party killed and stopped in each phase.
    #[arg(long)]
    pub faults: bool,
    /// Only the fault scenarios whose label contains this (e.g. "stop copying").
    #[arg(long, default_value = "")]
    pub fault_filter: String,
    /// How long each phase is held open under `--faults`, in ms.
    #[arg(long, default_value_t = 700)]
    pub phase_delay_ms: u64,
    /// How long a stopped party stays stopped (longer than the timeouts), in ms.
    #[arg(long, default_value_t = 1200)]
    pub stop_ms: u64,
    /// Which workloads run: `all`, `strings`, `collections` (hashes,
    /// lists, sets, sorted sets) or `transactions` (MULTI/EXEC transfers
    /// under a sum invariant, WATCH check-and-set).
    #[arg(long, default_value = "all")]
    pub workload: String,
    /// Proxy runtime threads (1: the current-thread runtime; 0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Run the high-availability scenarios (failover under load) instead.
    #[arg(long)]
    pub ha: bool,
    /// Under `--ha`: runs of each kill scenario (`--short`: at most 2).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Run the fleet scenarios instead, over this many proxies (2 to 5)
    /// sharing their topology in a local etcd (the `etcd` binary, Debian
    /// package etcd-server): ADDNODE and REMOVENODE on one proxy, kill -9
    /// of the leader mid-copy, SIGSTOP of a non-leader across a change,
    /// etcd restarted mid-change, a CONFIG RELOAD that adds a node; the
    /// workers spread over the proxies, verified through every proxy and
    /// on the nodes.
    #[arg(long, default_value_t = 0)]
    pub fleet: usize,
    /// Under `--fleet`: which scenarios run, comma-separated (addnode,
    /// removenode, kill-leader, stop-follower, etcd-restart, reload-add), or all.
    /// Under `--ha`: `failover` (the kill and failover scenarios), `stale`
    /// (stale reads under `read_from = "replica"`), or all.
    #[arg(long, default_value = "all")]
    pub scenarios: String,
}

/// Runs the checker; `Ok(true)` when no violation was found.
pub fn run(args: &CheckArgs) -> Result<bool, String> {
    let mut args = args.clone();
    if args.short {
        args.preload = args.preload.min(20_000);
        args.copy_rate = args.copy_rate.min(20_000);
        args.settle_secs = args.settle_secs.min(1.0);
        args.nodes = args.nodes.min(6);
    }
    if args.faults && args.short {
        // Small preload, slow copy: every phase long enough to hit, each
        // scenario a few seconds.
        args.preload = args.preload.min(3_000);
        args.copy_rate = args.copy_rate.min(200);
    }
    let backend = match args.backend.as_str() {
        "builtin" => NodeKind::Builtin,
        "redis" => NodeKind::Redis,
        other => {
            return Err(format!(
                "--backend: expected builtin or redis, got {other:?}"
            ))
        }
    };
    let mix = match args.workload.as_str() {
        "all" => Mix::All,
        "strings" => Mix::Strings,
        "collections" => Mix::Collections,
        "transactions" => Mix::Transactions,
        other => {
            return Err(format!(
                "--workload: expected all, strings, collections or transactions, got {other:?}"
            ))
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(args.max_secs);
    if args.ha {
        let runs = if args.short {
            args.runs.min(2)
        } else {
            args.runs
        }
        .max(1);
        return rt.block_on(async move {
            tokio::time::timeout_at(deadline.into(), ha::run(backend, runs, &args.scenarios))
                .await
                .map_err(|_| "the check exceeded --max-secs".to_string())?
        });
    }
    if args.fleet > 0 {
        return rt.block_on(async move {
            tokio::time::timeout_at(deadline.into(), fleet::run(args, backend, mix))
                .await
                .map_err(|_| "the check exceeded --max-secs".to_string())?
        });
    }
    rt.block_on(async move {
        tokio::time::timeout_at(deadline.into(), scenario(args, backend, mix))
            .await
            .map_err(|_| "the check exceeded --max-secs".to_string())?
    })
}

async fn scenario(args: CheckArgs, backend: NodeKind, mix: Mix) -> Result<bool, String> {
    let t0 = Instant::now();
    let opts = ClusterOptions {
        nodes: args.nodes,
        copy_rate: args.copy_rate,
        skip_resync: args.inject_skip_resync,
        threads: args.threads,
        phase_delay_ms: if args.faults { args.phase_delay_ms } else { 0 },
        faults: args.faults,
    };
    let mut cluster = CheckCluster::start(backend, &opts)?;
    eprintln!(
        "check: {} {} nodes, proxy on 127.0.0.1:{}",
        args.nodes,
        backend.label(),
        cluster.proxy_port
    );
    let proxy_addr = format!("127.0.0.1:{}", cluster.proxy_port);
    preload(&proxy_addr, args.preload, args.value_size).await?;
    eprintln!(
        "check: preloaded {} keys of {} B",
        args.preload, args.value_size
    );

    let shared = Arc::new(Shared::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for w in 0..args.workers {
        // Under faults, paced: the point is coverage of every phase, and
        // flat-out clients would starve the processes under test of CPU.
        let pace = Duration::from_millis(if args.faults { 1 } else { 0 });
        let worker = Worker::new(w, &proxy_addr, shared.clone(), stop.clone(), pace, mix);
        handles.push(tokio::spawn(worker.run()));
    }
    let reporter = tokio::spawn(report_every_second(
        proxy_addr.clone(),
        shared.clone(),
        stop.clone(),
        t0,
    ));
    let settle = Duration::from_secs_f64(args.settle_secs);
    let mut phases = Vec::new();

    tokio::time::sleep(settle).await;
    // 1. Add a node.
    shared.set_phase("addnode");
    add_node(&mut cluster, &proxy_addr).await?;
    let info = wait_state(&proxy_addr, &["ok"], 300).await?;
    phases.push(("addnode", info));
    tokio::time::sleep(settle).await;

    // 2. Remove a node.
    shared.set_phase("removenode");
    let victim = cluster.nodes[2].name.clone();
    admin(&proxy_addr, &["CLUSTER", "REMOVENODE", &victim]).await?;
    let info = wait_state(&proxy_addr, &["ok"], 300).await?;
    cluster.mark_removed(&victim);
    phases.push(("removenode", info));
    tokio::time::sleep(settle).await;

    // 3. The joining node dies mid-copy: the change must abort with nothing lost.
    shared.set_phase("kill-joining");
    let doomed = add_node(&mut cluster, &proxy_addr).await?;
    wait_copying(&proxy_addr).await?;
    cluster.kill_node(&doomed.name);
    let info = wait_state(&proxy_addr, &["aborted"], 120).await?;
    // Its partial copies died with it: the operator tells the proxy to stop
    // retrying their deletion.
    admin(&proxy_addr, &["CLUSTER", "REMOVENODE", &doomed.name]).await?;
    phases.push(("kill-joining", info));
    tokio::time::sleep(settle).await;

    // 4. The proxy dies mid-copy and restarts: the change resumes and completes.
    shared.set_phase("proxy-restart");
    add_node(&mut cluster, &proxy_addr).await?;
    wait_copying(&proxy_addr).await?;
    cluster.restart_proxy()?;
    let info = wait_state(&proxy_addr, &["ok"], 300).await?;
    phases.push(("proxy-restart", info));
    tokio::time::sleep(settle).await;

    let mut faults = None;
    if args.faults {
        let out = faults::run_matrix(
            &mut cluster,
            &proxy_addr,
            &shared,
            &args.fault_filter,
            Duration::from_millis(args.stop_ms),
        )
        .await?;
        // End on a clean change, so the run ends at state:ok.
        shared.set_phase("final-add");
        add_node(&mut cluster, &proxy_addr).await?;
        let info = wait_state(&proxy_addr, &["ok"], 300).await?;
        phases.push(("final-add", info));
        faults = Some(out);
        tokio::time::sleep(settle).await;
    }

    shared.set_phase("verify");
    stop.store(true, Ordering::Relaxed);
    let mut workers = Vec::new();
    for h in handles {
        workers.push(h.await.map_err(|e| e.to_string())?);
    }
    let _ = reporter.await;
    let mut report = workload::verify(&proxy_addr, &workers, &shared).await?;
    // Violations seen live, during the run, count too.
    report.lost += shared.lost.load(Ordering::Relaxed);
    report.stale += shared.stale.load(Ordering::Relaxed);
    report.resurrected += shared.resurrected.load(Ordering::Relaxed);
    report.wrong_counters += shared.wrong_counters.load(Ordering::Relaxed);
    report.tx_sum += shared.tx_sum.load(Ordering::Relaxed);
    for (t, n) in shared.by_type.iter().enumerate() {
        report.by_type[t] += n.load(Ordering::Relaxed);
    }
    let amnesties = shared.amnesties();
    report.lost_untouched =
        verify_preload(&proxy_addr, args.preload, args.value_size, &amnesties).await?;
    report.orphans = cluster.count_orphans(&proxy_addr).await?;
    report.phases = phases;
    report.seconds = t0.elapsed().as_secs_f64();
    report.ops = shared.ops.load(Ordering::Relaxed);
    report.errors = shared.errors.load(Ordering::Relaxed);
    report.max_error_window_ms = shared.max_error_window_ms.load(Ordering::Relaxed);
    report.max_stall_ms = shared.max_stall_ms.load(Ordering::Relaxed);
    if let Some(f) = faults {
        report.faults = f.lines;
        report.faults_missed = f.missed;
    }
    let ok = report.violations() == 0;
    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(out, "{}", report.json(backend.label()));
    } else {
        let _ = write!(out, "{}", report.text(backend.label()));
    }
    Ok(ok)
}

/// Starts a node and ADDNODEs it.
pub(crate) async fn add_node(
    cluster: &mut CheckCluster,
    proxy: &str,
) -> Result<NodeProcInfo, String> {
    let n = cluster.start_node()?;
    admin(proxy, &["CLUSTER", "ADDNODE", &n.addr, "NAME", &n.name]).await?;
    Ok(n)
}

pub(crate) async fn admin(proxy: &str, args: &[&str]) -> Result<(), String> {
    let mut c = Client::new(proxy, Duration::from_secs(10));
    let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    match c.call(&raw).await? {
        Reply::Simple(s) if s == "OK" => Ok(()),
        other => Err(format!("{} -> {}", args.join(" "), other.text())),
    }
}

/// CLUSTER RINGINFO as key/value pairs.
pub(crate) async fn cluster_info(proxy: &str) -> Result<Vec<(String, String)>, String> {
    let mut c = Client::new(proxy, Duration::from_secs(5));
    let r = c.call(&[b"CLUSTER", b"RINGINFO"]).await?;
    Ok(r.text()
        .lines()
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

pub(crate) fn field<'a>(info: &'a [(String, String)], key: &str) -> &'a str {
    info.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// Waits (bounded) until CLUSTER RINGINFO's state is one of `states`.
pub(crate) async fn wait_state(
    proxy: &str,
    states: &[&str],
    max_secs: u64,
) -> Result<Vec<(String, String)>, String> {
    let deadline = Instant::now() + Duration::from_secs(max_secs);
    loop {
        if let Ok(info) = cluster_info(proxy).await {
            if states.contains(&field(&info, "state")) {
                return Ok(info);
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "state did not become {states:?} within {max_secs} s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until a copy is under way and has copied something.
pub(crate) async fn wait_copying(proxy: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = cluster_info(proxy).await?;
        let copied: u64 = field(&info, "migration_keys_copied").parse().unwrap_or(0);
        if field(&info, "state") == "copying" && copied > 0 {
            return Ok(());
        }
        if field(&info, "state") == "ok" {
            return Err("the copy ended before it could be interrupted; lower --copy-rate or raise --preload".into());
        }
        if Instant::now() > deadline {
            return Err("no copy progress within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn preload_value(i: usize, size: usize) -> Vec<u8> {
    let mut v = format!("{i}:").into_bytes();
    v.resize(size.max(v.len()), b'x');
    v
}

pub(crate) async fn preload(proxy: &str, n: usize, size: usize) -> Result<(), String> {
    let mut c = Client::new(proxy, Duration::from_secs(10));
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let keys: Vec<(Vec<u8>, Vec<u8>)> = chunk
            .iter()
            .map(|&i| (format!("fill:{i}").into_bytes(), preload_value(i, size)))
            .collect();
        let mut args: Vec<&[u8]> = vec![b"MSET"];
        for (k, v) in &keys {
            args.push(k);
            args.push(v);
        }
        match c.call(&args).await? {
            Reply::Simple(_) => {}
            other => return Err(format!("preload MSET: {}", other.text())),
        }
    }
    Ok(())
}

/// Counts preloaded keys that are missing or changed (a key lost with a
/// killed node may be missing, never changed).
pub(crate) async fn verify_preload(
    proxy: &str,
    n: usize,
    size: usize,
    amnesties: &[Arc<Amnesty>],
) -> Result<u64, String> {
    let mut c = Client::new(proxy, Duration::from_secs(10));
    let mut bad = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let keys: Vec<Vec<u8>> = chunk
            .iter()
            .map(|i| format!("fill:{i}").into_bytes())
            .collect();
        let mut args: Vec<&[u8]> = vec![b"MGET"];
        args.extend(keys.iter().map(|k| k.as_slice()));
        let Reply::Array(vals) = c.call(&args).await? else {
            return Err("MGET did not return an array".into());
        };
        for ((&i, v), k) in chunk.iter().zip(vals).zip(&keys) {
            let excused = v == Reply::Bulk(None) && amnesties.iter().any(|a| a.covers(k));
            if v != Reply::Bulk(Some(preload_value(i, size))) && !excused {
                bad += 1;
            }
        }
    }
    Ok(bad)
}

pub(crate) async fn report_every_second(
    proxy: String,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    t0: Instant,
) {
    let mut last_ops = 0;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let info = cluster_info(&proxy).await.unwrap_or_default();
        let ops = shared.ops.load(Ordering::Relaxed);
        eprintln!(
            "t={:>5.1}s phase={:<13} ops/s={:<6} errors={:<4} lost={} stale={} resurrected={} state={} copied={} dirty={}",
            t0.elapsed().as_secs_f64(),
            shared.phase(),
            ops - last_ops,
            shared.errors.load(Ordering::Relaxed),
            shared.lost.load(Ordering::Relaxed),
            shared.stale.load(Ordering::Relaxed),
            shared.resurrected.load(Ordering::Relaxed),
            field(&info, "state"),
            field(&info, "migration_keys_copied"),
            field(&info, "migration_keys_dirty"),
        );
        last_ops = ops;
    }
}
