//! High availability: each shard's replicas, what the proxy knows of every
//! member (liveness, role, offset, lag), and what it does when a primary is
//! lost — the pool's `on_primary_down` policy.
//!
//! ```text
//!  monitor.rs  one probe task per member: INFO replication every
//!              probe_interval_ms ──► status.rs (detector + role/offset)
//!                 │ primary down                 │ replica not following
//!                 ▼                              ▼ the primary
//!  failover.rs promote the replica with the      REPLICAOF primary
//!              highest offset (REPLICAOF NO ONE,  (a returning old primary
//!              ROLE = master), repoint the rest,   is resynced before any
//!              swap the routing snapshot           read goes to it)
//!  reads.rs    read_from (replicas in sync) and write_ack (WAIT 1)
//! ```
//!
//! Placement follows the shard's name only, so nothing here moves a key.
//! The state in [`Ha`] is behind std mutexes held only to copy or replace a
//! small value, never across `.await`.

pub(crate) mod admin;
pub(crate) mod call;
pub(crate) mod failover;
pub(crate) mod monitor;
pub(crate) mod reads;
pub(crate) mod sentinel;
pub(crate) mod status;
pub(crate) mod views;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use crate::proxy::config::ha::HaConfig;
use crate::proxy::upstream::topology::Node;
use crate::proxy::Config;
use crate::ring::NodeSpec;
use status::MemberStatus;

/// The pool's replicas and what is known of every member.
pub(crate) struct Ha {
    pub(crate) config: HaConfig,
    /// Replica addresses of each shard, by the shard's name.
    replicas: Mutex<BTreeMap<String, Vec<String>>>,
    /// Connections to replicas (reads, WAIT goes to primaries), by address.
    nodes: Mutex<HashMap<String, Arc<Node>>>,
    /// Probe results, by member address.
    status: Mutex<HashMap<String, Arc<MemberStatus>>>,
    /// Addresses with a probe task running.
    probing: Mutex<HashSet<String>>,
    /// Shards failing over right now (at most `max_concurrent_failovers`).
    failing: Mutex<HashSet<String>>,
    /// Shards ejected from the ring under `on_primary_down = "remap"`.
    pub(crate) ejected: Mutex<Vec<NodeSpec>>,
    /// Failovers completed.
    pub(crate) failovers: AtomicU64,
    /// The last failover or ejection, in words (`CLUSTER RINGINFO`).
    pub(crate) last_event: Mutex<String>,
}

impl Ha {
    pub(crate) fn new(config: HaConfig, replicas: BTreeMap<String, Vec<String>>) -> Ha {
        Ha {
            config,
            replicas: Mutex::new(replicas),
            nodes: Mutex::default(),
            status: Mutex::default(),
            probing: Mutex::default(),
            failing: Mutex::default(),
            ejected: Mutex::default(),
            failovers: AtomicU64::new(0),
            last_event: Mutex::new(String::new()),
        }
    }

    /// The replica addresses of shard `name`.
    pub(crate) fn replicas_of(&self, name: &str) -> Vec<String> {
        let map = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
        map.get(name).cloned().unwrap_or_default()
    }

    /// Every shard's replicas (what the state file keeps).
    pub(crate) fn all_replicas(&self) -> BTreeMap<String, Vec<String>> {
        self.replicas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// True when some shard has a replica.
    pub(crate) fn has_replicas(&self) -> bool {
        let map = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
        map.values().any(|v| !v.is_empty())
    }

    pub(crate) fn set_replicas(&self, name: &str, addrs: Vec<String>) {
        let mut map = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
        if addrs.is_empty() {
            map.remove(name);
        } else {
            map.insert(name.to_string(), addrs);
        }
    }

    /// The shard whose replica list holds `addr`.
    pub(crate) fn shard_of_replica(&self, addr: &str) -> Option<String> {
        let map = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .find(|(_, v)| v.iter().any(|a| a == addr))
            .map(|(k, _)| k.clone())
    }

    /// The pooled connections to the replicas of shard `name` (created on
    /// first use; they connect lazily), logged in with the shard's
    /// credentials.
    pub(crate) fn replica_nodes(&self, name: &str, config: &Config) -> Vec<Arc<Node>> {
        let addrs = self.replicas_of(name);
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        addrs
            .iter()
            .map(|a| {
                nodes
                    .entry(a.clone())
                    .or_insert_with(|| {
                        let spec = NodeSpec {
                            name: a.clone(),
                            addr: a.clone(),
                            weight: 1,
                        };
                        Arc::new(crate::proxy::upstream::topology::new_member_node(
                            &spec, name, config,
                        ))
                    })
                    .clone()
            })
            .collect()
    }

    /// Drops the pooled connections to `addr` (it became a primary, or left).
    pub(crate) fn forget_node(&self, addr: &str) {
        self.nodes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(addr);
    }

    /// What the probes say of `addr` (a fresh, unknown status at first).
    pub(crate) fn status(&self, addr: &str) -> Arc<MemberStatus> {
        let mut map = self.status.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(addr.to_string()).or_default().clone()
    }

    /// Marks `addr` as probed; false if a probe task runs for it already.
    fn start_probing(&self, addr: &str) -> bool {
        let mut set = self.probing.lock().unwrap_or_else(|e| e.into_inner());
        set.insert(addr.to_string())
    }

    fn stop_probing(&self, addr: &str) {
        let mut set = self.probing.lock().unwrap_or_else(|e| e.into_inner());
        set.remove(addr);
    }

    /// Takes a failover slot for `shard`: `None` while it fails over
    /// already or `max_concurrent_failovers` shards do.
    pub(crate) fn begin_failover(self: &Arc<Self>, shard: &str) -> Option<FailingOver> {
        let mut set = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        if set.contains(shard) || set.len() >= self.config.max_concurrent_failovers {
            return None;
        }
        set.insert(shard.to_string());
        Some(FailingOver {
            ha: self.clone(),
            shard: shard.to_string(),
        })
    }

    /// True while some shard fails over (topology changes wait for it).
    pub(crate) fn is_failing_over(&self) -> bool {
        !self
            .failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    pub(crate) fn is_failing(&self, shard: &str) -> bool {
        self.failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(shard)
    }

    pub(crate) fn note(&self, event: String) {
        tracing::warn!("{event}");
        *self.last_event.lock().unwrap_or_else(|e| e.into_inner()) = event;
    }
}

/// A shard's failover slot, given back when dropped.
pub(crate) struct FailingOver {
    ha: Arc<Ha>,
    shard: String,
}

impl Drop for FailingOver {
    fn drop(&mut self) {
        let mut set = self.ha.failing.lock().unwrap_or_else(|e| e.into_inner());
        set.remove(&self.shard);
    }
}

/// The replica lists of a config, as addresses by shard name.
pub(crate) fn replica_addrs(
    replicas: &BTreeMap<String, Vec<NodeSpec>>,
) -> BTreeMap<String, Vec<String>> {
    replicas
        .iter()
        .map(|(k, v)| (k.clone(), v.iter().map(|n| n.addr.clone()).collect()))
        .collect()
}
