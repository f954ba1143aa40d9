//! The etcd topology store: one ring for a fleet of proxies.
//!
//! ```text
//!  {prefix}/topology         the whole `Saved` (ring, epoch, change and phase), TOML
//!  {prefix}/change           present while a change runs: which, and who started it
//!  {prefix}/proxies/{id}     each live proxy's registration (JSON), under its lease
//!  {prefix}/acks/{id}        the topology revision it routes by (and is ready
//!                            for: see `barrier`), under the same lease
//!  {prefix}/leader/…         the election (etcd's v3election) whose winner drives changes
//! ```
//!
//! Starting a change is one transaction: it writes `change` only if absent
//! and `topology` only if unchanged since this proxy last saw it, so a second
//! change, or one planned on a stale ring, is refused. The gRPC client runs on
//! a runtime of its own (one thread): the [`TopologyStore`] methods are
//! blocking, called from `spawn_blocking` or at start-up, and must not need
//! the proxy's workers. Never touches routing: the proxy reads [`Fleet`].

mod barrier;
mod gone;
mod session;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, Txn, TxnOp};

use crate::proxy::admin::state::{self, Saved, StateError};
use crate::proxy::admin::store::TopologyStore;
use crate::proxy::config::EtcdConfig;
pub(crate) use session::{Fleet, ProxyInfo, Serving};

/// Every request to etcd gives up after this long.
pub(crate) const REQUEST_TIMEOUT_MS: u64 = 2_000;

/// The keys under the prefix.
#[derive(Clone)]
pub(crate) struct Keys {
    pub(crate) topology: String,
    pub(crate) change: String,
    pub(crate) proxies: String,
    pub(crate) acks: String,
    pub(crate) election: String,
}

impl Keys {
    fn new(prefix: &str) -> Keys {
        Keys {
            topology: format!("{prefix}/topology"),
            change: format!("{prefix}/change"),
            proxies: format!("{prefix}/proxies/"),
            acks: format!("{prefix}/acks/"),
            election: format!("{prefix}/leader"),
        }
    }
}

/// What this proxy last knew of the topology key, for the transactions.
#[derive(Clone, Copy, Default)]
pub(crate) struct Seen {
    /// `mod_revision` of the topology last loaded, saved or watched.
    pub(crate) rev: i64,
    /// Whether that topology had a change in progress.
    pub(crate) changing: bool,
    /// The revision of this proxy's own last write (its watch echo is skipped).
    pub(crate) own_rev: i64,
}

pub(crate) struct EtcdStore {
    name: String,
    id: String,
    keys: Keys,
    client: Client,
    rt: tokio::runtime::Handle,
    seen: Arc<Mutex<Seen>>,
    fleet: Fleet,
    /// The highest revision acknowledged under the current lease, and that
    /// lease: acknowledgements only go up (see `barrier`).
    acked: Mutex<(i64, i64)>,
}

/// Runs `fut` on the store's runtime and waits for it (blocking), at most
/// the request timeout: `None` when it took longer or the runtime stopped.
fn block<T: Send + 'static>(
    rt: &tokio::runtime::Handle,
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let limit = Duration::from_millis(REQUEST_TIMEOUT_MS);
        if let Ok(r) = tokio::time::timeout(limit, fut).await {
            let _ = tx.send(r);
        }
    });
    rx.recv().ok()
}

impl EtcdStore {
    /// Connects (bounded by the request timeout) and starts the watch, the
    /// lease and the election; `id` names this proxy in the fleet.
    pub(crate) fn open(cfg: &EtcdConfig, id: String) -> Result<EtcdStore, StateError> {
        let name = format!("etcd {}{}", cfg.endpoints.join(","), cfg.prefix);
        let (htx, hrx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("shardis-etcd".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match rt {
                    Ok(rt) => {
                        let _ = htx.send(Ok(rt.handle().clone()));
                        rt.block_on(std::future::pending::<()>());
                    }
                    Err(e) => {
                        let _ = htx.send(Err(e.to_string()));
                    }
                }
            })
            .map_err(|e| StateError::Store {
                store: name.clone(),
                message: e.to_string(),
            })?;
        let unreachable = |message: String| StateError::Store {
            store: name.clone(),
            message,
        };
        let rt = hrx
            .recv()
            .map_err(|e| unreachable(e.to_string()))?
            .map_err(unreachable)?;
        let timeout = Duration::from_millis(REQUEST_TIMEOUT_MS);
        // No per-request timeout on the client: a campaign waits as long as
        // another proxy leads. Each request is bounded where it is made.
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_keep_alive(Duration::from_secs(1), timeout);
        if let Some((u, p)) = &cfg.credentials {
            opts = opts.with_user(u.clone(), p.clone());
        }
        let endpoints = cfg.endpoints.clone();
        let client = block(
            &rt,
            async move { Client::connect(endpoints, Some(opts)).await },
        )
        .ok_or_else(|| unreachable("no answer in time".into()))?
        .map_err(|e| unreachable(format!("cannot connect: {e}")))?;
        let keys = Keys::new(&cfg.prefix);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let fleet = session::start(
            &rt,
            client.clone(),
            keys.clone(),
            id.clone(),
            cfg.lease_ttl_s,
            seen.clone(),
            name.clone(),
        );
        fleet.probe(&rt, cfg.endpoints.clone());
        // Registered and caught up before the proxy starts serving.
        fleet.wait_synced(&rt, Duration::from_millis(REQUEST_TIMEOUT_MS));
        Ok(EtcdStore {
            name,
            id,
            keys,
            client,
            rt,
            seen,
            fleet,
            acked: Mutex::new((0, 0)),
        })
    }

    fn error(&self, e: impl std::fmt::Display) -> StateError {
        StateError::Store {
            store: self.name.clone(),
            message: format!("etcd unreachable or refused: {e}"),
        }
    }

    fn busy(&self, message: String) -> StateError {
        StateError::Busy {
            store: self.name.clone(),
            message,
        }
    }

    fn get(&self) -> Result<Option<(i64, Saved)>, StateError> {
        let mut c = self.client.clone();
        let key = self.keys.topology.clone();
        let resp = block(&self.rt, async move { c.get(key, None).await })
            .ok_or_else(|| self.error("no answer in time"))?
            .map_err(|e| self.error(e))?;
        let Some(kv) = resp.kvs().first() else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(kv.value());
        let saved = state::decode(&self.name, &text)?;
        let mut seen = self.seen.lock().expect("seen lock");
        if kv.mod_revision() > seen.rev {
            seen.rev = kv.mod_revision();
            seen.changing = saved.migration.is_some();
        }
        Ok(Some((kv.mod_revision(), saved)))
    }

    fn txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse, StateError> {
        let mut c = self.client.clone();
        block(&self.rt, async move { c.txn(txn).await })
            .ok_or_else(|| self.error("no answer in time"))?
            .map_err(|e| self.error(e))
    }

    /// The condition a phase write carries: this proxy's election key still
    /// exists as it was created when this proxy won, so a leader whose lease
    /// expired (another has won since) cannot write the next phase.
    fn fence(&self) -> Result<Compare, StateError> {
        match &*self.fleet.leader_key.lock().expect("leader key lock") {
            Some((key, rev)) => Ok(Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                *rev,
            )),
            None => Err(self.busy(
                "this proxy no longer leads the fleet (its lease lapsed); the change goes on under the new leader".into(),
            )),
        }
    }

    /// The change key's value from a failed transaction's `else` branch.
    fn holder(resp: &etcd_client::TxnResponse) -> Option<String> {
        resp.op_responses().into_iter().find_map(|r| match r {
            etcd_client::TxnOpResponse::Get(g) => g
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
            _ => None,
        })
    }
}

impl TopologyStore for EtcdStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn load(&self) -> Result<Option<Saved>, StateError> {
        Ok(self.get()?.map(|(_, s)| s))
    }

    fn load_or_seed(&self, seed: &Saved) -> Result<Option<Saved>, StateError> {
        if let Some(s) = self.load()? {
            return Ok(Some(s));
        }
        // First proxy on an empty store: the config's ring, if nobody beat us to it.
        let text = state::encode(seed)?;
        let key = self.keys.topology.clone();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, text, None)]);
        let resp = self.txn(txn)?;
        if resp.succeeded() {
            let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
            let mut seen = self.seen.lock().expect("seen lock");
            *seen = Seen {
                rev,
                changing: false,
                own_rev: rev,
            };
            tracing::info!(store = %self.name, epoch = seed.epoch, nodes = seed.nodes.len(), "seeded an empty topology store from the config");
            return Ok(None);
        }
        self.load()
    }

    fn save(&self, saved: &Saved) -> Result<(), StateError> {
        let text = state::encode(saved)?;
        let seen = *self.seen.lock().expect("seen lock");
        let k = &self.keys;
        let topo = || TxnOp::put(k.topology.clone(), text.clone(), None);
        let unchanged = || {
            vec![
                Compare::version(k.change.clone(), CompareOp::Equal, 0),
                Compare::mod_revision(k.topology.clone(), CompareOp::Equal, seen.rev),
            ]
        };
        let holder = TxnOp::get(k.change.clone(), None);
        let txn = match (seen.changing, saved.migration.as_ref()) {
            (false, Some(m)) => {
                let what = format!(
                    "epoch {} -> {} ({}), started by proxy {}",
                    saved.epoch,
                    m.other_epoch,
                    crate::proxy::admin::state::change_label(saved),
                    self.id
                );
                Txn::new()
                    .when(unchanged())
                    .and_then([TxnOp::put(k.change.clone(), what, None), topo()])
                    .or_else([holder])
            }
            (true, Some(_)) => Txn::new()
                .when([
                    Compare::version(k.change.clone(), CompareOp::Greater, 0),
                    self.fence()?,
                ])
                .and_then([topo()]),
            (true, None) => Txn::new()
                .when([self.fence()?])
                .and_then([topo(), TxnOp::delete(k.change.clone(), None)]),
            (false, None) => Txn::new()
                .when(unchanged())
                .and_then([topo()])
                .or_else([holder]),
        };
        let resp = self.txn(txn)?;
        if !resp.succeeded() {
            return Err(match Self::holder(&resp) {
                Some(h) => self.busy(format!("another topology change is in progress ({h}); retry when CLUSTER RINGINFO shows state:ok")),
                None if seen.changing => self.busy("the change in progress was ended by another proxy, or this proxy no longer leads the fleet".into()),
                None => self.busy("the topology changed in etcd meanwhile (written by another proxy); retry".into()),
            });
        }
        let rev = resp.header().map(|h| h.revision()).unwrap_or(seen.rev);
        let mut now = self.seen.lock().expect("seen lock");
        *now = Seen {
            rev,
            changing: saved.migration.is_some(),
            own_rev: rev,
        };
        drop(now);
        // The writer routes by what it wrote (it swaps it in at once).
        self.fleet.routed_by(rev);
        Ok(())
    }

    fn fleet(&self) -> Option<&Fleet> {
        Some(&self.fleet)
    }

    fn proxies(&self) -> Result<Vec<ProxyInfo>, StateError> {
        let mut c = self.client.clone();
        let key = self.keys.proxies.clone();
        let resp = block(&self.rt, async move {
            c.get(key, Some(etcd_client::GetOptions::new().with_prefix()))
                .await
        })
        .ok_or_else(|| self.error("no answer in time"))?
        .map_err(|e| self.error(e))?;
        let mut out: Vec<ProxyInfo> = resp
            .kvs()
            .iter()
            .filter_map(|kv| serde_json::from_slice(kv.value()).ok())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    fn revision(&self) -> i64 {
        self.seen.lock().expect("seen lock").rev
    }

    fn acknowledge(&self, rev: i64) -> Result<(), StateError> {
        EtcdStore::acknowledge(self, rev)
    }

    fn await_acks(&self, rev: i64, max: Duration) -> Result<Vec<(String, i64)>, StateError> {
        EtcdStore::await_acks(self, rev, max)
    }
}
