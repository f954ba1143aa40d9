//! A [`Pool`]: one listener, the shards its ring places keys on, and the
//! policies its sessions follow (limits, timeouts, the operator plane). A
//! process runs one pool today, built from the TOML config; a
//! twemproxy `nutcracker.yml` names several, each with its own listener and
//! a ring placing keys as twemproxy would (`twemproxy`, `Ring::twemproxy`).

use crate::proxy::conn::auth::Auth;
use crate::proxy::upstream::shard::ShardSpec;
use crate::proxy::Config;
use crate::ring::{twemproxy, NodeSpec, Ring, RingConfig, RingError};

/// What one proxy serves: built from the config, then handed to
/// `Proxy::new`.
pub struct Pool {
    /// Listener, limits, timeouts and the ring's settings.
    pub(crate) config: Config,
    /// The ring's entries as configured, in config order.
    pub(crate) shards: Vec<ShardSpec>,
    /// `Some`: the ring places keys exactly as this twemproxy pool would
    /// (a pool from `nutcracker.yml`); `None`: the config's `[ring]`.
    pub(crate) twemproxy: Option<twemproxy::Placement>,
    /// How its clients are admitted.
    pub(crate) auth: Auth,
    /// The TOML file `config` was read from: what `CONFIG RELOAD` and
    /// SIGHUP read again (`None`: nothing to reload).
    pub(crate) config_path: Option<std::path::PathBuf>,
}

/// The ring over `nodes` at `epoch`: twemproxy's placement when given, else
/// the `[ring]` settings. Every ring a pool routes by is built here.
pub(crate) fn place(
    twemproxy: Option<twemproxy::Placement>,
    ring: RingConfig,
    nodes: Vec<NodeSpec>,
    epoch: u64,
) -> Result<Ring, RingError> {
    match twemproxy {
        Some(placement) => Ring::twemproxy(nodes, placement, epoch),
        None => Ring::new(nodes, ring, epoch),
    }
}

impl Pool {
    /// The one pool a TOML config describes: one shard per `[[nodes]]`
    /// entry, with the replicas it lists.
    pub fn from_config(config: Config) -> Pool {
        let shards = config
            .nodes
            .iter()
            .cloned()
            .map(|primary| ShardSpec {
                replicas: config
                    .replicas
                    .get(&primary.name)
                    .cloned()
                    .unwrap_or_default(),
                primary,
            })
            .collect();
        let auth = Auth::from_config(&config.auth);
        Pool {
            config,
            shards,
            twemproxy: None,
            auth,
            config_path: None,
        }
    }

    /// The same pool, reloadable from `path` (the file its config was read from).
    pub fn reloadable_from(mut self, path: impl Into<std::path::PathBuf>) -> Pool {
        self.config_path = Some(path.into());
        self
    }

    /// The configured shards' primaries (what the ring is built from when
    /// no saved topology overrides them).
    pub(crate) fn primaries(&self) -> Vec<NodeSpec> {
        self.shards.iter().map(|s| s.primary.clone()).collect()
    }

    /// The ring over `nodes` at `epoch`, placed the pool's way.
    pub(crate) fn ring(&self, nodes: Vec<NodeSpec>, epoch: u64) -> Result<Ring, RingError> {
        place(self.twemproxy, self.config.ring, nodes, epoch)
    }
}
