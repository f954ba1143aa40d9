//! INFO [section ...]: the node's Redis 7 sections and the fields tools read
//! (`redis-cli --stat`, monitoring agents, the proxy's own INFO, which sums
//! the nodes' Memory, Stats and Keyspace fields). Layout and section
//! selection come from `resp::info`; every figure here is measured by the
//! node — fields it cannot measure are left out rather than invented.

use super::connection::verbatim;
use super::{CmdResult, Ctx};
use crate::backend::node::REDIS_VERSION;
use crate::backend::pubsub::Space;
use crate::resp::info::{human, InfoText, Selection, Usage};
use std::sync::atomic::Ordering::Relaxed;

/// The INFO text for the requested sections (none = the default set).
pub(crate) fn info_text(ctx: &Ctx, sections: &[&[u8]]) -> String {
    let node = ctx.node;
    let want = Selection::parse(sections);
    let c = &node.store.counters;
    let usage = Usage::now();
    let used = node.store.used_memory() as u64;
    let peak = node.memory_peak.fetch_max(used, Relaxed).max(used);
    let uptime = ctx.now.saturating_sub(node.started_ms) / 1000;
    let policy = node.settings.policy().name();
    let mut t = InfoText::default();
    if want.has("server") {
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut fields = vec![("redis_version", REDIS_VERSION.to_string())];
        fields.extend(crate::resp::info::process_fields());
        fields.extend([
            ("run_id", node.run_id.clone()),
            ("tcp_port", node.port.to_string()),
            ("server_time_usec", (ctx.now * 1000).to_string()),
            ("uptime_in_seconds", uptime.to_string()),
            ("uptime_in_days", (uptime / 86_400).to_string()),
            ("hz", "10".into()),
            ("configured_hz", "10".into()),
            ("executable", exe),
            ("config_file", String::new()),
            ("io_threads_active", "0".into()),
        ]);
        t.section("server", &fields);
    }
    if want.has("clients") {
        t.section(
            "clients",
            &[
                (
                    "connected_clients",
                    node.stats.connected_clients.load(Relaxed) as u64,
                ),
                ("cluster_connections", 0),
                ("maxclients", 10_000),
                (
                    "blocked_clients",
                    node.stats.blocked_clients.load(Relaxed) as u64,
                ),
                // The node has no client tracking.
                ("tracking_clients", 0),
                (
                    "clients_in_timeout_table",
                    node.stats.timeout_clients.load(Relaxed) as u64,
                ),
                // WATCH records, one per (client, key): shows they are
                // dropped by UNWATCH, EXEC and disconnect.
                (
                    "shardis_watched_keys",
                    node.store.counters.watching.load(Relaxed) as u64,
                ),
            ],
        );
    }
    if want.has("memory") {
        let max = node.settings.maxmemory.load(Relaxed);
        t.section(
            "memory",
            &[
                ("used_memory", used.to_string()),
                ("used_memory_human", human(used)),
                ("used_memory_rss", usage.rss_bytes.to_string()),
                ("used_memory_rss_human", human(usage.rss_bytes)),
                ("used_memory_peak", peak.to_string()),
                ("used_memory_peak_human", human(peak)),
                (
                    "used_memory_peak_perc",
                    format!("{:.2}%", used as f64 * 100.0 / peak.max(1) as f64),
                ),
                ("maxmemory", max.to_string()),
                ("maxmemory_human", human(max)),
                ("maxmemory_policy", policy.to_string()),
                (
                    "mem_fragmentation_ratio",
                    format!("{:.2}", usage.rss_bytes as f64 / used.max(1) as f64),
                ),
                ("mem_allocator", "libc".into()),
                (
                    "number_of_cached_scripts",
                    node.scripting.cached.load(Relaxed).to_string(),
                ),
            ],
        );
    }
    if want.has("persistence") {
        // The node keeps nothing on disk: nothing is ever loading or saving.
        t.section(
            "persistence",
            &[
                ("loading", "0".to_string()),
                ("async_loading", "0".into()),
                (
                    "rdb_changes_since_last_save",
                    node.stats.dirty.load(Relaxed).to_string(),
                ),
                ("rdb_bgsave_in_progress", "0".into()),
                ("rdb_last_save_time", (node.started_ms / 1000).to_string()),
                ("rdb_last_bgsave_status", "ok".into()),
                ("aof_enabled", "0".into()),
                ("aof_rewrite_in_progress", "0".into()),
                ("aof_last_write_status", "ok".into()),
            ],
        );
    }
    if want.has("stats") {
        let commands = node.stats.total_commands.load(Relaxed);
        let hub = &node.pubsub;
        t.section(
            "stats",
            &[
                (
                    "total_connections_received",
                    node.stats.total_connections.load(Relaxed),
                ),
                ("total_commands_processed", commands),
                ("instantaneous_ops_per_sec", node.ops.rate(commands)),
                ("rejected_connections", 0),
                ("expired_keys", c.expired_keys.load(Relaxed)),
                ("evicted_keys", c.evicted_keys.load(Relaxed)),
                ("keyspace_hits", c.keyspace_hits.load(Relaxed)),
                ("keyspace_misses", c.keyspace_misses.load(Relaxed)),
                ("pubsub_channels", hub.count(Space::Channel) as u64),
                ("pubsub_patterns", hub.count(Space::Pattern) as u64),
                ("pubsubshard_channels", hub.count(Space::Shard) as u64),
                ("sync_full", node.repl.sync_full.load(Relaxed)),
                ("sync_partial_ok", node.repl.sync_partial_ok.load(Relaxed)),
                ("sync_partial_err", node.repl.sync_partial_err.load(Relaxed)),
            ],
        );
    }
    if want.has("replication") {
        let fields = crate::backend::replication::commands::info_fields(node);
        let fields: Vec<(&str, &String)> = fields.iter().map(|(k, v)| (k.as_str(), v)).collect();
        t.section("replication", &fields);
    }
    t.cpu_and_stats(&want, &usage, &Default::default());
    if want.has("cluster") {
        t.section("cluster", &[("cluster_enabled", 0)]);
    }
    if want.has("keyspace") {
        let (keys, expires) = node.store.counts();
        let line = format!("keys={keys},expires={expires},avg_ttl=0");
        if keys > 0 {
            t.section("keyspace", &[("db0", line)]);
        } else {
            t.section::<String>("keyspace", &[]);
        }
    }
    t.finish()
}

/// INFO [section ...]
pub(crate) fn info(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut text = info_text(ctx, &args[1..]);
    // The counts of the commands scripts ran, which the proxy adds to its
    // commandstats and errorstats; asked by name only.
    let section = crate::backend::scripting::stats::SECTION;
    if args[1..]
        .iter()
        .any(|a| a.eq_ignore_ascii_case(section.as_bytes()))
    {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        text.push_str(&ctx.node.scripting.stats.section_text());
    }
    verbatim(ctx, &text);
    Ok(())
}
