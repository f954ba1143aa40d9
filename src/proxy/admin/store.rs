//! Where the topology is kept between runs: a [`TopologyStore`] loads the
//! saved topology at start and saves each change's phase (copy, sweep,
//! done) as the change passes it. [`StateFile`] — the `state_file` of the
//! config — is one proxy's store; the etcd store (`admin::etcd`) is shared by
//! a fleet and also offers a [`Fleet`]: other proxies' writes, the election,
//! the registrations. The migration engine and the start-up path see only
//! the trait.

use std::sync::Arc;
use std::time::Duration;

use crate::proxy::admin::etcd::{EtcdStore, Fleet, ProxyInfo};
use crate::proxy::admin::state::{self, Saved, StateError};
use crate::proxy::config::TopologyConfig;

/// A place that keeps the topology (ring, epoch, a change in progress).
pub(crate) trait TopologyStore: Send + Sync {
    /// What to name in logs and errors (the file's path).
    fn name(&self) -> &str;

    /// The saved topology; `Ok(None)` when nothing was saved yet.
    fn load(&self) -> Result<Option<Saved>, StateError>;

    /// Saves the topology and the phase of the change in progress.
    /// Blocking (a file store fsyncs): call it off the runtime's workers.
    fn save(&self, state: &Saved) -> Result<(), StateError>;

    /// At start: the saved topology, or `Ok(None)` after making `seed` (the
    /// config's ring) the saved one. A file is only written on a change, so
    /// the file store just loads.
    fn load_or_seed(&self, _seed: &Saved) -> Result<Option<Saved>, StateError> {
        self.load()
    }

    /// The fleet this store is shared with; `None` for a store one proxy owns.
    fn fleet(&self) -> Option<&Fleet> {
        None
    }

    /// The live proxies sharing this store (blocking).
    fn proxies(&self) -> Result<Vec<ProxyInfo>, StateError> {
        Ok(Vec::new())
    }

    /// The newest topology revision this proxy knows (0 for a file).
    fn revision(&self) -> i64 {
        0
    }

    /// Tells the fleet this proxy routes by, and is ready for, revision
    /// `rev` (blocking; nothing to tell for a store one proxy owns).
    fn acknowledge(&self, _rev: i64) -> Result<(), StateError> {
        Ok(())
    }

    /// The fleet's barrier (blocking): waits, at most `max`, until every
    /// other live proxy has acknowledged `rev` or lost its lease; returns
    /// those that acknowledged, each with its lease.
    fn await_acks(&self, _rev: i64, _max: Duration) -> Result<Vec<(String, i64)>, StateError> {
        Ok(Vec::new())
    }
}

/// True unless `store` is shared and another proxy holds the election: the
/// one question the migration engine asks of the fleet.
pub(crate) fn is_leader(store: Option<&dyn TopologyStore>) -> bool {
    store
        .and_then(|s| s.fleet())
        .is_none_or(|f| *f.leader.borrow())
}

/// Whether a proxy over `store` may route keyed requests now: always,
/// unless the store is shared and the proxy's lease lapsed or it has not
/// caught up since (see `admin::etcd`'s session). Read per request.
pub(crate) fn is_serving(store: Option<&dyn TopologyStore>) -> bool {
    store.and_then(|s| s.fleet()).is_none_or(|f| f.is_serving())
}

/// Why a request that routes by the ring is refused now, if it is: the
/// fleet's serving gate (see `Serving`; never refuses without a fleet).
/// Read per request: the common case is one atomic load or three.
pub(crate) fn refusal(
    proxy: &crate::proxy::Proxy,
    cmd: &crate::proxy::policy::CommandSpec,
    args: &[bytes::Bytes],
) -> Option<&'static str> {
    use crate::proxy::admin::etcd::Serving;
    use crate::proxy::conn::error::{MOVING_WITHOUT_ETCD, NOT_SERVING, READS_ONLY_WITHOUT_ETCD};
    let serving = proxy.store.as_deref()?.fleet()?.serving();
    let moving = || {
        let routing = proxy.routing.load();
        routing.migration.is_some()
            && (matches!(cmd.kind, crate::proxy::policy::Kind::FanOut(_))
                || cmd
                    .key_positions(args)
                    .unwrap_or_default()
                    .iter()
                    .any(|&i| routing.is_moving(&args[i])))
    };
    match serving {
        Serving::All => None,
        Serving::Nothing => Some(NOT_SERVING),
        Serving::SteadyKeys => moving().then_some(MOVING_WITHOUT_ETCD),
        Serving::Reads => {
            let pinned = matches!(cmd.kind, crate::proxy::policy::Kind::Pinned(_));
            (cmd.is_write() || pinned || moving()).then_some(READS_ONLY_WITHOUT_ETCD)
        }
    }
}

/// The state file: TOML, written atomically (see `state`).
pub(crate) struct StateFile {
    path: String,
}

impl TopologyStore for StateFile {
    fn name(&self) -> &str {
        &self.path
    }

    fn load(&self) -> Result<Option<Saved>, StateError> {
        state::load(&self.path)
    }

    fn save(&self, saved: &Saved) -> Result<(), StateError> {
        state::save(&self.path, saved)
    }
}

/// The store the config names, if any (`[topology]`, `proxy.state_file`);
/// `id` names this proxy to a shared store.
pub(crate) fn open(
    topology: &TopologyConfig,
    state_file: Option<&str>,
    id: String,
) -> Result<Option<Arc<dyn TopologyStore>>, StateError> {
    if let Some(etcd) = topology.etcd() {
        let id = etcd.proxy_id.clone().unwrap_or(id);
        return Ok(Some(Arc::new(EtcdStore::open(etcd, id)?)));
    }
    Ok(state_file.map(|path| {
        Arc::new(StateFile {
            path: path.to_string(),
        }) as Arc<dyn TopologyStore>
    }))
}
