//! The admin views: `CLUSTER RINGINFO` (the change in progress, the fleet,
//! the operator plane, replication) and `CLUSTER NODES`.

use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};

use std::sync::Arc;

use super::fleet;
use crate::resp::encode;
use crate::resp::reply::integer;

pub(super) fn cluster_info(proxy: &crate::proxy::Proxy) -> String {
    let routing = proxy.routing.load();
    let m = &proxy.migration;
    let t = m.text();
    let copied = m.keys_copied.load(Ordering::Relaxed);
    let scanned = m.keys_scanned.load(Ordering::Relaxed);
    let to_scan = m.keys_to_scan.load(Ordering::Relaxed);
    let busy = routing.migration.is_some() || m.is_changing();
    let pending: Vec<String> = m.pending().into_iter().map(|n| n.name).collect();
    let progress = match (busy, to_scan) {
        (false, _) => 100.0,
        (true, 0) => 0.0,
        (true, n) => (scanned as f64 / n as f64 * 100.0).min(99.9),
    };
    let elapsed = match (busy, t.started) {
        (true, Some(s)) => s.elapsed().as_millis() as u64,
        _ => t.last_duration_ms,
    };
    let next = routing.migration.as_ref().map(|m| m.next.clone());
    let mut ops = m.pace_lines(&proxy.config().migration);
    ops.push_str(&fleet_lines(proxy));
    ops.push_str(&proxy.ops.info_lines());
    let ha = crate::proxy::ha::views::ringinfo_lines(proxy);
    format!(
        "state:{}\r\nepoch:{}\r\nnodes:{}\r\npoints:{}\r\nscheme:{}\r\nnext_epoch:{}\r\nlast_change:{}\r\nring_rebuild_us:{}\r\nmigration_keys_to_scan:{to_scan}\r\nmigration_keys_scanned:{scanned}\r\nmigration_keys_copied:{copied}\r\nmigration_keys_resynced:{}\r\nmigration_keys_dirty:{}\r\nmigration_keys_swept:{}\r\nmigration_progress:{progress:.1}%\r\nmigration_moved_fraction:{:.4}\r\nmigration_cutover_pause_ms:{}\r\nmigration_cutover_persist_us:{}\r\nsweep_pending:{}\r\nmigration_ms:{elapsed}\r\nlast_error:{}\r\n{ops}{ha}",
        t.state,
        routing.ring.epoch(),
        routing.ring.nodes().len(),
        routing.ring.total_points(),
        routing.ring.config().scheme,
        next.as_ref().map(|r| r.epoch().to_string()).unwrap_or_else(|| "-".into()),
        if t.change.is_empty() { "none" } else { &t.change },
        m.last_rebuild_us.load(Ordering::Relaxed),
        m.keys_resynced.load(Ordering::Relaxed),
        routing.migration.as_ref().map(|m| m.dirty.len()).unwrap_or(0),
        m.keys_swept.load(Ordering::Relaxed),
        if to_scan == 0 { 0.0 } else { copied as f64 / to_scan as f64 },
        m.last_pause_ms.load(Ordering::Relaxed),
        m.last_persist_us.load(Ordering::Relaxed),
        if pending.is_empty() { "-".to_string() } else { pending.join(",") },
        t.last_error,
    )
}

/// RINGINFO's lines about the shared store (none for a proxy alone).
fn fleet_lines(proxy: &crate::proxy::Proxy) -> String {
    match fleet::fleet(proxy) {
        Some(f) => format!(
            "topology_store:etcd\r\nproxy_id:{}\r\nleader:{}\r\netcd_connected:{}\r\nlease_ttl_s:{}\r\nserving:{}\r\n",
            f.id,
            f.leader_id(),
            u8::from(f.is_connected()),
            f.lease_ttl_s,
            u8::from(f.is_serving())
        ),
        None => String::new(),
    }
}

pub(super) async fn cluster_nodes(proxy: &crate::proxy::Proxy, proto: u8, client: u64) -> Bytes {
    let routing = proxy.routing.load_full();
    // Members first; during a change, also the node joining (or leaving).
    let mut nodes: Vec<(std::sync::Arc<crate::proxy::upstream::topology::Node>, &str)> = Vec::new();
    for n in routing.primaries() {
        let leaving = routing
            .migration
            .as_ref()
            .is_some_and(|m| m.next.index_of(&n.spec.name).is_none());
        nodes.push((n.clone(), if leaving { "leaving" } else { "member" }));
    }
    if let Some(m) = &routing.migration {
        for n in m.next_shards.iter().map(|s| s.primary()) {
            if routing.ring.index_of(&n.spec.name).is_none() {
                nodes.push((n.clone(), "joining"));
            }
        }
    }
    let mut waits = Vec::new();
    for (n, _) in &nodes {
        waits.push(
            n.upstream(2, client)
                .send(Bytes::from_static(b"*1\r\n$6\r\nDBSIZE\r\n"))
                .await,
        );
    }
    let mut text = String::new();
    for ((n, role), w) in nodes.iter().zip(waits) {
        let keys = match w.await.ok().as_deref().and_then(integer) {
            Some(k) => k.to_string(),
            None => "?".into(),
        };
        let ring = match (&routing.migration, *role) {
            (Some(m), "joining") => &m.next,
            _ => &routing.ring,
        };
        let (points, share) = match ring.index_of(&n.spec.name) {
            Some(i) => (ring.points_of(i), ring.share_of(i) * 100.0),
            None => (0, 0.0),
        };
        let shard = routing.shards.iter().find(|s| Arc::ptr_eq(s.primary(), n));
        let (suffix, replicas) = match shard {
            Some(s) => crate::proxy::ha::views::ring_suffix_and_lines(proxy, s),
            None => Default::default(),
        };
        text.push_str(&format!(
            "{} {} weight={} points={} share={:.2}% keys={} state={} role={}{suffix}\n{replicas}",
            n.spec.name,
            n.spec.addr,
            n.spec.weight,
            points,
            share,
            keys,
            n.health.state(),
            role
        ));
    }
    let mut out = BytesMut::new();
    encode::verbatim(&mut out, text.as_bytes(), proto);
    out.freeze()
}
