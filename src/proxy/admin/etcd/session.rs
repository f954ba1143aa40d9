//! The etcd store's background work, on its own runtime: the watch of the
//! topology key (other proxies' writes, handed to the proxy through
//! [`Fleet::others`]), this proxy's lease and its registration under it, and
//! the election whose winner drives changes. Each loop retries after a
//! failure with a short pause, so an etcd restart is survived; none of them
//! touches routing (the proxy's follower, `admin::follow`, does).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, EventType, PutOptions, WatchOptions};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

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

/// What the proxy reads of the fleet (and the one thing it writes: its report).
pub(crate) struct Fleet {
    pub(crate) id: String,
    /// The newest topology written by another proxy.
    pub(crate) others: watch::Receiver<Option<Saved>>,
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
    born: Instant,
    pub(crate) lease_ttl_s: u64,
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
        born: Instant::now(),
        lease_ttl_s: ttl_s,
    };
    rt.spawn(watch_topology(
        client.clone(),
        keys.clone(),
        seen,
        others_tx,
        fleet.watching.clone(),
        name,
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
    };
    rt.spawn(lease.run());
    fleet
}

/// Follows the topology key; hands every other writer's value to the proxy.
async fn watch_topology(
    mut client: Client,
    keys: Keys,
    seen: Arc<Mutex<Seen>>,
    tx: watch::Sender<Option<Saved>>,
    watching: Arc<AtomicBool>,
    name: String,
) {
    let publish = |rev: i64, value: &[u8]| {
        let text = String::from_utf8_lossy(value);
        let saved = match state::decode(&name, &text) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "ignored an unreadable topology in etcd");
                return;
            }
        };
        let mut s = seen.lock().expect("seen lock");
        if rev < s.rev || rev == s.own_rev {
            return;
        }
        s.rev = rev;
        s.changing = saved.migration.is_some();
        drop(s);
        tx.send_replace(Some(saved));
    };
    loop {
        let step = async {
            let resp = client.get(keys.topology.clone(), None).await?;
            let from = resp.header().map(|h| h.revision()).unwrap_or(0) + 1;
            if let Some(kv) = resp.kvs().first() {
                publish(kv.mod_revision(), kv.value());
            }
            let opts = WatchOptions::new().with_start_revision(from);
            let mut stream = client.watch(keys.topology.clone(), Some(opts)).await?;
            watching.store(true, Ordering::Relaxed);
            while let Some(msg) = stream.message().await? {
                for ev in msg.events() {
                    if let (EventType::Put, Some(kv)) = (ev.event_type(), ev.kv()) {
                        publish(kv.mod_revision(), kv.value());
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
            self.leader.send_replace(false);
            tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
        }
    }

    async fn once(&mut self) -> Result<(), String> {
        let limit = Duration::from_millis(REQUEST_TIMEOUT_MS);
        let bounded = |what: &'static str| move |_| format!("{what}: no answer in time");
        let grant = tokio::time::timeout(limit, self.client.lease_grant(self.ttl_s as i64, None))
            .await
            .map_err(bounded("lease grant"))?
            .map_err(|e| e.to_string())?;
        let lease = grant.id();
        let granted_at = self.born.elapsed().as_millis() as u64;
        self.until
            .store(granted_at + grant.ttl() as u64 * 1000, Ordering::Relaxed);
        let key = format!("{}{}", self.keys.proxies, self.id);
        let mut campaign = self.client.clone();
        let (election, id) = (self.keys.election.clone(), self.id.clone());
        let leader = self.leader.clone();
        let elect = tokio::spawn(async move {
            let r = campaign.campaign(election, id, lease).await;
            if r.is_ok() {
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
        let result = loop {
            let info =
                serde_json::to_vec(&*self.report.lock().expect("report lock")).unwrap_or_default();
            let opts = Some(PutOptions::new().with_lease(lease));
            match tokio::time::timeout(limit, self.client.put(key.clone(), info, opts)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => break Err(format!("registration: {e}")),
                Err(_) => break Err("registration: no answer in time".into()),
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
        self.leader.send_replace(false);
        let _ = tokio::time::timeout(limit, self.client.lease_revoke(lease)).await;
        result
    }
}
