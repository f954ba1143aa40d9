//! The checker's fault matrix: every party (the joining node, an old owner,
//! the proxy) killed (SIGKILL) and stopped (SIGSTOP past every timeout, then
//! SIGCONT) in every phase of an ADDNODE (copy, catch-up, cutover, sweep),
//! plus a state file that cannot be written. Each scenario ends with the
//! operator actions the README documents, after which no change runs and no
//! sweep is pending. Called by `scenario` in `mod.rs` while the workers run;
//! the proxy holds each phase open (`SHARDIS_FAULT_PHASE_DELAY_MS`) so the
//! fault lands inside it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::cluster::{rings, CheckCluster, NodeProcInfo};
use super::workload::{Amnesty, Shared};
use super::{add_node, admin, cluster_info, field, wait_state};

/// The phases a fault is injected in, as CLUSTER RINGINFO names them.
const PHASES: [&str; 4] = ["copying", "catch-up", "cutover", "sweeping"];
const PARTIES: [&str; 3] = ["joining", "old-owner", "proxy"];
const FAULTS: [&str; 2] = ["kill", "stop"];

/// What the matrix found: one line per scenario, and how many missed their phase.
pub(crate) struct Outcome {
    pub lines: Vec<String>,
    pub missed: u64,
}

/// Runs every scenario whose label contains `filter` (all when empty).
pub(crate) async fn run_matrix(
    cluster: &mut CheckCluster,
    proxy: &str,
    shared: &Shared,
    filter: &str,
    stop: Duration,
) -> Result<Outcome, String> {
    let mut out = Outcome {
        lines: Vec::new(),
        missed: 0,
    };
    for party in PARTIES {
        for fault in FAULTS {
            for phase in PHASES {
                let label = format!("{party} {fault} {phase}");
                if !label.contains(filter) {
                    continue;
                }
                eprintln!("check: fault {label}");
                shared.set_phase(&format!("{party}-{fault}"));
                let line = one(cluster, proxy, shared, party, fault, phase, stop).await?;
                if line.contains("MISSED") {
                    out.missed += 1;
                }
                out.lines.push(format!("{label:<28} {line}"));
            }
        }
    }
    if "state-file unwritable".contains(filter) || filter.is_empty() {
        shared.set_phase("state-file");
        let line = unwritable_state_file(cluster, proxy, shared).await?;
        out.lines
            .push(format!("{:<28} {line}", "state-file unwritable"));
    }
    Ok(out)
}

/// Waits until the change reaches `phase`; false if it ended first.
async fn reach(proxy: &str, phase: &str) -> Result<bool, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = cluster_info(proxy).await?;
        let state = field(&info, "state");
        let copied: u64 = field(&info, "migration_keys_copied").parse().unwrap_or(0);
        if state == phase && (phase != "copying" || copied > 0) {
            return Ok(true);
        }
        if state == "ok" || state == "aborted" || Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One scenario: ADDNODE, the fault inside `phase`, then the operator's
/// actions until no change runs and no sweep is pending.
async fn one(
    cluster: &mut CheckCluster,
    proxy: &str,
    shared: &Shared,
    party: &str,
    fault: &str,
    phase: &str,
    stop: Duration,
) -> Result<String, String> {
    let Some(joining) = join_until(cluster, proxy, phase).await? else {
        return Ok(format!("MISSED (the change left {phase} before the fault)"));
    };
    let (now, next) = rings(proxy).await?;
    let victim = match party {
        "joining" => Some(joining.name.clone()),
        "old-owner" => now
            .nodes()
            .iter()
            .map(|n| n.name.clone())
            .find(|n| cluster.is_alive(n)),
        _ => None,
    };
    // The longest request from the fault until shortly after the party is
    // back: what the fault itself cost clients (a cutover pause held open by
    // the phase delay may overlap it).
    shared.phase_stall_ms.store(0, Ordering::Relaxed);
    match (fault, &victim) {
        ("kill", Some(v)) => {
            cluster.kill_node(v);
            // After the kill: nothing it acknowledges can come later.
            shared.add_amnesty(Amnesty {
                node: v.clone(),
                rings: vec![now, next],
            });
        }
        ("kill", None) => cluster.restart_proxy()?,
        (_, v) => {
            cluster.signal(v.as_deref(), "-STOP")?;
            tokio::time::sleep(stop).await;
            cluster.signal(v.as_deref(), "-CONT")?;
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fault_stall = shared.phase_stall_ms.load(Ordering::Relaxed);
    let info = wait_state(proxy, &["ok", "aborted"], 120).await?;
    let outcome = format!(
        "-> {:<7} pause_ms={:<5} persist_us={:<6}",
        field(&info, "state"),
        field(&info, "migration_cutover_pause_ms"),
        field(&info, "migration_cutover_persist_us"),
    );
    let last_error = field(&info, "last_error").to_string();
    if let (Some(v), "kill") = (&victim, fault) {
        // The operator removes the dead node (at once, whatever runs), then
        // forgets the copies it can no longer hold.
        let _ = admin(proxy, &["CLUSTER", "REMOVENODE", v]).await;
        let _ = admin(proxy, &["CLUSTER", "REMOVENODE", v]).await;
        cluster.mark_removed(v);
    }
    wait_state(proxy, &["ok", "aborted"], 120).await?;
    wait_no_pending(proxy).await?;
    Ok(format!(
        "{outcome} fault_stall_ms={fault_stall:<5} scenario_stall_ms={:<5} error_window_ms={:<5} {last_error}",
        shared.phase_stall_ms.load(Ordering::Relaxed),
        shared.phase_error_window_ms.load(Ordering::Relaxed),
    ))
}

/// Waits (bounded) until no node holds copies awaiting deletion.
async fn wait_no_pending(proxy: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = cluster_info(proxy).await?;
        if field(&info, "sweep_pending") == "-" {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "sweep_pending still {} after 60 s",
                field(&info, "sweep_pending")
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a node and ADDNODEs it, then waits for the change to reach
/// `phase`; `None` (once the change ended) when it left `phase` first.
async fn join_until(
    cluster: &mut CheckCluster,
    proxy: &str,
    phase: &str,
) -> Result<Option<NodeProcInfo>, String> {
    let joining = add_node(cluster, proxy).await?;
    if !reach(proxy, phase).await? {
        wait_state(proxy, &["ok", "aborted"], 120).await?;
        return Ok(None);
    }
    Ok(Some(joining))
}

/// The state file's directory disappears mid-copy: the cutover cannot persist
/// the new ring, so the change aborts naming the file, and the proxy keeps
/// serving. The operator restores the directory.
async fn unwritable_state_file(
    cluster: &mut CheckCluster,
    proxy: &str,
    shared: &Shared,
) -> Result<String, String> {
    if join_until(cluster, proxy, "copying").await?.is_none() {
        return Ok("MISSED (the copy ended before the fault)".into());
    }
    cluster.break_state_dir()?;
    let info = wait_state(proxy, &["ok", "aborted"], 120).await?;
    cluster.restore_state_dir()?;
    let err = field(&info, "last_error");
    if field(&info, "state") != "aborted" || !err.contains("topology.toml") {
        return Err(format!(
            "an unwritable state file must abort the change naming it: state:{} last_error:{err}",
            field(&info, "state")
        ));
    }
    wait_no_pending(proxy).await?;
    Ok(format!(
        "-> aborted stall_ms={:<5} error_window_ms={:<5} {err}",
        shared.phase_stall_ms.load(Ordering::Relaxed),
        shared.phase_error_window_ms.load(Ordering::Relaxed),
    ))
}
