//! twemproxy's `auto_eject_hosts`: a server whose connections failed
//! `server_failure_limit` times in a row leaves the ring for
//! `server_retry_timeout`, and its keys go where a ring over the remaining
//! servers puts them — the placement twemproxy computes then. When the time
//! is up it is back in the ring; if it still fails, it is ejected again.
//!
//! Ejection is a routing snapshot over the live servers only, swapped in
//! like any other; the pool's topology (what the state file and CLUSTER
//! ADDNODE work on) is the full ring, kept here and restored on return.
//! While a server is ejected topology changes are refused, and no server is
//! ejected while a change runs.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::proxy::config::EjectPolicy;
use crate::proxy::pool::place;
use crate::proxy::upstream::shard::Shard;
use crate::proxy::upstream::topology::Routing;
use crate::proxy::Proxy;
use crate::ring::Ring;

/// How often failure counts are looked at.
const TICK_MS: u64 = 50;

/// The servers ejected now: name, and when (µs since the epoch, twemproxy's
/// `server_ejected_at`). A std mutex: read by admin and stats, written by
/// the ejector's tick, never held across `.await`.
#[derive(Default)]
pub(crate) struct Ejected {
    now: Mutex<Vec<(String, u64)>>,
    /// Ejections since start (twemproxy's `server_ejects`).
    pub(crate) total: std::sync::atomic::AtomicU64,
}

impl Ejected {
    pub(crate) fn names(&self) -> Vec<String> {
        let now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        now.iter().map(|(n, _)| n.clone()).collect()
    }

    /// When `name` was ejected, if it is now.
    pub(crate) fn at(&self, name: &str) -> Option<u64> {
        let now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        now.iter().find(|(n, _)| n == name).map(|(_, at)| *at)
    }
}

/// The full ring, and until when each ejected server stays out.
struct State {
    full: Option<(Arc<Ring>, Vec<Arc<Shard>>)>,
    out: Vec<(String, Instant)>,
}

/// Watches the pool's servers until the proxy is gone.
pub(crate) async fn run(proxy: Weak<Proxy>, policy: EjectPolicy) {
    let mut every = tokio::time::interval(Duration::from_millis(TICK_MS));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut state = State {
        full: None,
        out: Vec::new(),
    };
    loop {
        every.tick().await;
        let Some(p) = proxy.upgrade() else { return };
        // Never beside a topology change: it owns the routing then.
        let Ok(_lock) = p.admin_lock.try_lock() else {
            continue;
        };
        let cur = p.routing.load_full();
        if cur.migration.is_some() || p.migration.is_changing() {
            continue;
        }
        tick(&p, &cur, policy, &mut state);
    }
}

fn tick(p: &Proxy, cur: &Arc<Routing>, policy: EjectPolicy, state: &mut State) {
    if state.out.is_empty() {
        state.full = Some((cur.ring.clone(), cur.shards.clone()));
    }
    let Some((ring, shards)) = &state.full else {
        return;
    };
    let now = Instant::now();
    let before = state.out.len();
    state.out.retain(|(_, until)| *until > now);
    let mut changed = state.out.len() != before;
    for (spec, shard) in ring.nodes().iter().zip(shards) {
        let health = &shard.primary().health;
        let out = state.out.iter().any(|(n, _)| *n == spec.name);
        let failed = health.consecutive.load(Ordering::Relaxed);
        // The last live server stays: a ring needs one.
        if out
            || failed < u64::from(policy.failure_limit)
            || state.out.len() + 1 >= ring.nodes().len()
        {
            continue;
        }
        health.consecutive.store(0, Ordering::Relaxed);
        let until = now + Duration::from_millis(policy.retry_ms);
        state.out.push((spec.name.clone(), until));
        p.ejected.total.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(server = %spec.name, failures = failed, retry_ms = policy.retry_ms, "server ejected (auto_eject_hosts)");
        changed = true;
    }
    if !changed {
        return;
    }
    let live: Vec<usize> = (0..ring.nodes().len())
        .filter(|i| !state.out.iter().any(|(n, _)| *n == ring.nodes()[*i].name))
        .collect();
    let routing = if live.len() == ring.nodes().len() {
        tracing::info!("every server is back in the ring");
        Routing::new(ring.clone(), shards.clone(), None, false)
    } else {
        let specs = live.iter().map(|i| ring.nodes()[*i].clone()).collect();
        let placed = place(ring.placement(), ring.config(), specs, ring.epoch());
        let Ok(placed) = placed else { return };
        let live_shards = live.iter().map(|i| shards[*i].clone()).collect();
        Routing::new(Arc::new(placed), live_shards, None, false)
    };
    p.routing.store(Arc::new(routing));
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let mut list = p.ejected.now.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|(n, _)| state.out.iter().any(|(o, _)| o == n));
    for (n, _) in &state.out {
        if !list.iter().any(|(l, _)| l == n) {
            list.push((n.clone(), stamp));
        }
    }
}
