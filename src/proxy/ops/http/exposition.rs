//! `GET /metrics`: the Prometheus text exposition (format 0.0.4).
//!
//! A scrape reads the hot-path atomics once into a [`Scrape`] (plus each
//! node's DBSIZE, asked with a short timeout), then prometheus-client's
//! encoder writes it through the [`Collector`] interface. Names follow the
//! Prometheus conventions: `shardis_` prefix, `_total` on counters (added by
//! the encoder), base units in the name (`_seconds`, `_bytes`, `_ratio`).

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::{Registry, Unit};

use crate::proxy::ops::hotkeys::NodeLoad;
use crate::proxy::ops::http::families::{
    counter, counter1, gauge, gauge1, histogram, label, printable, Label,
};
use crate::proxy::ops::metrics::HistSnapshot;
use crate::proxy::Proxy;
use crate::resp::reply::integer;

/// Hot keys exported as series (more would make the label set unbounded).
const HOT_KEYS_EXPORTED: usize = 10;
/// A node that does not answer DBSIZE within this long reports no `keys` sample.
const DBSIZE_TIMEOUT: Duration = Duration::from_millis(500);
const NS: f64 = 1e-9;

/// Migration phases, exported as a state set (one series per phase, 1 for the current).
const PHASES: &[&str] = &["ok", "copying", "cutover", "sweeping", "aborted"];

/// One node's numbers at scrape time.
#[derive(Debug)]
pub(crate) struct NodeScrape {
    pub(crate) name: String,
    pub(crate) addr: String,
    pub(crate) weight: u32,
    pub(crate) points: usize,
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) latency: HistSnapshot,
    pub(crate) up: bool,
    pub(crate) state: &'static str,
    pub(crate) in_flight: u64,
    pub(crate) reconnects: u64,
    pub(crate) keys: Option<i64>,
    pub(crate) ring_share: f64,
    pub(crate) load: Option<NodeLoad>,
}

/// One command's numbers at scrape time.
#[derive(Debug)]
struct CommandScrape {
    name: &'static str,
    calls: u64,
    errors: u64,
    latency: HistSnapshot,
    engaged: HistSnapshot,
}

/// Everything one scrape reports, read once.
#[derive(Debug)]
pub(crate) struct Scrape {
    commands: Vec<CommandScrape>,
    pub(crate) nodes: Vec<NodeScrape>,
    clients: u64,
    /// Reply bytes owed to all clients, and clients closed over that total.
    owed: (u64, u64),
    connections: u64,
    rejected: u64,
    bytes_in: u64,
    bytes_out: u64,
    pub(crate) phase: String,
    migration: [(&'static str, u64); 5],
    pause_ms: u64,
    hot_keys: Vec<(Bytes, u64)>,
    alarm_ratio: f64,
    pub(crate) epoch: u64,
    slowlog_len: usize,
    /// The hot GET cache's hits, misses and bytes (zeros when it is off).
    hot_cache: [u64; 3],
    uptime_s: f64,
}

/// Each current node's key count (DBSIZE), `None` where it did not answer in time.
pub(crate) async fn node_keys(proxy: &Proxy) -> Vec<Option<i64>> {
    let routing = proxy.routing.load_full();
    let mut waits = Vec::with_capacity(routing.shards.len());
    for n in routing.primaries() {
        waits.push(
            n.upstream(2, 0)
                .send(Bytes::from_static(b"*1\r\n$6\r\nDBSIZE\r\n"))
                .await,
        );
    }
    let mut keys = Vec::with_capacity(waits.len());
    for w in waits {
        let r = tokio::time::timeout(DBSIZE_TIMEOUT, w).await;
        keys.push(r.ok().and_then(|r| r.ok()).and_then(|b| integer(&b)));
    }
    keys
}

impl Scrape {
    /// Reads every series; `keys` from [`node_keys`] (aligned with the ring).
    pub(crate) fn read(proxy: &Arc<Proxy>, keys: Vec<Option<i64>>) -> Scrape {
        let m = &proxy.ops.metrics;
        let routing = proxy.routing.load_full();
        let loads = proxy.ops.tripwire.loads();
        let nodes = routing
            .primaries()
            .enumerate()
            .map(|(i, n)| {
                let nm = &n.health.metrics;
                NodeScrape {
                    name: n.spec.name.clone(),
                    addr: n.spec.addr.clone(),
                    weight: n.spec.weight,
                    points: routing.ring.points_of(i),
                    requests: nm.requests.load(Ordering::Relaxed),
                    errors: nm.errors.load(Ordering::Relaxed),
                    latency: nm.latency.snapshot(),
                    up: n.health.is_up(),
                    state: n.health.state(),
                    in_flight: nm.in_flight.load(Ordering::Relaxed),
                    reconnects: nm.reconnects.load(Ordering::Relaxed),
                    keys: keys.get(i).copied().flatten(),
                    ring_share: routing.ring.share_of(i),
                    load: loads.iter().find(|l| l.name == n.spec.name).cloned(),
                }
            })
            .collect();
        let t = &proxy.migration;
        Scrape {
            commands: m
                .used_commands()
                .map(|(name, c)| CommandScrape {
                    name,
                    calls: c.calls.load(Ordering::Relaxed),
                    errors: c.errors.load(Ordering::Relaxed),
                    latency: c.latency.snapshot(),
                    engaged: c.engaged.snapshot(),
                })
                .collect(),
            nodes,
            clients: proxy.stats.clients.load(Ordering::Relaxed) as u64,
            owed: (
                proxy.reply_total.total() as u64,
                proxy.stats.reply_total_closes.load(Ordering::Relaxed),
            ),
            connections: proxy.stats.connections.load(Ordering::Relaxed),
            rejected: proxy.stats.rejected.load(Ordering::Relaxed),
            bytes_in: m.bytes_in.load(Ordering::Relaxed),
            bytes_out: m.bytes_out.load(Ordering::Relaxed),
            phase: t.text().state,
            migration: [
                ("to_scan", t.keys_to_scan.load(Ordering::Relaxed)),
                ("scanned", t.keys_scanned.load(Ordering::Relaxed)),
                ("copied", t.keys_copied.load(Ordering::Relaxed)),
                ("resynced", t.keys_resynced.load(Ordering::Relaxed)),
                ("swept", t.keys_swept.load(Ordering::Relaxed)),
            ],
            pause_ms: t.last_pause_ms.load(Ordering::Relaxed),
            hot_keys: proxy.ops.hot_keys.top(HOT_KEYS_EXPORTED),
            alarm_ratio: proxy.ops.tripwire.ratio(),
            epoch: routing.ring.epoch(),
            slowlog_len: proxy.ops.slowlog.len(),
            hot_cache: proxy.ops.hot_cache.as_ref().map_or([0; 3], |c| {
                [
                    c.hits.load(Ordering::Relaxed),
                    c.misses.load(Ordering::Relaxed),
                    c.bytes.load(Ordering::Relaxed),
                ]
            }),
            uptime_s: proxy.started.elapsed().as_secs_f64(),
        }
    }

    /// The text exposition.
    pub(crate) fn encode(self) -> Result<String, fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let secs = Unit::Seconds;
        let ratio = Unit::Other("ratio".into());
        let cmd = |f: &dyn Fn(&CommandScrape) -> u64| {
            self.commands
                .iter()
                .map(|c| (label("command", c.name), f(c)))
                .collect::<Vec<_>>()
        };
        counter(
            &mut e,
            "shardis_command_calls",
            "Requests answered, by command.",
            &cmd(&|c| c.calls),
        )?;
        counter(
            &mut e,
            "shardis_command_errors",
            "Requests answered with an error reply, by command.",
            &cmd(&|c| c.errors),
        )?;
        let lat: Vec<(Label, &HistSnapshot)> = self
            .commands
            .iter()
            .map(|c| (label("command", c.name), &c.latency))
            .collect();
        histogram(
            &mut e,
            "shardis_command_duration",
            "End-to-end request latency at the proxy (decoded to reply ready), by command.",
            Some(&secs),
            NS,
            &lat,
        )?;
        let engaged: Vec<(Label, &HistSnapshot)> = self
            .commands
            .iter()
            .filter(|c| c.engaged.count() > 0)
            .map(|c| (label("command", c.name), &c.engaged))
            .collect();
        histogram(&mut e, "shardis_command_nodes_engaged", "Nodes one request was sent to: 1 for a single key, N for a multi-key request split over N nodes, all for a fan-out.", None, 1.0, &engaged)?;

        let node = |f: &dyn Fn(&NodeScrape) -> u64| {
            self.nodes
                .iter()
                .map(|n| (label("node", &n.name), f(n)))
                .collect::<Vec<_>>()
        };
        let nodef = |f: &dyn Fn(&NodeScrape) -> f64| {
            self.nodes
                .iter()
                .map(|n| (label("node", &n.name), f(n)))
                .collect::<Vec<_>>()
        };
        counter(
            &mut e,
            "shardis_node_requests",
            "Replies received from each node (requests and fragments).",
            &node(&|n| n.requests),
        )?;
        counter(
            &mut e,
            "shardis_node_errors",
            "Error replies from each node, including the proxy's own when the node failed.",
            &node(&|n| n.errors),
        )?;
        let lat: Vec<(Label, &HistSnapshot)> = self
            .nodes
            .iter()
            .map(|n| (label("node", &n.name), &n.latency))
            .collect();
        histogram(
            &mut e,
            "shardis_node_request_duration",
            "Time from a request's write to its reply, per node.",
            Some(&secs),
            NS,
            &lat,
        )?;
        gauge(
            &mut e,
            "shardis_node_up",
            "1 while the node's last connection attempt succeeded.",
            None,
            &nodef(&|n| n.up as u8 as f64),
        )?;
        gauge(
            &mut e,
            "shardis_node_in_flight_requests",
            "Requests written to the node and not yet answered.",
            None,
            &nodef(&|n| n.in_flight as f64),
        )?;
        counter(
            &mut e,
            "shardis_node_reconnects",
            "Connections to the node re-established after a failure.",
            &node(&|n| n.reconnects),
        )?;
        let keys: Vec<(Label, f64)> = self
            .nodes
            .iter()
            .filter_map(|n| Some((label("node", &n.name), n.keys? as f64)))
            .collect();
        gauge(
            &mut e,
            "shardis_node_keys",
            "Keys stored on the node (DBSIZE at scrape time).",
            None,
            &keys,
        )?;
        gauge(
            &mut e,
            "shardis_node_ring_share",
            "The node's share of the ring's hash space.",
            Some(&ratio),
            &nodef(&|n| n.ring_share),
        )?;
        gauge(
            &mut e,
            "shardis_node_request_share",
            "The node's share of requests over the hot-shard window (10 s).",
            Some(&ratio),
            &nodef(&|n| n.load.as_ref().map_or(0.0, |l| l.share)),
        )?;
        gauge(
            &mut e,
            "shardis_node_hot",
            "1 while the node's request share exceeds the alarm ratio times its ring share.",
            None,
            &nodef(&|n| n.load.as_ref().is_some_and(|l| l.hot) as u8 as f64),
        )?;
        gauge1(
            &mut e,
            "shardis_hot_shard_alarm_ratio",
            "hot_keys.shard_alarm_ratio: a node is hot above this many times its expected share.",
            None,
            self.alarm_ratio,
        )?;
        let hot: Vec<(Label, f64)> = self
            .hot_keys
            .iter()
            .map(|(k, c)| (label("key", &printable(k)), *c as f64))
            .collect();
        gauge(&mut e, "shardis_hot_key_requests", "Estimated requests for the hottest keys over roughly the last 10 s (1-in-16 sampling, space-saving sketch).", None, &hot)?;

        gauge1(
            &mut e,
            "shardis_clients_connected",
            "Client connections open now.",
            None,
            self.clients as f64,
        )?;
        gauge1(
            &mut e,
            "shardis_client_reply_owed_bytes",
            "Reply bytes owed to all clients: arrived from the nodes, not yet written.",
            None,
            self.owed.0 as f64,
        )?;
        counter1(
            &mut e,
            "shardis_clients_evicted",
            "Clients closed because the reply bytes owed to all clients went over max_output_buffer_total.",
            self.owed.1,
        )?;
        counter1(
            &mut e,
            "shardis_client_connections",
            "Client connections accepted.",
            self.connections,
        )?;
        counter1(
            &mut e,
            "shardis_clients_rejected",
            "Client connections refused at max_clients.",
            self.rejected,
        )?;
        counter1(
            &mut e,
            "shardis_client_received_bytes",
            "Bytes read from clients.",
            self.bytes_in,
        )?;
        counter1(
            &mut e,
            "shardis_client_sent_bytes",
            "Bytes written to clients.",
            self.bytes_out,
        )?;

        let phases: Vec<(Label, f64)> = PHASES
            .iter()
            .map(|p| (label("phase", p), (self.phase == *p) as u8 as f64))
            .collect();
        gauge(
            &mut e,
            "shardis_migration_phase",
            "The topology change's phase (1 for the current one).",
            None,
            &phases,
        )?;
        let stages: Vec<(Label, f64)> = self
            .migration
            .iter()
            .map(|(s, v)| (label("stage", s), *v as f64))
            .collect();
        gauge(
            &mut e,
            "shardis_migration_keys",
            "Keys of the current or last change: to_scan, scanned, copied, resynced, swept.",
            None,
            &stages,
        )?;
        gauge1(
            &mut e,
            "shardis_migration_cutover_pause",
            "How long the last cutover paused requests on moving keys.",
            Some(&secs),
            self.pause_ms as f64 / 1000.0,
        )?;
        gauge1(
            &mut e,
            "shardis_topology_epoch",
            "Epoch of the ring that routes now.",
            None,
            self.epoch as f64,
        )?;
        counter1(
            &mut e,
            "shardis_hot_cache_hits",
            "Hot GETs answered from the proxy's cache ([hot_keys] cache_ttl_ms).",
            self.hot_cache[0],
        )?;
        counter1(
            &mut e,
            "shardis_hot_cache_misses",
            "Hot GETs the cache did not hold fresh: forwarded, and their reply kept.",
            self.hot_cache[1],
        )?;
        gauge1(
            &mut e,
            "shardis_hot_cache_bytes",
            "Bytes the hot GET cache holds, keys and per-entry overhead included (at most cache_max_bytes).",
            None,
            self.hot_cache[2] as f64,
        )?;
        gauge1(
            &mut e,
            "shardis_slowlog_entries",
            "Entries in the slow log.",
            None,
            self.slowlog_len as f64,
        )?;
        gauge1(
            &mut e,
            "shardis_uptime",
            "Seconds since the proxy started.",
            Some(&secs),
            self.uptime_s,
        )?;
        Ok(())
    }
}
