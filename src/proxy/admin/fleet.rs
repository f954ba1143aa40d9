//! The proxy's side of a shared topology store: the follower that routes by
//! what other proxies write and, on the elected leader, resumes the change
//! in progress; the report each proxy registers; `CLUSTER PROXIES`; and the
//! wait of a change requested on a proxy that does not drive it. Started by
//! `proxy::run_with`; a no-op for a store one proxy owns.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::proxy::admin::error::AdminError;
use crate::proxy::admin::etcd::{Fleet, ProxyInfo};
use crate::proxy::admin::migration::{self, barrier, follow};
use crate::proxy::admin::state::Saved;
use crate::proxy::admin::store;
use crate::proxy::Proxy;
use crate::resp::encode;

/// How often the registration's numbers are refreshed.
const REPORT_MS: u64 = 1_000;
/// How long a change requested here waits for the leader to finish it.
const CHANGE_WAIT_MS: u64 = 600_000;

/// The fleet this proxy belongs to, if its store is shared.
pub(crate) fn fleet(proxy: &Proxy) -> Option<&Fleet> {
    proxy.store.as_deref().and_then(|s| s.fleet())
}

/// True unless the store is shared and another proxy holds the election.
pub(crate) fn is_leader(proxy: &Proxy) -> bool {
    store::is_leader(proxy.store.as_deref())
}

/// Starts the follower and the report ticker (only for a shared store).
pub(crate) fn spawn(proxy: &Arc<Proxy>) {
    let Some(f) = fleet(proxy) else {
        return;
    };
    let (others, leader) = (f.others.clone(), f.leader.clone());
    // What it routes by from the start (an empty store it seeded included).
    let (p, rev) = (
        proxy.clone(),
        proxy.store.as_ref().map_or(0, |s| s.revision()),
    );
    tokio::spawn(async move { barrier::acknowledge(&p, rev).await });
    tokio::spawn(follow_store(Arc::downgrade(proxy), others, leader));
    tokio::spawn(report(Arc::downgrade(proxy)));
}

/// Routes by each topology the store hands over, gets ready for its phase
/// and acknowledges it; as the newly elected leader, resumes the change.
async fn follow_store(
    weak: Weak<Proxy>,
    mut others: tokio::sync::watch::Receiver<Option<(i64, Saved)>>,
    mut leader: tokio::sync::watch::Receiver<bool>,
) {
    let mut was_leader = false;
    loop {
        tokio::select! {
            r = others.changed() => if r.is_err() { return },
            r = leader.changed() => if r.is_err() { return },
        }
        let Some(proxy) = weak.upgrade() else {
            return;
        };
        let is_leader = *leader.borrow_and_update();
        let mut saved = others.borrow_and_update().clone();
        let _lock = proxy.admin_lock.lock().await;
        if proxy.migration.is_driving() {
            continue;
        }
        if is_leader && !was_leader {
            tracing::info!("this proxy is the fleet's leader");
            let store = proxy.store.clone().expect("a fleet has a store");
            let read = tokio::task::spawn_blocking(move || {
                store.load().map(|s| s.map(|s| (store.revision(), s)))
            });
            match read.await {
                Ok(Ok(s)) => saved = s.or(saved),
                Ok(Err(e)) => tracing::warn!(error = %e, "reading the topology as the new leader"),
                Err(e) => tracing::warn!(error = %e, "reading the topology as the new leader"),
            }
        }
        was_leader = is_leader;
        let Some((rev, s)) = saved else {
            continue;
        };
        let old = match follow::apply(&proxy, &s) {
            Ok(old) => old,
            Err(e) => {
                tracing::warn!(error = %e, "cannot route by the topology in the store");
                continue;
            }
        };
        if let Some(f) = fleet(&proxy) {
            f.routed_by(rev);
        }
        if is_leader && s.migration.is_some() {
            tracing::info!(change = %crate::proxy::admin::state::change_label(&s), "resuming the fleet's change as its leader");
            if let Err(e) = migration::resume_with(&proxy, s, "as the new leader") {
                tracing::warn!(error = %e, "cannot resume the fleet's change");
            }
            continue;
        }
        match follow::prepare(&proxy, old).await {
            Ok(()) => barrier::acknowledge(&proxy, rev).await,
            // Not acknowledged: the leader waits, then aborts the change.
            Err(e) => tracing::warn!(error = %e, "cannot get ready for the fleet's phase"),
        }
    }
}

/// Refreshes what this proxy registers: its address, epoch, clients, rate.
async fn report(weak: Weak<Proxy>) {
    loop {
        {
            let Some(proxy) = weak.upgrade() else {
                return;
            };
            let Some(f) = fleet(&proxy) else {
                return;
            };
            let config = proxy.config();
            let host = config
                .listen
                .rsplit_once(':')
                .map_or("127.0.0.1", |(h, _)| h);
            let info = this_proxy(&proxy, f.id.clone(), format!("{host}:{}", proxy.port));
            *f.report.lock().expect("report lock") = info;
        }
        tokio::time::sleep(Duration::from_millis(REPORT_MS)).await;
    }
}

/// What this proxy reports of itself: its epoch, clients, request rate and
/// change state, under `id` at `addr`.
fn this_proxy(proxy: &Proxy, id: String, addr: String) -> ProxyInfo {
    ProxyInfo {
        id,
        addr,
        epoch: proxy.routing.load().ring.epoch(),
        clients: proxy.stats.clients.load(Ordering::Relaxed) as u64,
        requests_per_sec: proxy
            .stats
            .ops
            .rate(proxy.stats.commands.load(Ordering::Relaxed)),
        state: proxy.migration.text().state,
    }
}

/// After a change was started on a proxy that does not drive it: waits until
/// the fleet routes by epoch `next` (Ok) or the change ended without it.
pub(crate) async fn await_change(proxy: &Proxy, next: u64) -> Result<(), AdminError> {
    if is_leader(proxy) {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(CHANGE_WAIT_MS);
    // Since when etcd has been out of reach (the change cannot finish then).
    let mut cut_off: Option<tokio::time::Instant> = None;
    // When etcd was last seen out of reach: a follower cut off from etcd
    // may drop the change locally while it is only paused in etcd, so its
    // end is believed only once etcd has answered for a whole lease since.
    let mut last_cut: Option<tokio::time::Instant> = None;
    loop {
        let routing = proxy.routing.load();
        if routing.ring.epoch() >= next {
            return Ok(());
        }
        // Two leases: an etcd restart (a second or two) is waited out.
        let lease = fleet(proxy).map_or(0, |f| f.lease_ttl_s);
        let ttl = 2 * lease;
        match fleet(proxy).is_some_and(|f| f.is_connected()) {
            true => cut_off = None,
            false => {
                let now = tokio::time::Instant::now();
                last_cut = Some(now);
                let since = *cut_off.get_or_insert(now);
                if since.elapsed() > Duration::from_secs(ttl) {
                    return Err(AdminError::FleetChange(format!(
                        "etcd has been unreachable for {ttl} s (two leases): the change cannot finish without it and resumes from its stored phase once etcd is back; see CLUSTER RINGINFO"
                    )));
                }
            }
        }
        let is_paused = last_cut.is_some_and(|t| t.elapsed() < Duration::from_secs(lease.max(1)));
        if routing.migration.is_none() && !proxy.migration.is_changing() && !is_paused {
            return Err(AdminError::FleetChange(
                "the change ended without its new epoch (aborted by the fleet's leader; see its CLUSTER RINGINFO last_error)".into(),
            ));
        }
        if tokio::time::Instant::now() > deadline {
            return Err(AdminError::FleetChange(
                "still running on the fleet's leader; see CLUSTER RINGINFO".into(),
            ));
        }
        drop(routing);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `CLUSTER PROXIES`: one line per live proxy of the fleet (just this one
/// without a shared store).
pub(crate) async fn proxies(proxy: Arc<Proxy>, proto: u8) -> Bytes {
    let me = fleet(&proxy).map(|f| (f.id.clone(), f.leader_id()));
    let lines = match (proxy.store.clone(), &me) {
        (Some(store), Some(_)) => {
            match tokio::task::spawn_blocking(move || store.proxies()).await {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => return AdminError::FleetChange(e.to_string()).reply(),
                Err(e) => return AdminError::FleetChange(e.to_string()).reply(),
            }
        }
        _ => {
            let addr = format!("127.0.0.1:{}", proxy.port);
            vec![this_proxy(&proxy, addr.clone(), addr)]
        }
    };
    let leader = me.as_ref().map(|m| m.1.clone()).unwrap_or_default();
    // This proxy's own line is its live state; the others' are their last
    // registration, rewritten every second.
    let lines = lines.into_iter().map(|p| match &me {
        Some((id, _)) if &p.id == id => this_proxy(&proxy, p.id, p.addr),
        _ => p,
    });
    let mut text = String::new();
    for p in lines {
        text.push_str(&format!(
            "{} {} epoch={} clients={} requests_per_sec={} state={} role={}\n",
            p.id,
            p.addr,
            p.epoch,
            p.clients,
            p.requests_per_sec,
            p.state,
            if p.id == leader { "leader" } else { "member" }
        ));
    }
    let mut out = BytesMut::new();
    encode::verbatim(&mut out, text.as_bytes(), proto);
    out.freeze()
}
