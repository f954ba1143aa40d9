//! `shardis demo`: the scripted tour, printed as a report.
//!
//! Starts its own cluster as child processes of this executable (N built-in
//! nodes and a proxy, free loopback ports, a generated config in a temp dir),
//! then: writes `user:<id>` keys through the proxy; shows keys per node
//! (DBSIZE on each node) as a table and a bar chart; adds a node while a
//! reader keeps reading, and shows what moved and what the clients saw;
//! removes a node the same way; measures GET/SET latency open loop at a fixed
//! rate and closed loop at maximum speed; prints a summary, optionally writes
//! every figure as JSON, and stops everything.
//!
//! ```text
//!  demo (this process) ── MSET/MGET/GET/SET, CLUSTER … ──► shardis proxy ──► node1..nodeN
//!        └──────────────────── DBSIZE, INFO directly ─────────────────────────┘
//! ```
//!
//! The report goes to stdout, progress bars to stderr. The whole run is bounded
//! by `--max-secs`; every child is killed when the demo ends, however it ends.

mod cluster;
mod conn;
mod keys;
mod latency;
mod markdown;
mod memory;
mod progress;
mod report;
mod scenario;
mod svg;

use std::path::PathBuf;
use std::time::Duration;

pub(crate) use report::DemoReport;

/// Keys written by default.
pub(crate) const DEFAULT_KEYS: u64 = 1_000_000;
/// Value size by default, bytes.
pub(crate) const DEFAULT_VALUE_SIZE: usize = 100;
/// Keys written by `--memory` (`--quick`: [`QUICK_MEMORY_KEYS`]).
pub(crate) const DEFAULT_MEMORY_KEYS: u64 = 10_000_000;
pub(crate) const QUICK_MEMORY_KEYS: u64 = 1_000_000;
/// Value size of `--memory`, bytes.
pub(crate) const DEFAULT_MEMORY_VALUE_SIZE: usize = 1024;
/// Seconds per latency run (`--quick`: [`QUICK_LATENCY_SECS`]).
pub(crate) const DEFAULT_LATENCY_SECS: f64 = 3.0;
pub(crate) const QUICK_LATENCY_SECS: f64 = 0.5;

/// Options of `shardis demo`.
#[derive(Clone, Debug, clap::Args)]
pub struct DemoArgs {
    /// Built-in nodes to start (one more joins, then one leaves).
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,
    /// Keys to write, `user:1..=N` (accepts 1000000, 1e6, 10^6)
    /// [default: 1000000; with --memory 10^7, or 10^6 with --quick].
    #[arg(long, value_parser = crate::sim::parse_count)]
    pub keys: Option<u64>,
    /// Value size in bytes [default: 100; with --memory 1024].
    #[arg(long)]
    pub value_size: Option<usize>,
    /// Client connections for the bulk writes and reads.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Target rate of the open-loop latency runs, requests/s.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Seconds per latency run [default: 3, or 0.5 with --quick].
    #[arg(long)]
    pub latency_secs: Option<f64>,
    /// Short latency runs (tests, CI); with --memory, 10^6 keys.
    #[arg(long)]
    pub quick: bool,
    /// Instead of the tour: bytes per key of built-in nodes and of
    /// redis-server (one after the other), and the projection to 10^9 keys.
    #[arg(long)]
    pub memory: bool,
    /// The node that leaves in the remove step.
    #[arg(long, default_value = "node3")]
    pub remove: String,
    /// Hard bound on the whole demo, in seconds.
    #[arg(long, default_value_t = 900)]
    pub max_secs: u64,
    /// Also write every figure to this file as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the figures as Markdown tables to this file (for bench/report.sh).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Also write keys-per-node.svg and latency.svg into this directory.
    #[arg(long)]
    pub svg_dir: Option<PathBuf>,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            nodes: 10,
            keys: None,
            value_size: None,
            connections: 4,
            rate: 1000.0,
            latency_secs: None,
            quick: false,
            memory: false,
            remove: "node3".into(),
            max_secs: 900,
            json: None,
            markdown: None,
            svg_dir: None,
        }
    }
}

impl DemoArgs {
    fn check(&self) -> Result<(), String> {
        if !(2..=200).contains(&self.nodes) {
            return Err("--nodes: expected 2..=200".into());
        }
        if self.keys() == 0 || self.keys() > 1_000_000_000 {
            return Err("--keys: expected 1..=10^9".into());
        }
        if self.value_size() == 0 || self.value_size() > 1 << 20 {
            return Err("--value-size: expected 1..=1048576 bytes".into());
        }
        if !(1..=256).contains(&self.connections) {
            return Err("--connections: expected 1..=256".into());
        }
        if !(1.0..=1e6).contains(&self.rate) {
            return Err("--rate: expected 1..=1000000 requests/s".into());
        }
        Ok(())
    }

    /// `--keys`, or the default of the mode.
    pub(crate) fn keys(&self) -> u64 {
        self.keys.unwrap_or(match (self.memory, self.quick) {
            (false, _) => DEFAULT_KEYS,
            (true, false) => DEFAULT_MEMORY_KEYS,
            (true, true) => QUICK_MEMORY_KEYS,
        })
    }

    /// `--value-size`, or the default of the mode.
    pub(crate) fn value_size(&self) -> usize {
        self.value_size.unwrap_or(if self.memory {
            DEFAULT_MEMORY_VALUE_SIZE
        } else {
            DEFAULT_VALUE_SIZE
        })
    }

    fn latency_secs(&self) -> f64 {
        self.latency_secs.unwrap_or(if self.quick {
            QUICK_LATENCY_SECS
        } else {
            DEFAULT_LATENCY_SECS
        })
    }
}

/// Runs the demo; `Err` when a step failed or a key went missing.
pub fn run(args: &DemoArgs) -> Result<(), String> {
    args.check()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    if args.memory {
        let result = rt.block_on(bounded(args, memory::run(args)));
        rt.shutdown_timeout(Duration::from_secs(1));
        let report = result?;
        if let Some(path) = &args.json {
            let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
            write_file(path, &(text + "\n"))?;
        }
        if let Some(path) = &args.markdown {
            write_file(path, &memory::markdown(&report))?;
        }
        return Ok(());
    }
    let result = rt.block_on(bounded(args, scenario::run(args)));
    // Open-loop pacer threads end on their own within their drain time; do
    // not wait for them past a second.
    rt.shutdown_timeout(Duration::from_secs(1));
    let report = result?;
    write_outputs(args, &report)?;
    scenario::verdict(&report)
}

/// Runs `work` under `--max-secs`, or until Ctrl-C / SIGTERM. Either way the
/// future is dropped, and with it the cluster, whose drop kills every child.
async fn bounded<T>(
    args: &DemoArgs,
    work: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    let bound = Duration::from_secs(args.max_secs);
    tokio::select! {
        r = tokio::time::timeout(bound, work) => match r {
            Ok(r) => r,
            Err(_) => Err(format!("the demo exceeded --max-secs {}", args.max_secs)),
        },
        _ = stop_signal() => Err("interrupted".into()),
    }
}

fn write_file(path: &std::path::Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("demo: wrote {}", path.display());
    Ok(())
}

/// `--json`, `--markdown`, `--svg-dir`.
fn write_outputs(args: &DemoArgs, report: &DemoReport) -> Result<(), String> {
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
        write_file(path, &(text + "\n"))?;
    }
    if let Some(path) = &args.markdown {
        write_file(path, &markdown::demo(report))?;
    }
    if let Some(dir) = &args.svg_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        write_file(&dir.join("keys-per-node.svg"), &svg::keys_per_node(report))?;
        write_file(&dir.join("latency.svg"), &svg::latency(report))?;
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM, so the cluster is dropped (and killed).
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
