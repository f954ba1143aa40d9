//! `shardis check --ha`: failover under load, measured. Each scenario runs
//! on a fresh cluster (three shards of a primary and one or two replicas,
//! built-in nodes or redis-server, and a proxy) while workers write new
//! keys to one shard and delete every fourth again:
//!
//! | scenario | promised |
//! |---|---|
//! | kill -9 of a primary, `write_ack = "primary"` | reported: the window, the writes lost |
//! | kill -9 of a primary, `write_ack = "replica"` (two replicas) | no acknowledged write lost, no delete undone |
//! | kill -9 of a replica | no client error, nothing lost |
//! | `CLUSTER FAILOVER` (planned) | no client error, nothing lost; the pause is reported |
//! | the old primary restarted after a failover | it rejoins as a replica; nothing lost, no delete undone |
//! | Sentinel mode (redis-server and `redis-sentinel` only) | reported with the Sentinel settings; nothing lost under `write_ack = "replica"` |
//! | stale reads under `read_from = "replica"`, steady and with a replica paused (`stale.rs`) | reported: stale reads and how far behind; no value never written, no versions backwards, the paused replica not read once its lag shows above `max_lag_bytes` |
//!
//! The failover window is the time from the first failed request to the end
//! of the first successful write that started after it; the kill scenarios
//! run `--runs` times and report its median and maximum. Prints one
//! Markdown table (and one for the stale reads); fails (non-zero exit) on
//! any broken promise. `--scenarios failover` or `stale` runs one group.

mod cluster;
mod load;
mod scenarios;
mod sentinel;
mod stale;
mod versions;

use std::time::Duration;

use crate::procs::NodeKind;

/// What one run of a scenario measured.
pub(crate) struct RunOut {
    pub window: Option<Duration>,
    pub errors: usize,
    pub ops: usize,
    pub lost: u64,
    pub resurrected: u64,
    pub max_request: Duration,
    /// What else the run says (the promotion, the pause, the old primary's role).
    pub extra: String,
    pub last_error: String,
    /// Other broken promises (an old primary that did not rejoin as a replica).
    pub broken: u64,
}

impl RunOut {
    /// A run's figures: the load's totals and what the final reads found.
    pub(crate) fn of(t: load::Totals, lost: u64, resurrected: u64, extra: String) -> RunOut {
        RunOut {
            window: t.window,
            errors: t.errors,
            ops: t.ops,
            lost,
            resurrected,
            max_request: t.max_request,
            extra,
            last_error: t.last_error,
            broken: 0,
        }
    }
}

/// What a scenario promises.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Promise {
    /// Figures only.
    Reported,
    /// No acknowledged write lost, no delete undone.
    NoLoss,
    /// And no client error.
    NoErrorNoLoss,
}

struct Row {
    name: String,
    promise: Promise,
    runs: Vec<RunOut>,
}

impl Row {
    fn violations(&self) -> u64 {
        self.runs
            .iter()
            .map(|r| {
                let loss = r.lost + r.resurrected;
                r.broken
                    + match self.promise {
                        Promise::Reported => 0,
                        Promise::NoLoss => loss,
                        Promise::NoErrorNoLoss => loss + r.errors as u64,
                    }
            })
            .sum()
    }

    fn line(&self) -> String {
        let mut windows: Vec<Duration> = self.runs.iter().filter_map(|r| r.window).collect();
        windows.sort();
        let ms = |d: &Duration| {
            if *d == Duration::MAX {
                "never".to_string()
            } else {
                format!("{:.0}", d.as_secs_f64() * 1000.0)
            }
        };
        let (p50, max) = match windows.len() {
            0 => ("-".to_string(), "-".to_string()),
            n => (ms(&windows[(n - 1) / 2]), ms(&windows[n - 1])),
        };
        let sum = |f: fn(&RunOut) -> u64| self.runs.iter().map(f).sum::<u64>();
        let per_run = |f: fn(&RunOut) -> u64| {
            self.runs
                .iter()
                .map(|r| f(r).to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let longest = self
            .runs
            .iter()
            .map(|r| r.max_request)
            .max()
            .unwrap_or_default();
        let promise = match self.promise {
            Promise::Reported => "reported",
            Promise::NoLoss => "0 lost",
            Promise::NoErrorNoLoss => "0 errors, 0 lost",
        };
        let verdict = if self.violations() == 0 {
            "ok"
        } else {
            "**BROKEN**"
        };
        let extra = self.runs.last().map(|r| r.extra.as_str()).unwrap_or("");
        format!(
            "| {} | {} | {p50} | {max} | {:.0} | {} | {} | {} | {} | {promise}: {verdict} | {extra} |",
            self.name,
            self.runs.len(),
            longest.as_secs_f64() * 1000.0,
            sum(|r| r.ops as u64),
            per_run(|r| r.errors as u64),
            per_run(|r| r.lost),
            per_run(|r| r.resurrected),
        )
    }
}

/// The groups of scenarios `--scenarios` picks from.
const GROUPS: [&str; 2] = ["failover", "stale"];

/// Runs the chosen groups (`all`, or some of [`GROUPS`], comma-separated)
/// on `kind` nodes, the kill scenarios `runs` times; `Ok(true)` when every
/// promise held.
pub(crate) async fn run(kind: NodeKind, runs: usize, groups: &str) -> Result<bool, String> {
    let chosen: Vec<&str> = match groups {
        "all" => GROUPS.to_vec(),
        list => list.split(',').map(str::trim).collect(),
    };
    if let Some(bad) = chosen.iter().find(|g| !GROUPS.contains(g)) {
        return Err(format!(
            "--scenarios: unknown {bad:?} under --ha; expected all or some of {}",
            GROUPS.join(",")
        ));
    }
    let mut violations = 0;
    if chosen.contains(&"failover") {
        violations += failover(kind, runs).await?;
    }
    if chosen.contains(&"stale") {
        violations += stale_reads(kind).await?;
    }
    println!(
        "verdict: {}",
        if violations == 0 {
            "PASS (every promise held)".to_string()
        } else {
            format!("FAIL ({violations} broken)")
        }
    );
    Ok(violations == 0)
}

/// The stale-read runs and their table; the promises broken.
async fn stale_reads(kind: NodeKind) -> Result<u64, String> {
    eprintln!("check --ha: stale reads, small max_lag_bytes");
    let steady = stale::steady(kind).await?;
    eprintln!("check --ha: stale reads, replica paused");
    let paused = stale::paused(kind).await?;
    let rows = [steady, paused];
    println!(
        "Stale reads under `read_from = \"replica\"` on {} nodes: three shards of a primary and one replica behind one proxy; {} writers overwrite {} keys of one shard with increasing versions, {} readers GET them, one request at a time. A read is stale when it returns a version older than the newest acknowledged before it started; how far behind: in versions, in ms since the first version it missed was acknowledged, and in bytes of replication stream — an estimate: the SETs to the shard acknowledged meanwhile times one SET's RESP size. The proxy polls offsets every `probe_interval_ms` = {} ms; a paused replica read more than one poll interval after `CLUSTER RING` shows its lag above `max_lag_bytes` breaks the bound.",
        kind.label(),
        stale::KEYS,
        stale::KEYS,
        stale::READERS,
        stale::POLL.as_millis(),
    );
    println!();
    println!("{}", stale::StaleOut::HEADER);
    for r in &rows {
        println!("{}", r.line());
    }
    println!();
    Ok(rows.iter().map(stale::StaleOut::violations).sum())
}

/// The failover scenarios and their table; the promises broken.
async fn failover(kind: NodeKind, runs: usize) -> Result<u64, String> {
    let mut rows: Vec<Row> = Vec::new();
    let mut row = |name: &str, promise: Promise| {
        eprintln!("check --ha: {name}");
        rows.push(Row {
            name: name.to_string(),
            promise,
            runs: Vec::new(),
        });
        rows.len() - 1
    };
    let (p, r, kr, pl, rs) = (
        row(
            "kill -9 primary, 1 replica, write_ack=primary",
            Promise::Reported,
        ),
        row(
            "kill -9 primary, 2 replicas, write_ack=replica",
            Promise::NoLoss,
        ),
        row("kill -9 replica", Promise::NoErrorNoLoss),
        row("CLUSTER FAILOVER (planned)", Promise::NoErrorNoLoss),
        row("old primary restarted, write_ack=replica", Promise::NoLoss),
    );
    let sentinel_row = (kind == NodeKind::Redis && sentinel::is_available()).then(|| {
        row(
            "Sentinel mode, 2 replicas, write_ack=replica",
            Promise::NoLoss,
        )
    });
    for i in 0..runs {
        eprintln!("check --ha: run {} of {runs}", i + 1);
        rows[p]
            .runs
            .push(scenarios::kill_primary(kind, 1, "primary").await?);
        rows[r]
            .runs
            .push(scenarios::kill_primary(kind, 2, "replica").await?);
        if let Some(s) = sentinel_row {
            rows[s].runs.push(sentinel::kill_primary().await?);
        }
    }
    rows[kr].runs.push(scenarios::kill_replica(kind).await?);
    rows[pl].runs.push(scenarios::planned(kind).await?);
    rows[rs]
        .runs
        .push(scenarios::restart_old_primary(kind).await?);
    println!(
        "Failover on {} nodes: three shards behind one proxy, {} clients writing new keys to one shard (every fourth deleted again), one request at a time; defaults of `[failover]` but `wait_timeout_ms = 3000`.",
        kind.label(),
        scenarios::WORKERS
    );
    if sentinel_row.is_some() {
        println!("Sentinel mode: {}.", sentinel::settings());
    }
    println!();
    println!("| scenario | runs | window p50 ms | window max ms | longest request ms | requests | errors per run | acknowledged writes lost per run | deletes undone per run | promise | last run |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{}", row.line());
    }
    let violations: u64 = rows.iter().map(Row::violations).sum();
    println!();
    for row in rows.iter().filter(|r| r.violations() > 0) {
        if let Some(e) = row
            .runs
            .iter()
            .map(|r| &r.last_error)
            .find(|e| !e.is_empty())
        {
            println!("{}: last error: {e}", row.name);
        }
    }
    Ok(violations)
}
