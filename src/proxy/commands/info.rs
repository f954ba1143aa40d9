//! What the proxy reports about itself and the nodes behind it: INFO in
//! Redis 7's sections and layout (so `redis-cli --stat`, monitoring agents
//! and client libraries read it as they read Redis), and MEMORY (USAGE is
//! routed by key; DOCTOR, STATS and HELP answer for the whole cluster).
//!
//! Called by `local::handle`. Proxy figures (clients, commands, CPU) are the
//! proxy's own; Memory, the node counters of Stats, and Keyspace are summed
//! over the nodes' own INFO, asked in one request per node. A node that does
//! not answer is left out of the sums; this module never waits on one
//! longer than its upstream's request timeout.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use crate::proxy::commands::common::REDIS_COMPAT_VERSION;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ops::scriptstats::ScriptSums;
use crate::proxy::upstream::topology::all_nodes;
use crate::proxy::Proxy;
use crate::resp::encode;
use crate::resp::info::{field, field_u64, human, keyspace, InfoText, Selection, Usage};
use crate::resp::reply::is_error;

/// What the proxy needs from each node's INFO.
/// `shardis_scriptstats`: the built-in node's counts of the commands its
/// scripts ran (`ops::scriptstats`); redis-server has no such section.
const NODE_INFO: &[u8] = b"*6\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n$11\r\npersistence\r\n$5\r\nstats\r\n$8\r\nkeyspace\r\n$19\r\nshardis_scriptstats\r\n";

/// The nodes' figures, summed.
#[derive(Debug, Default, PartialEq)]
pub(super) struct NodeSums {
    pub(super) answered: usize,
    pub(super) used: u64,
    pub(super) rss: u64,
    pub(super) peak: u64,
    /// 0 when any node is unlimited: the cluster as a whole is then unlimited.
    pub(super) maxmemory: u64,
    pub(super) any_unlimited: bool,
    pub(super) policy: Option<String>,
    pub(super) expired: u64,
    pub(super) evicted: u64,
    pub(super) hits: u64,
    pub(super) misses: u64,
    pub(super) keys: u64,
    pub(super) expires: u64,
    /// Writes the nodes counted (`rdb_changes_since_last_save`).
    pub(super) dirty: u64,
    /// The most scripts one node has cached: as every script is loaded on
    /// every node (`route::scripts`), the number a client loaded.
    pub(super) scripts: u64,
    /// What the commands the nodes' scripts ran counted.
    pub(super) script_calls: ScriptSums,
}

impl NodeSums {
    fn add(&mut self, text: &str) {
        self.answered += 1;
        self.used += field_u64(text, "used_memory");
        self.scripts = self
            .scripts
            .max(field_u64(text, "number_of_cached_scripts"));
        self.rss += field_u64(text, "used_memory_rss");
        self.peak += field_u64(text, "used_memory_peak");
        let max = field_u64(text, "maxmemory");
        self.any_unlimited |= max == 0;
        self.maxmemory = if self.any_unlimited {
            0
        } else {
            self.maxmemory + max
        };
        if self.policy.is_none() {
            self.policy = field(text, "maxmemory_policy").map(str::to_string);
        }
        self.expired += field_u64(text, "expired_keys");
        self.evicted += field_u64(text, "evicted_keys");
        self.hits += field_u64(text, "keyspace_hits");
        self.misses += field_u64(text, "keyspace_misses");
        self.dirty += field_u64(text, "rdb_changes_since_last_save");
        let (k, e) = keyspace(text);
        self.keys += k;
        self.expires += e;
        self.script_calls.add(text);
    }
}

/// Sends `NODE_INFO` to every node of the current ring.
pub(super) async fn ask_nodes(proxy: &Proxy, s: &ClientState) -> Vec<oneshot::Receiver<Bytes>> {
    let routing = proxy.routing.load_full();
    let nodes = all_nodes(&routing);
    let mut waits = Vec::with_capacity(nodes.len());
    for n in &nodes {
        waits.push(
            n.upstream(2, s.id)
                .send(Bytes::from_static(NODE_INFO))
                .await,
        );
    }
    waits
}

pub(super) async fn collect(waits: Vec<oneshot::Receiver<Bytes>>) -> NodeSums {
    let mut sums = NodeSums::default();
    for w in waits {
        match w.await {
            Ok(r) if !is_error(&r) => sums.add(&String::from_utf8_lossy(&r)),
            _ => {}
        }
    }
    sums
}

/// INFO [section ...]
pub(crate) async fn info(proxy: &Arc<Proxy>, s: &ClientState, args: &[Bytes]) -> Pending {
    let want = Selection::parse(&args[1..]);
    let proto = s.proto;
    let proxy = proxy.clone();
    let waits = if want.has_any(&[
        "memory",
        "persistence",
        "stats",
        "keyspace",
        "commandstats",
        "errorstats",
    ]) {
        ask_nodes(&proxy, s).await
    } else {
        Vec::new()
    };
    Pending::Later(Box::pin(async move {
        let sums = collect(waits).await;
        let mut out = BytesMut::new();
        encode::verbatim(&mut out, info_text(&proxy, want, &sums).as_bytes(), proto);
        out.freeze()
    }))
}

fn info_text(p: &Proxy, want: Selection, n: &NodeSums) -> String {
    let usage = Usage::now();
    let uptime = p.started.elapsed().as_secs();
    let commands = p.stats.commands.load(Ordering::Relaxed);
    let mut t = InfoText::default();
    if want.has("server") {
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros();
        let exe = std::env::current_exe()
            .map(|e| e.display().to_string())
            .unwrap_or_default();
        let mut fields = vec![
            ("redis_version", REDIS_COMPAT_VERSION.to_string()),
            ("shardis_version", env!("CARGO_PKG_VERSION").into()),
        ];
        fields.extend(crate::resp::info::process_fields());
        fields.extend([
            ("tcp_port", p.port.to_string()),
            ("server_time_usec", now_us.to_string()),
            ("uptime_in_seconds", uptime.to_string()),
            ("uptime_in_days", (uptime / 86_400).to_string()),
            ("executable", exe),
            ("io_threads_active", "0".into()),
        ]);
        t.section("server", &fields);
    }
    if want.has("clients") {
        t.section(
            "clients",
            &[
                ("connected_clients", p.stats.clients.load(Ordering::Relaxed)),
                ("cluster_connections", 0),
                ("maxclients", p.config().max_clients),
                // Clients waiting in BLPOP, XREAD BLOCK, WAIT…; the proxy
                // refuses client tracking.
                (
                    "blocked_clients",
                    p.stats.blocked_clients.load(Ordering::Relaxed),
                ),
                ("tracking_clients", 0),
                (
                    "clients_in_timeout_table",
                    p.stats.timeout_clients.load(Ordering::Relaxed),
                ),
                // Bytes of requests read but not yet complete, all clients.
                ("shardis_query_buffer_bytes", p.query_buffers.total()),
                // Bytes of replies not yet written, all clients.
                ("shardis_reply_bytes_owed", p.reply_total.total()),
            ],
        );
    }
    if want.has("memory") {
        t.section(
            "memory",
            &[
                ("used_memory", n.used.to_string()),
                ("used_memory_human", human(n.used)),
                ("used_memory_rss", n.rss.to_string()),
                ("used_memory_rss_human", human(n.rss)),
                ("used_memory_peak", n.peak.to_string()),
                ("used_memory_peak_human", human(n.peak)),
                ("maxmemory", n.maxmemory.to_string()),
                ("maxmemory_human", human(n.maxmemory)),
                (
                    "maxmemory_policy",
                    n.policy.clone().unwrap_or_else(|| "noeviction".into()),
                ),
                (
                    "mem_fragmentation_ratio",
                    format!("{:.2}", n.rss as f64 / n.used.max(1) as f64),
                ),
                ("number_of_cached_scripts", n.scripts.to_string()),
                ("shardis_nodes_reporting", n.answered.to_string()),
                ("shardis_proxy_rss", usage.rss_bytes.to_string()),
            ],
        );
    }
    if want.has("persistence") {
        t.section(
            "persistence",
            &[
                ("loading", "0".to_string()),
                ("async_loading", "0".into()),
                ("rdb_changes_since_last_save", n.dirty.to_string()),
                ("rdb_bgsave_in_progress", "0".into()),
                ("rdb_last_bgsave_status", "ok".into()),
                ("aof_enabled", "0".into()),
                ("aof_rewrite_in_progress", "0".into()),
                ("aof_last_write_status", "ok".into()),
            ],
        );
    }
    if want.has("stats") {
        t.section(
            "stats",
            &[
                (
                    "total_connections_received",
                    p.stats.connections.load(Ordering::Relaxed),
                ),
                ("total_commands_processed", commands),
                ("instantaneous_ops_per_sec", p.stats.ops.rate(commands)),
                (
                    "rejected_connections",
                    p.stats.rejected.load(Ordering::Relaxed),
                ),
                ("expired_keys", n.expired),
                ("evicted_keys", n.evicted),
                ("keyspace_hits", n.hits),
                ("keyspace_misses", n.misses),
                // Distinct names the proxy's subscribers hold.
                ("pubsub_channels", p.subscriptions.channels.len() as u64),
                ("pubsub_patterns", p.subscriptions.patterns.len() as u64),
                (
                    "client_query_buffer_limit_disconnections",
                    p.stats.query_limit_closes.load(Ordering::Relaxed),
                ),
                (
                    "client_output_buffer_limit_disconnections",
                    p.stats.output_limit_closes.load(Ordering::Relaxed),
                ),
                // Closed by the total of owed replies (`max_output_buffer_total`).
                (
                    "evicted_clients",
                    p.stats.reply_total_closes.load(Ordering::Relaxed),
                ),
                (
                    "total_error_replies",
                    n.script_calls.total_errors(p.ops.calls.errors.total()),
                ),
                // Requests whose handling panicked, answered `-ERR internal error`.
                (
                    "shardis_internal_errors",
                    p.stats.internal_errors.load(Ordering::Relaxed),
                ),
            ],
        );
        t.more(&crate::proxy::conn::auth::info_fields(&p.auth));
    }
    if want.has("replication") {
        t.section(
            "replication",
            &[
                ("role", "master"),
                ("connected_slaves", "0"),
                ("master_failover_state", "no-failover"),
                ("master_repl_offset", "0"),
                ("second_repl_offset", "-1"),
                ("repl_backlog_active", "0"),
            ],
        );
    }
    let calls = crate::resp::info::CallLines {
        commands: if want.has("commandstats") {
            n.script_calls
                .command_lines(p.ops.calls.command_lines(&p.ops.metrics))
        } else {
            Vec::new()
        },
        errors: n.script_calls.error_lines(p.ops.calls.errors.lines()),
    };
    t.cpu_and_stats(&want, &usage, &calls);
    if want.has("cluster") {
        let routing = p.routing.load_full();
        t.section(
            "cluster",
            &[
                // Agrees with CLUSTER INFO: cluster-mode clients see the
                // proxy as a cluster node owning every slot.
                ("cluster_enabled", 1),
                ("shardis_epoch", routing.ring.epoch()),
                ("shardis_nodes", routing.shards.len() as u64),
                ("shardis_migrating", routing.migration.is_some() as u64),
            ],
        );
    }
    if want.has("keyspace") {
        if n.keys > 0 {
            let line = format!("keys={},expires={},avg_ttl=0", n.keys, n.expires);
            t.section("keyspace", &[("db0", line)]);
        } else {
            t.section::<String>("keyspace", &[]);
        }
    }
    t.finish()
}

/// The proxy's INFO for tests that do not run a session.
#[cfg(test)]
fn text_for_test(p: &Arc<Proxy>, args: &[&str], nodes: &[&str]) -> String {
    let mut sums = NodeSums::default();
    nodes.iter().for_each(|t| sums.add(t));
    info_text(p, Selection::parse(args), &sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy() -> Arc<Proxy> {
        let config = crate::proxy::Config::parse(
            "[[nodes]]\naddr = \"127.0.0.1:1\"\n[[nodes]]\naddr = \"127.0.0.1:2\"\n",
        )
        .unwrap();
        Proxy::new(crate::proxy::Pool::from_config(config), 7000, None).unwrap()
    }

    const NODE_A: &str = "# Memory\r\nused_memory:1000\r\nused_memory_rss:4000\r\nused_memory_peak:1500\r\nmaxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n\r\n# Stats\r\nexpired_keys:1\r\nevicted_keys:2\r\nkeyspace_hits:3\r\nkeyspace_misses:4\r\n\r\n# Keyspace\r\ndb0:keys=10,expires=1,avg_ttl=0\r\n";
    const NODE_B: &str = "# Memory\r\nused_memory:3000\r\nused_memory_rss:4000\r\nused_memory_peak:3000\r\nmaxmemory:100\r\n\r\n# Stats\r\nexpired_keys:10\r\nevicted_keys:20\r\nkeyspace_hits:30\r\nkeyspace_misses:40\r\n\r\n# Keyspace\r\ndb0:keys=5,expires=0,avg_ttl=0\r\n";

    #[tokio::test]
    async fn node_fields_are_summed() {
        let t = text_for_test(
            &proxy(),
            &["memory", "stats", "keyspace"],
            &[NODE_A, NODE_B],
        );
        for (f, want) in [
            ("used_memory", "4000"),
            ("used_memory_peak", "4500"),
            ("maxmemory", "0"),
            ("maxmemory_policy", "allkeys-lru"),
            ("mem_fragmentation_ratio", "2.00"),
            ("expired_keys", "11"),
            ("evicted_keys", "22"),
            ("keyspace_hits", "33"),
            ("keyspace_misses", "44"),
            ("db0", "keys=15,expires=1,avg_ttl=0"),
        ] {
            assert_eq!(field(&t, f), Some(want), "{f} in {t}");
        }
    }

    #[tokio::test]
    async fn every_default_section_is_laid_out_as_redis() {
        let t = text_for_test(&proxy(), &[], &[]);
        let titles: Vec<&str> = t.lines().filter(|l| l.starts_with("# ")).collect();
        assert_eq!(
            titles,
            [
                "# Server",
                "# Clients",
                "# Memory",
                "# Persistence",
                "# Stats",
                "# Replication",
                "# CPU",
                "# Modules",
                "# Errorstats",
                "# Cluster",
                "# Keyspace"
            ]
        );
        assert!(t.ends_with("# Keyspace\r\n"), "{t:?}");
        assert!(!t.contains("\r\n\r\n\r\n"), "{t:?}");
        assert!(!t.replace("\r\n", "").contains('\n'), "CRLF only: {t:?}");
        assert_eq!(text_for_test(&proxy(), &["nosuch"], &[]), "");
    }
}
