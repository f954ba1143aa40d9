//! `GET /cluster` (the topology, the change in progress, the ring's points)
//! and `GET /stats` (load, latency, hot keys: what the status page polls), as
//! JSON. Read-only: every value comes from the routing snapshot, the atomics
//! and one DBSIZE per node.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::proxy::ops::http::exposition::{node_keys, Scrape};
use crate::proxy::ops::metrics::LATENCY_BOUNDS_NS;
use crate::proxy::Proxy;
use crate::ring::PointScheme;

/// Points sent for drawing the ring, at most (every k-th beyond it).
const MAX_RING_POINTS: usize = 4_096;

pub(crate) async fn cluster(State(p): State<Arc<Proxy>>) -> Json<Value> {
    let keys = node_keys(&p).await;
    let s = Scrape::read(&p, keys);
    let routing = p.routing.load_full();
    let ring = &routing.ring;
    let leaving = |name: &str| {
        routing
            .migration
            .as_ref()
            .is_some_and(|m| m.next.index_of(name).is_none())
    };
    let mut nodes: Vec<Value> = s
        .nodes
        .iter()
        .map(|n| {
            json!({
                "name": n.name, "addr": n.addr, "weight": n.weight, "points": n.points,
                "share": n.ring_share, "state": n.state, "keys": n.keys,
                "role": if leaving(&n.name) { "leaving" } else { "member" },
                "replication": crate::proxy::ha::views::json_of(&p, &n.name),
            })
        })
        .collect();
    if let Some(m) = &routing.migration {
        for (i, n) in m.next_shards.iter().map(|s| s.primary()).enumerate() {
            if ring.index_of(&n.spec.name).is_none() {
                nodes.push(json!({
                    "name": n.spec.name, "addr": n.spec.addr, "weight": n.spec.weight,
                    "points": m.next.points_of(i), "share": m.next.share_of(i),
                    "state": n.health.state(), "keys": null, "role": "joining",
                }));
            }
        }
    }
    // The ring as fractions of the hash space and each point's owner.
    let full = match ring.config().scheme {
        PointScheme::Ketama => 4_294_967_296.0,
        _ => 18_446_744_073_709_551_616.0,
    };
    let step = ring.points().len().div_ceil(MAX_RING_POINTS).max(1);
    let (mut at, mut owner) = (Vec::new(), Vec::new());
    for &pt in ring.points().iter().step_by(step) {
        at.push((pt as f64 / full * 1e5).round() / 1e5);
        owner.push(ring.locate_hash(pt));
    }
    Json(json!({
        "epoch": s.epoch,
        "scheme": ring.config().scheme.to_string(),
        "points": ring.total_points(),
        "nodes": nodes,
        "ring": { "at": at, "owner": owner },
        "change": change(&p),
    }))
}

/// The change in progress (or the last one), with progress and an ETA.
fn change(p: &Proxy) -> Value {
    let routing = p.routing.load();
    let t = &p.migration;
    let text = t.text();
    let busy = routing.migration.is_some() || routing.filter_keys;
    let to_scan = t.keys_to_scan.load(Ordering::Relaxed);
    let scanned = t.keys_scanned.load(Ordering::Relaxed);
    let elapsed_ms = match (busy, text.started) {
        (true, Some(s)) => s.elapsed().as_millis() as u64,
        _ => text.last_duration_ms,
    };
    let progress = match (busy, to_scan) {
        (false, _) => 1.0,
        (true, 0) => 0.0,
        (true, n) => (scanned as f64 / n as f64).min(0.999),
    };
    let eta_s =
        (busy && progress > 0.0).then(|| elapsed_ms as f64 / 1000.0 * (1.0 - progress) / progress);
    json!({
        "state": text.state,
        "busy": busy,
        "change": text.change,
        "progress": progress,
        "eta_s": eta_s,
        "elapsed_ms": elapsed_ms,
        "next_epoch": routing.migration.as_ref().map(|m| m.next.epoch()),
        "keys_to_scan": to_scan,
        "keys_scanned": scanned,
        "keys_copied": t.keys_copied.load(Ordering::Relaxed),
        "keys_resynced": t.keys_resynced.load(Ordering::Relaxed),
        "keys_swept": t.keys_swept.load(Ordering::Relaxed),
        "cutover_pause_ms": t.last_pause_ms.load(Ordering::Relaxed),
        "last_error": text.last_error,
    })
}

pub(crate) async fn stats(State(p): State<Arc<Proxy>>) -> Json<Value> {
    let s = Scrape::read(&p, Vec::new());
    let all = p.ops.metrics.all_latency();
    let ms = |q: f64| all.quantile(q).map(|ns| ns / 1e6);
    let nodes: Vec<Value> = s
        .nodes
        .iter()
        .map(|n| {
            let l = n.load.as_ref();
            json!({
                "name": n.name,
                "up": n.up,
                "requests_total": n.requests,
                "errors_total": n.errors,
                "in_flight": n.in_flight,
                "requests_per_sec": l.map_or(0.0, |l| l.requests_per_sec),
                "request_share": l.map_or(0.0, |l| l.share),
                "ring_share": n.ring_share,
                "hot": l.is_some_and(|l| l.hot),
                "p99_ms": n.latency.quantile(0.99).map(|ns| ns / 1e6),
            })
        })
        .collect();
    let routing = p.routing.load();
    let hot: Vec<Value> = p
        .ops
        .hot_keys
        .top(10)
        .into_iter()
        .map(|(k, c)| {
            let node = &routing.owner(&k).spec.name;
            json!({ "key": String::from_utf8_lossy(&k), "count": c, "node": node })
        })
        .collect();
    Json(json!({
        "uptime_s": p.started.elapsed().as_secs(),
        "epoch": s.epoch,
        "clients": p.stats.clients.load(Ordering::Relaxed),
        "commands_total": all.count(),
        "commands_per_sec": p.ops.tripwire.requests_per_sec(),
        "bytes_in": p.ops.metrics.bytes_in.load(Ordering::Relaxed),
        "bytes_out": p.ops.metrics.bytes_out.load(Ordering::Relaxed),
        "nodes": nodes,
        "latency": {
            "bounds_ms": LATENCY_BOUNDS_NS.iter().map(|&b| b as f64 / 1e6).collect::<Vec<_>>(),
            "counts": all.counts,
            "p50_ms": ms(0.5), "p90_ms": ms(0.9), "p99_ms": ms(0.99), "p999_ms": ms(0.999),
        },
        "hot_keys": hot,
        "hot_shard": p.ops.tripwire.summary(),
        "alarm_ratio": p.ops.tripwire.ratio(),
        "slowlog_len": p.ops.slowlog.len(),
    }))
}
