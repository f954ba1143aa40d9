//! The migration's side of the fleet's barrier (the store's side is
//! `admin::etcd::barrier`): the leader waits at the copy's start and at the
//! cutover until every other live proxy has acknowledged the phase or lost
//! its lease; a follower acknowledges what it routes by once `follow::prepare`
//! has made it ready. A no-op for a store one proxy owns. Called by `drive`,
//! `cutover`, `begin` and the fleet follower.

use std::time::{Duration, Instant};

use super::mover::NodeError;
use crate::proxy::Proxy;

/// The leader's wait at a barrier, beyond the lease: a proxy that keeps its
/// lease this long without acknowledging is taken as broken, and the change
/// aborts (old owners still serve: nothing is lost).
const BARRIER_SLACK_MS: u64 = 2_000;

/// The proxies that acknowledged a phase, each with the lease it did so under.
pub(crate) type Members = Vec<(String, i64)>;

/// As the leader: waits until the fleet is ready for the phase this proxy
/// last wrote (or, resuming, read), or each proxy that is not has lost its
/// lease. Returns those that acknowledged.
pub(crate) async fn wait(proxy: &Proxy, phase: &str) -> Result<Members, NodeError> {
    let Some(store) = proxy.store.clone() else {
        return Ok(Vec::new());
    };
    let Some(ttl_s) = store.fleet().map(|f| f.lease_ttl_s) else {
        return Ok(Vec::new());
    };
    let max = Duration::from_millis(ttl_s * 3_000 + BARRIER_SLACK_MS);
    let t0 = Instant::now();
    let r = tokio::task::spawn_blocking(move || {
        let rev = store.revision();
        store.await_acks(rev, max)
    })
    .await;
    let fail = |why: String| NodeError {
        node: "fleet".into(),
        why: format!("{phase} barrier: {why}"),
    };
    let members = r
        .map_err(|e| fail(e.to_string()))?
        .map_err(|e| fail(e.to_string()))?;
    let ids: Vec<&str> = members.iter().map(|m| m.0.as_str()).collect();
    tracing::info!(phase, ms = t0.elapsed().as_millis() as u64, acknowledged = %ids.join(","), "the fleet is ready for the change's phase");
    Ok(members)
}

/// Tells the fleet this proxy routes by, and is ready for, revision `rev`
/// (a few tries: the leader waits on it).
pub(crate) async fn acknowledge(proxy: &Proxy, rev: i64) {
    let Some(store) = proxy.store.clone() else {
        return;
    };
    if store.fleet().is_none() {
        return;
    }
    for _ in 0..3 {
        let s = store.clone();
        match tokio::task::spawn_blocking(move || s.acknowledge(rev)).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, rev, "cannot acknowledge the topology to the fleet")
            }
            Err(e) => {
                tracing::warn!(error = %e, rev, "cannot acknowledge the topology to the fleet")
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The proxies of `before` (the copy's start) that did not acknowledge
/// `now` (the cutover) under the same lease: each lost its lease meanwhile,
/// and with it the dirty keys it tracked.
pub(crate) fn lost(before: &Members, now: &Members) -> Vec<String> {
    before
        .iter()
        .filter(|m| !now.contains(m))
        .map(|m| m.0.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_is_lost_when_it_is_gone_or_came_back_under_another_lease() {
        let before = vec![
            ("a".to_string(), 1),
            ("b".to_string(), 2),
            ("c".to_string(), 3),
        ];
        let now = vec![("a".to_string(), 1), ("c".to_string(), 9)];
        assert_eq!(lost(&before, &now), vec!["b".to_string(), "c".to_string()]);
        assert!(lost(&before, &before).is_empty());
        assert!(lost(&Vec::new(), &now).is_empty());
    }
}
