//! The etcd store's background work, on its own runtime: the watch of the
//! topology key (other proxies' writes, handed to the proxy through
//! [`Fleet::others`]), this proxy's lease and its registration under it, and
//! the election whose winner drives changes. Each loop retries after a
//! failure with a short pause, so an etcd restart is survived; none of them
//! touches routing (the proxy's follower, `admin::follow`, does).
//!
//! The lease is also what lets this proxy serve: [`Fleet::is_serving`] holds
//! only while the lease is alive by this proxy's own clock (a renewal's send
//! time plus its TTL: never later than etcd expires it) and the proxy routes
//! by a topology read under that lease. A proxy stopped or cut off past its
//! TTL therefore refuses keyed requests until it has a new lease and has
//! caught up, and the fleet's leader may go on without it.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType, PutOptions, WatchOptions};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub(crate) use super::gone::Serving;
use super::{Keys, Seen, REQUEST_TIMEOUT_MS};
use crate::proxy::admin::state::{self, Saved};

/// Pause before a failed loop starts again.
const RETRY_MS: u64 = 500;
/// How often the registration is rewritten with fresh numbers.
const REPORT_MS: u64 = 1_000;

/// One live proxy, as it registers itself (`CLUSTER PROXIES`, the status page).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct ProxyInfo {
    pub(crate) id: String,
    pub(crate) addr: String,
    pub(crate) epoch: u64,
    pub(crate) clients: u64,
    pub(crate) requests_per_sec: u64,
    pub(crate) state: String,
}

/// A leader's fence: its election key, and the revision that created it.
pub(crate) type Fence = (Vec<u8>, i64);

/// What the proxy reads of the fleet (and the one thing it writes: its report).
pub(crate) struct Fleet {
    pub(crate) id: String,
    /// The newest topology written by another proxy, with its revision.
    pub(crate) others: watch::Receiver<Option<(i64, Saved)>>,
    /// Whether this proxy holds the election.
    pub(crate) leader: watch::Receiver<bool>,
    /// The leader's id as last observed ("-" when unknown).
    pub(crate) leader_id: Arc<Mutex<String>>,
    /// What this proxy registers; refreshed by the proxy's ticker.
    pub(crate) report: Arc<Mutex<ProxyInfo>>,
    /// Milliseconds since `born` until which the lease is known to be alive.
    lease_until_ms: Arc<AtomicU64>,
    /// Whether the watch is connected (false while etcd is unreachable).
    watching: Arc<AtomicBool>,
    /// Whether every etcd endpoint refuses connections (see `gone.rs`).
    gone: Arc<AtomicBool>,
    born: Instant,
    pub(crate) lease_ttl_s: u64,
    /// The lease this proxy holds (0 before the first grant).
    pub(crate) lease_id: Arc<AtomicI64>,
    /// The topology revision this proxy must route by before it serves
    /// under its current lease (`i64::MAX` until read under it).
    need_rev: Arc<AtomicI64>,
    /// The newest topology revision this proxy routes by.
    applied_rev: Arc<AtomicI64>,
    /// While this proxy leads: its election key and that key's creation
    /// revision, the fence every phase it writes is conditioned on.
    pub(crate) leader_key: Arc<Mutex<Option<Fence>>>,
    /// Once the first lease is granted and the topology read under it.
    synced: Arc<tokio::sync::Notify>,
}

impl Fleet {
    /// Whether this proxy's lease is still alive, as far as it can know.
    pub(crate) fn is_lease_alive(&self) -> bool {
        (self.born.elapsed().as_millis() as u64) < self.lease_until_ms.load(Ordering::Relaxed)
    }

    /// Whether the proxy is in touch with etcd (its watch runs, its lease renews).
    pub(crate) fn is_connected(&self) -> bool {
        self.watching.load(Ordering::Relaxed) && self.is_lease_alive()
    }

    pub(crate) fn leader_id(&self) -> String {
        self.leader_id.lock().expect("leader lock").clone()
    }

    /// Whether this proxy may route keyed requests: its lease is alive and
    /// it routes by a topology read under that lease. Read per request.
    pub(crate) fn is_serving(&self) -> bool {
        self.is_lease_alive()
            && self.applied_rev.load(Ordering::SeqCst) >= self.need_rev.load(Ordering::SeqCst)
    }

    /// What this proxy may serve now (see [`Serving`]). Read per request.
    pub(crate) fn serving(&self) -> Serving {
        match (self.is_lease_alive(), self.is_serving()) {
            (true, true) if self.watching.load(Ordering::Relaxed) => Serving::All,
            (true, true) => Serving::SteadyKeys,
            (false, _) if self.gone.load(Ordering::Relaxed) => Serving::Reads,
            _ => Serving::Nothing,
        }
    }

    /// Tells etcd gone from out of reach by probing `endpoints` (`gone.rs`).
    pub(super) fn probe(&self, rt: &tokio::runtime::Handle, endpoints: Vec<String>) {
        let (watching, gone) = (self.watching.clone(), self.gone.clone());
        rt.spawn(super::gone::probe(endpoints, watching, gone));
    }

    /// Records that this proxy routes by topology revision `rev`.
    pub(crate) fn routed_by(&self, rev: i64) {
        self.applied_rev.fetch_max(rev, Ordering::SeqCst);
    }

    /// Waits (blocking, at most `max`) until the first lease is granted and
    /// the topology read under it: a proxy starting up serves at once.
    pub(super) fn wait_synced(&self, rt: &tokio::runtime::Handle, max: Duration) {
        let (need, synced) = (self.need_rev.clone(), self.synced.clone());
        super::block(rt, async move {
            let _ = tokio::time::timeout(max, async {
                loop {
                    let woken = synced.notified();
                    tokio::pin!(woken);
                    woken.as_mut().enable();
                    if need.load(Ordering::SeqCst) != i64::MAX {
                        return;
                    }
                    woken.await;
                }
            })
            .await;
        });
    }
}

/// Hands a topology read from etcd to the proxy's follower, newest first.
struct Publish {
    seen: Arc<Mutex<Seen>>,
    tx: watch::Sender<Option<(i64, Saved)>>,
    name: String,
}

impl Publish {
    /// Offers the topology at `rev`: skipped when older than what this proxy
    /// knows, or its own write, unless `forced` (the read a new lease needs).
    fn offer(&self, rev: i64, value: &[u8], forced: bool) {
        let text = String::from_utf8_lossy(value);
        let saved = match state::decode(&self.name, &text) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "ignored an unreadable topology in etcd");
                return;
            }
        };
        let mut s = self.seen.lock().expect("seen lock");
        if rev < s.rev || (!forced && rev == s.own_rev) {
            return;
        }
        s.rev = rev;
        s.changing = saved.migration.is_some();
        drop(s);
        self.tx.send_replace(Some((rev, saved)));
    }
}

pub(super) fn start(
    rt: &tokio::runtime::Handle,
    client: Client,
    keys: Keys,
    id: String,
    ttl_s: u64,
    seen: Arc<Mutex<Seen>>,
    name: String,
) -> Fleet {
    let (others_tx, others) = watch::channel(None);
    let publish = Arc::new(Publish {
        seen,
        tx: others_tx,
        name,
    });
    let (leader_tx, leader) = watch::channel(false);
    let fleet = Fleet {
        id: id.clone(),
        others,
        leader,
        leader_id: Arc::new(Mutex::new("-".into())),
        report: Arc::new(Mutex::new(ProxyInfo {
            id: id.clone(),
            ..Default::default()
        })),
        lease_until_ms: Arc::new(AtomicU64::new(0)),
        watching: Arc::new(AtomicBool::new(false)),
        gone: Arc::new(AtomicBool::new(false)),
        born: Instant::now(),
        lease_ttl_s: ttl_s,
        lease_id: Arc::new(AtomicI64::new(0)),
        need_rev: Arc::new(AtomicI64::new(i64::MAX)),
        applied_rev: Arc::new(AtomicI64::new(0)),
        leader_key: Arc::new(Mutex::new(None)),
        synced: Arc::new(tokio::sync::Notify::new()),
    };
    rt.spawn(watch_topology(
        client.clone(),
        keys.clone(),
        publish.clone(),
        fleet.watching.clone(),
    ));
    rt.spawn(observe_leader(
        client.clone(),
        keys.clone(),
        fleet.leader_id.clone(),
    ));
    let lease = Lease {
        client,
        keys,
        id,
        ttl_s,
        until: fleet.lease_until_ms.clone(),
        born: fleet.born,
        report: fleet.report.clone(),
        leader: leader_tx,
        lease_id: fleet.lease_id.clone(),
        need_rev: fleet.need_rev.clone(),
        leader_key: fleet.leader_key.clone(),
        synced: fleet.synced.clone(),
        publish,
    };
    rt.spawn(lease.run());
    fleet
}

/// Follows the topology key; hands every other writer's value to the proxy.
async fn watch_topology(
    mut client: Client,
    keys: Keys,
    publish: Arc<Publish>,
    watching: Arc<AtomicBool>,
) {
    loop {
        let step = async {
            let resp = client.get(keys.topology.clone(), None).await?;
            let from = resp.header().map(|h| h.revision()).unwrap_or(0) + 1;
            if let Some(kv) = resp.kvs().first() {
                publish.offer(kv.mod_revision(), kv.value(), false);
            }
            let opts = WatchOptions::new().with_start_revision(from);
            let mut stream = client.watch(keys.topology.clone(), Some(opts)).await?;
            watching.store(true, Ordering::Relaxed);
            while let Some(msg) = stream.message().await? {
                for ev in msg.events() {
                    if let (EventType::Put, Some(kv)) = (ev.event_type(), ev.kv()) {
                        publish.offer(kv.mod_revision(), kv.value(), false);
                    }
                }
                if msg.canceled() {
                    break;
                }
            }
            Ok::<(), etcd_client::Error>(())
        };
        if let Err(e) = step.await {
            tracing::debug!(error = %e, "topology watch ended");
        }
        watching.store(false, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
    }
}

/// Keeps `leader_id` equal to the election's current winner.
async fn observe_leader(mut client: Client, keys: Keys, leader_id: Arc<Mutex<String>>) {
    loop {
        let step = async {
            let mut stream = client.observe(keys.election.clone()).await?;
            while let Some(resp) = stream.message().await? {
                if let Some(kv) = resp.kv() {
                    *leader_id.lock().expect("leader lock") =
                        String::from_utf8_lossy(kv.value()).into_owned();
                }
            }
            Ok::<(), etcd_client::Error>(())
        };
        if let Err(e) = step.await {
            tracing::debug!(error = %e, "leader observation ended");
        }
        *leader_id.lock().expect("leader lock") = "-".into();
        tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
    }
}

struct Lease {
    client: Client,
    keys: Keys,
    id: String,
    ttl_s: u64,
    until: Arc<AtomicU64>,
    born: Instant,
    report: Arc<Mutex<ProxyInfo>>,
    leader: watch::Sender<bool>,
    lease_id: Arc<AtomicI64>,
    need_rev: Arc<AtomicI64>,
    leader_key: Arc<Mutex<Option<Fence>>>,
    synced: Arc<tokio::sync::Notify>,
    publish: Arc<Publish>,
}

impl Lease {
    /// Grants a lease, registers under it, campaigns with it, renews it; when
    /// it is lost (etcd gone past the TTL, or this process stopped that long),
    /// leadership ends and it all starts again with a new lease.
    async fn run(mut self) {
        loop {
            if let Err(e) = self.once().await {
                tracing::warn!(error = %e, "etcd lease lost; registering again");
            }
            self.step_down();
            tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
        }
    }

    /// Leadership ends with the lease, and so does the fence it held.
    fn step_down(&self) {
        *self.leader_key.lock().expect("leader key lock") = None;
        self.leader.send_replace(false);
    }

    /// Reads the topology under a new lease and hands it to the follower:
    /// until the follower routes by it, this proxy does not serve.
    async fn sync(&mut self) -> Result<(), String> {
        let limit = Duration::from_millis(REQUEST_TIMEOUT_MS);
        let resp = tokio::time::timeout(limit, self.client.get(self.keys.topology.clone(), None))
            .await
            .map_err(|_| "topology read: no answer in time".to_string())?
            .map_err(|e| format!("topology read: {e}"))?;
        let rev = match resp.kvs().first() {
            Some(kv) => {
                self.publish.offer(kv.mod_revision(), kv.value(), true);
                kv.mod_revision()
            }
            None => 0,
        };
        self.need_rev.store(rev, Ordering::SeqCst);
        self.synced.notify_waiters();
        Ok(())
    }

    async fn once(&mut self) -> Result<(), String> {
        let limit = Duration::from_millis(REQUEST_TIMEOUT_MS);
        let bounded = |what: &'static str| move |_| format!("{what}: no answer in time");
        let grant = tokio::time::timeout(limit, self.client.lease_grant(self.ttl_s as i64, None))
            .await
            .map_err(bounded("lease grant"))?
            .map_err(|e| e.to_string())?;
        // Whatever this proxy routes by now was read under an earlier lease
        // (still alive by its clock until now, so it served meanwhile).
        self.need_rev.store(i64::MAX, Ordering::SeqCst);
        let lease = grant.id();
        self.lease_id.store(lease, Ordering::SeqCst);
        let granted_at = self.born.elapsed().as_millis() as u64;
        self.until
            .store(granted_at + grant.ttl() as u64 * 1000, Ordering::Relaxed);
        let key = format!("{}{}", self.keys.proxies, self.id);
        let mut campaign = self.client.clone();
        let (election, id) = (self.keys.election.clone(), self.id.clone());
        let leader = self.leader.clone();
        let fence = self.leader_key.clone();
        let elect = tokio::spawn(async move {
            let r = campaign.campaign(election, id, lease).await;
            if let Ok(won) = &r {
                *fence.lock().expect("leader key lock") =
                    won.leader().map(|k| (k.key().to_vec(), k.rev()));
                leader.send_replace(true);
            }
            r.map(|_| ())
        });
        let (mut keeper, mut acks) =
            tokio::time::timeout(limit, self.client.lease_keep_alive(lease))
                .await
                .map_err(bounded("keep-alive"))?
                .map_err(|e| e.to_string())?;
        let every = Duration::from_millis((self.ttl_s * 1000 / 3).clamp(300, REPORT_MS));
        let mut synced = false;
        let result = loop {
            let info =
                serde_json::to_vec(&*self.report.lock().expect("report lock")).unwrap_or_default();
            let opts = Some(PutOptions::new().with_lease(lease));
            match tokio::time::timeout(limit, self.client.put(key.clone(), info, opts)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => break Err(format!("registration: {e}")),
                Err(_) => break Err("registration: no answer in time".into()),
            }
            if !synced {
                if let Err(e) = self.sync().await {
                    break Err(e);
                }
                synced = true;
            }
            let sent_at = self.born.elapsed().as_millis() as u64;
            let renewed = async {
                keeper.keep_alive().await?;
                acks.message().await
            };
            match tokio::time::timeout(limit, renewed).await {
                Ok(Ok(Some(ack))) if ack.ttl() > 0 => {
                    self.until
                        .store(sent_at + ack.ttl() as u64 * 1000, Ordering::Relaxed);
                }
                Ok(Ok(_)) => break Err("the lease expired".into()),
                Ok(Err(e)) => break Err(format!("keep-alive: {e}")),
                Err(_) => break Err("keep-alive: no answer in time".into()),
            }
            if elect.is_finished() && !*self.leader.borrow() {
                break Ok(());
            }
            tokio::time::sleep(every).await;
        };
        elect.abort();
        self.step_down();
        let _ = tokio::time::timeout(limit, self.client.lease_revoke(lease)).await;
        result
    }
}
