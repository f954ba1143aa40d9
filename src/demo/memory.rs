//! `shardis demo --memory`: what a key costs in memory, built-in node against
//! redis-server, and what that means for 10^9 keys of 1 KB.
//!
//! For each backend in turn (never both at once: 10^7 keys of 1 KB is ~10 GB
//! of values alone), starts N nodes and a proxy, samples each node's
//! `used_memory` (INFO memory) and RSS (`VmRSS` in /proc/PID/status), writes
//! the keys through the proxy, samples again, and stops everything before the
//! next backend starts. Bytes per key = growth / keys on that node.
//!
//! Guarded against exhausting the machine: refuses to start when the estimate
//! does not fit in `MemAvailable`, and aborts a write when `MemAvailable`
//! falls below [`MIN_FREE_BYTES`].

use std::time::Duration;

use serde::Serialize;

use super::cluster::{meminfo, rss_bytes, DemoCluster};
use super::conn;
use super::keys::{self, WriteStats};
use super::progress::Progress;
use super::report::{group, Distribution};
use super::DemoArgs;
use crate::procs::NodeKind;

/// Abort a write when the machine has less than this available.
pub(crate) const MIN_FREE_BYTES: u64 = 1 << 30;
/// Generous per-key estimate on top of the value, for the start-up check.
const EST_OVERHEAD_BYTES: u64 = 250;
/// Projection: 10^9 keys …
pub(crate) const PROJECT_KEYS: u64 = 1_000_000_000;
/// … on nodes of 100 GB (10^11 bytes, as `shardis sim` counts).
pub(crate) const NODE_CAPACITY_BYTES: u64 = 100_000_000_000;

/// One node before and after the write.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct NodeMemory {
    pub name: String,
    pub keys: u64,
    pub used_memory_before: u64,
    pub used_memory_after: u64,
    pub rss_before: u64,
    pub rss_after: u64,
}

/// One backend's figures.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct BackendMemory {
    pub backend: String,
    pub keys: u64,
    pub value_size: usize,
    pub write: WriteStats,
    pub nodes: Vec<NodeMemory>,
    /// used_memory growth over all nodes / keys.
    pub used_bytes_per_key: f64,
    /// RSS growth over all nodes / keys.
    pub rss_bytes_per_key: f64,
    /// Worst node's RSS growth / its keys.
    pub rss_bytes_per_key_max: f64,
    pub proxy_rss: u64,
    /// Keys per node: max / average.
    pub max_over_avg: f64,
    /// The projection to [`PROJECT_KEYS`] keys from the RSS figure.
    pub projected_bytes: f64,
    /// Nodes of [`NODE_CAPACITY_BYTES`] for the projected bytes, perfectly even.
    pub nodes_needed_even: u64,
    /// The same, with the fullest node at the measured max/avg.
    pub nodes_needed: u64,
}

/// Everything `--memory` measured.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct MemoryReport {
    pub nodes: usize,
    pub keys: u64,
    pub value_size: usize,
    pub machine_mem_total: u64,
    pub backends: Vec<BackendMemory>,
    /// Backends not measured, and why.
    pub skipped: Vec<String>,
    pub project_keys: u64,
    pub node_capacity_bytes: u64,
}

/// Decimal units, as `shardis sim` prints them: `950 MB`, `1.16 GB`, `1.37 TB`.
fn gb(b: f64) -> String {
    if b >= 1e12 {
        format!("{:.2} TB", b / 1e12)
    } else if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else {
        format!("{:.0} MB", b / 1e6)
    }
}

/// Runs both backends one after the other.
pub(crate) async fn run(args: &DemoArgs) -> Result<MemoryReport, String> {
    let (n, size) = (args.keys(), args.value_size());
    let need = n * (size as u64 + EST_OVERHEAD_BYTES) + MIN_FREE_BYTES;
    let avail = meminfo("MemAvailable").unwrap_or(0);
    if need > avail {
        return Err(format!(
            "--memory: {} keys of {size} B need about {}, the machine has {} available; \
             use --keys (or --quick) for fewer keys",
            group(n),
            gb(need as f64),
            gb(avail as f64)
        ));
    }
    let mut report = MemoryReport {
        nodes: args.nodes,
        keys: n,
        value_size: size,
        machine_mem_total: meminfo("MemTotal").unwrap_or(0),
        backends: Vec::new(),
        skipped: Vec::new(),
        project_keys: PROJECT_KEYS,
        node_capacity_bytes: NODE_CAPACITY_BYTES,
    };
    for kind in [NodeKind::Builtin, NodeKind::Redis] {
        println!(
            "\n== memory: {} keys of {size} B on {} {} nodes ==",
            group(n),
            args.nodes,
            kind.label()
        );
        let cluster = match DemoCluster::start_nodes(kind, args.nodes) {
            Ok(c) => c,
            Err(e) if kind == NodeKind::Redis => {
                println!("  skipped: {e}");
                report.skipped.push(format!("{}: {e}", kind.label()));
                continue;
            }
            Err(e) => return Err(e),
        };
        let b = measure(args, kind, cluster).await?;
        print!("{}", backend_text(&b));
        report.backends.push(b);
    }
    println!(
        "\n== projection: {} keys of {size} B on nodes of {} ==",
        group(PROJECT_KEYS),
        gb(NODE_CAPACITY_BYTES as f64)
    );
    for b in &report.backends {
        println!(
            "  {:<13} {:.0} B/key (RSS) → {} → {} nodes evenly, {} with the fullest node at max/avg {:.3}",
            b.backend,
            b.rss_bytes_per_key,
            gb(b.projected_bytes),
            b.nodes_needed_even,
            b.nodes_needed,
            b.max_over_avg
        );
    }
    Ok(report)
}

/// `used_memory` and RSS of every node.
async fn sample(cluster: &DemoCluster) -> Result<Vec<(u64, u64)>, String> {
    let mut out = Vec::new();
    for node in &cluster.nodes {
        let info = conn::text(&conn::call(&node.addr, &["INFO", "memory"]).await?);
        let used = conn::field(&info, "used_memory")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{}: no used_memory in INFO memory", node.name))?;
        out.push((used, rss_bytes(node.pid()).unwrap_or(0)));
    }
    Ok(out)
}

/// Fails once the machine runs low on memory (checked every 250 ms).
async fn watchdog() -> String {
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Some(avail) = meminfo("MemAvailable") {
            if avail < MIN_FREE_BYTES {
                return format!(
                    "stopped: the machine is down to {} available",
                    gb(avail as f64)
                );
            }
        }
    }
}

async fn measure(
    args: &DemoArgs,
    kind: NodeKind,
    mut cluster: DemoCluster,
) -> Result<BackendMemory, String> {
    let (n, size) = (args.keys(), args.value_size());
    cluster.start_proxy()?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = sample(&cluster).await?;
    let bar = Progress::new(n);
    let write = tokio::select! {
        w = bar.show("writing keys", keys::write_all(&cluster.proxy_addr, n, size, args.connections, &bar)) => w?,
        e = watchdog() => return Err(e),
    };
    println!(
        "  wrote {} keys in {:.1} s ({} keys/s)",
        group(n),
        write.secs,
        group(write.keys_per_sec.round() as u64)
    );
    // Let allocators return what the write buffers used.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = sample(&cluster).await?;
    let proxy_rss = cluster.proxy_pid().and_then(rss_bytes).unwrap_or(0);
    let mut nodes = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let k = conn::int(&conn::call(&node.addr, &["DBSIZE"]).await?)?.max(0) as u64;
        nodes.push(NodeMemory {
            name: node.name.clone(),
            keys: k,
            used_memory_before: before[i].0,
            used_memory_after: after[i].0,
            rss_before: before[i].1,
            rss_after: after[i].1,
        });
    }
    cluster.stop();
    let total_keys: u64 = nodes.iter().map(|m| m.keys).sum::<u64>().max(1);
    let growth = |f: fn(&NodeMemory) -> (u64, u64)| -> f64 {
        nodes
            .iter()
            .map(|m| {
                let (b, a) = f(m);
                a.saturating_sub(b) as f64
            })
            .sum::<f64>()
    };
    let used = growth(|m| (m.used_memory_before, m.used_memory_after));
    let rss = growth(|m| (m.rss_before, m.rss_after));
    let rss_per_key = rss / total_keys as f64;
    let dist = Distribution::new(
        nodes
            .iter()
            .map(|m| (m.name.clone(), String::new(), m.keys))
            .collect(),
    );
    let projected = rss_per_key * PROJECT_KEYS as f64;
    let cap = NODE_CAPACITY_BYTES as f64;
    Ok(BackendMemory {
        backend: kind.label().into(),
        keys: n,
        value_size: size,
        write,
        used_bytes_per_key: used / total_keys as f64,
        rss_bytes_per_key: rss_per_key,
        rss_bytes_per_key_max: nodes
            .iter()
            .map(|m| m.rss_after.saturating_sub(m.rss_before) as f64 / m.keys.max(1) as f64)
            .fold(0.0, f64::max),
        proxy_rss,
        max_over_avg: dist.max_over_avg,
        projected_bytes: projected,
        nodes_needed_even: (projected / cap).ceil() as u64,
        nodes_needed: (projected * dist.max_over_avg / cap).ceil() as u64,
        nodes,
    })
}

/// The per-node table of one backend.
pub(crate) fn backend_text(b: &BackendMemory) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<8} {:>10} {:>14} {:>8} {:>14} {:>8}",
        "node", "keys", "used_memory +", "B/key", "RSS +", "B/key"
    );
    for m in &b.nodes {
        let du = m.used_memory_after.saturating_sub(m.used_memory_before);
        let dr = m.rss_after.saturating_sub(m.rss_before);
        let k = m.keys.max(1) as f64;
        let _ = writeln!(
            out,
            "  {:<8} {:>10} {:>14} {:>8.0} {:>14} {:>8.0}",
            m.name,
            group(m.keys),
            gb(du as f64),
            du as f64 / k,
            gb(dr as f64),
            dr as f64 / k
        );
    }
    let _ = writeln!(
        out,
        "  all nodes: {:.0} B/key by used_memory, {:.0} B/key by RSS (worst node {:.0}); \
         value {} B, key ~{} B; proxy RSS {}",
        b.used_bytes_per_key,
        b.rss_bytes_per_key,
        b.rss_bytes_per_key_max,
        b.value_size,
        keys::key(b.keys / 2).len(),
        gb(b.proxy_rss as f64)
    );
    out
}

/// The memory figures as Markdown.
pub(crate) fn markdown(r: &MemoryReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} keys of {} B written through the proxy into {} nodes of each kind, one kind \
         after the other. Growth = after the write − before, summed over the nodes. \
         RSS is what the kernel reports (`VmRSS`); `used_memory` is each server's own \
         figure (redis-server: bytes its allocator handed out; built-in node: its \
         accounting of key + value + a fixed per-entry estimate).\n",
        group(r.keys),
        r.value_size,
        r.nodes
    );
    let _ = writeln!(
        out,
        "| backend | keys | write keys/s | used_memory B/key | RSS B/key | worst node RSS B/key | proxy RSS | keys max/avg |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for b in &r.backends {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {:.3} |",
            b.backend,
            group(b.nodes.iter().map(|m| m.keys).sum()),
            group(b.write.keys_per_sec.round() as u64),
            b.used_bytes_per_key,
            b.rss_bytes_per_key,
            b.rss_bytes_per_key_max,
            gb(b.proxy_rss as f64),
            b.max_over_avg
        );
    }
    for s in &r.skipped {
        let _ = writeln!(out, "\nNot measured: {s}");
    }
    let _ = writeln!(
        out,
        "\n**Projection to {} keys of {} B** (RSS bytes per key × keys; nodes of {}):\n",
        group(r.project_keys),
        r.value_size,
        gb(r.node_capacity_bytes as f64)
    );
    let _ = writeln!(
        out,
        "| backend | total | nodes (even split) | nodes (fullest node at measured max/avg) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for b in &r.backends {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            b.backend,
            gb(b.projected_bytes),
            b.nodes_needed_even,
            b.nodes_needed
        );
    }
    out
}
