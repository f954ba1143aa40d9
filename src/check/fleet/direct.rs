//! The fleet checker's reads straight from the nodes, past every proxy:
//! each worker's string, counter, deleted and TTL'd keys read on the node
//! that owns them under the fleet's final ring. A proxy that served a key
//! from a stale route would agree with itself; the node that owns the key
//! cannot. Called by `fleet/mod.rs` after the load stops.

use std::collections::HashMap;
use std::time::Duration;

use crate::check::client::{Client, Reply};
use crate::check::cluster::rings;
use crate::check::report::Report;
use crate::check::workload::{check_s, key, Shared, WorkerState, C_KEYS, S_KEYS, TTL_MS};

/// Deleted keys per worker read again (the most recent).
const VERIFY_DELETED: usize = 500;

/// The violations found on the owners of every worker's keys (ring read
/// through `proxy`; every node in `nodes` (name, addr) may be asked).
pub(crate) async fn verify_on_nodes(
    proxy: &str,
    nodes: &[(String, String)],
    workers: &[WorkerState],
    all: &Shared,
) -> Result<Report, String> {
    let (ring, _) = rings(proxy).await?;
    let mut conns: HashMap<String, Client> = nodes
        .iter()
        .map(|(n, a)| (n.clone(), Client::new(a, Duration::from_secs(10))))
        .collect();
    let mut get = async |k: &[u8], cmd: &[u8]| -> Result<Reply, String> {
        let owner = ring.node(ring.locate(k)).name.clone();
        let c = conns
            .get_mut(&owner)
            .ok_or_else(|| format!("no connection to the owner {owner}"))?;
        c.call(&[cmd, k]).await
    };
    let shared = Shared::default();
    let mut report = Report::default();
    for st in workers {
        let mut st = st.clone();
        st.apply_amnesties(all);
        let w = st.id;
        for i in 0..S_KEYS {
            let r = get(&key(w, "s", i as u64), b"GET").await?;
            check_s(&mut st, i, &r, &shared);
        }
        for j in 0..C_KEYS {
            let v = get(&key(w, "c", j as u64), b"GET")
                .await?
                .as_int()
                .unwrap_or(0);
            if v < st.incr_acked[j] || v > st.incr_acked[j] + st.incr_unknown[j] {
                report.wrong_counters += 1;
            }
        }
        for &n in st.deleted.iter().rev().take(VERIFY_DELETED) {
            if let Reply::Bulk(Some(_)) = get(&key(w, "d", n), b"GET").await? {
                report.resurrected += 1;
            }
        }
        for &n in &st.ttl_keys {
            match get(&key(w, "t", n), b"PTTL").await?.as_int() {
                Some(ms) if ms > 0 && ms <= TTL_MS => {}
                _ => report.lost_ttls += 1,
            }
        }
    }
    report.lost = shared.lost.load(std::sync::atomic::Ordering::Relaxed);
    report.stale = shared.stale.load(std::sync::atomic::Ordering::Relaxed);
    Ok(report)
}
