//! Reload without restart: `CONFIG RELOAD` and SIGHUP read the config file
//! again and apply it to the running proxy.
//!
//! - A file that does not load (bad TOML, a bad field) is refused whole:
//!   the running config stays, the error names the file and the field.
//! - Limits and timeouts apply to new work at once: the config is swapped
//!   whole (new connections, new requests, the mover's next batch read it)
//!   and every node's connections read the upstream timeouts live.
//! - Node changes (a `[[nodes]]` entry added or removed, a weight changed)
//!   go through the ADDNODE / REMOVENODE path, so they keep its guarantees.
//!   The ring takes one change at a time, so a reload with several queues
//!   them: adds first, then weights, then removals, each started once the
//!   one before has finished. A reload while another reload is applying its
//!   changes, or while a change started elsewhere runs, is refused whole.
//! - Settings only a restart can change (the listeners, threads, the
//!   topology store, users, TLS files' paths, …) are kept as they are, and
//!   the log names each one the file changed.
//!
//! A file with no `[[nodes]]` at all (as under `shardis up`, which starts its
//! own) leaves the ring alone. Otherwise the ring is compared with the file:
//! a node the file lists and the ring lacks is added, a node the previous
//! file listed and this one does not is removed (a node added with CLUSTER
//! ADDNODE and never written in a file stays), a weight that differs is
//! changed. A node whose address differs from the ring's is refused: a
//! reload never moves a node.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::migration::{self, Change};
use super::{add_node, await_fleet, remove_node, start_change, AdminError};
use crate::proxy::conn::pending::Pending;
use crate::proxy::{Config, Proxy};
use crate::resp::encode;
use crate::ring::NodeSpec;

/// How long a reload waits for each of its node changes to finish.
const CHANGE_WAIT_MS: u64 = 600_000;

/// Why a reload was refused or stopped part-way; `Display` is the line
/// after `ERR `.
#[derive(Debug)]
pub(crate) enum ReloadError {
    /// The proxy was not started from a TOML file.
    NoFile,
    /// Another reload is still applying its node changes.
    Busy,
    /// The file does not load; nothing changed.
    Refused(String),
    /// A node whose address in the file is not the ring's.
    Moved {
        name: String,
        ring: String,
        file: String,
    },
    /// A change started elsewhere is running and the file changes nodes.
    InProgress,
    /// The settings were applied and `done` of `total` node changes; this
    /// one failed and the rest were not started.
    Change {
        done: usize,
        total: usize,
        label: String,
        why: String,
    },
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::NoFile => f.write_str(
                "CONFIG RELOAD: this proxy was not started from a TOML config file, there is nothing to read again",
            ),
            ReloadError::Busy => f.write_str(
                "CONFIG RELOAD: the previous reload is still applying its node changes; retry when CLUSTER RINGINFO shows state:ok",
            ),
            ReloadError::Refused(e) => {
                write!(f, "CONFIG RELOAD refused, the running config stays: {e}")
            }
            ReloadError::Moved { name, ring, file } => write!(
                f,
                "CONFIG RELOAD refused, the running config stays: node {name} is at {ring} in the ring but at {file} in the file; a reload does not move a node (REMOVENODE it, then ADDNODE the new address under another name)"
            ),
            ReloadError::InProgress => f.write_str(
                "CONFIG RELOAD refused, the running config stays: the file changes nodes and a topology change is in progress; retry when CLUSTER RINGINFO shows state:ok",
            ),
            ReloadError::Change {
                done,
                total,
                label,
                why,
            } => write!(
                f,
                "CONFIG RELOAD: the settings were applied and {done} of {total} node changes; {label} failed: {why}; the rest were not started (reload again to retry)"
            ),
        }
    }
}

/// `CONFIG RELOAD`: `+OK` once the settings apply and every node change
/// the file asks for has finished, else the error.
pub(crate) fn command(proxy: &Arc<Proxy>) -> Pending {
    let proxy = proxy.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut out = BytesMut::new();
        match reload(&proxy).await {
            Ok(()) => encode::simple(&mut out, "OK"),
            Err(e) => encode::error(&mut out, &format!("ERR {e}")),
        }
        let _ = tx.send(out.freeze());
    });
    Pending::One(rx)
}

/// Wakes every proxy's reload (notify_waiters: a reload asked for while one
/// runs is refused as busy anyway).
static RELOAD: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Read the config file again now (`SIGHUP`), as `CONFIG RELOAD` does.
pub fn request_reload() {
    RELOAD.notify_waiters();
}

/// Reloads `proxy` on every [`request_reload`], until the proxy is gone.
pub(crate) fn follow_reloads(proxy: &Arc<Proxy>) {
    if proxy.config_path.is_none() {
        return;
    }
    let weak = Arc::downgrade(proxy);
    tokio::spawn(async move {
        loop {
            RELOAD.notified().await;
            let Some(proxy) = weak.upgrade() else { return };
            // The log says how it went (reload logs each step).
            let _ = reload(&proxy).await;
        }
    });
}

/// Reads the file again and applies it (see the module comment).
pub(crate) async fn reload(proxy: &Arc<Proxy>) -> Result<(), ReloadError> {
    let r = reload_file(proxy).await;
    match &r {
        Ok(()) => tracing::info!("config reloaded"),
        Err(e) => tracing::warn!("{e}"),
    }
    r
}

async fn reload_file(proxy: &Arc<Proxy>) -> Result<(), ReloadError> {
    let path = proxy.config_path.clone().ok_or(ReloadError::NoFile)?;
    let _reloading = proxy.reloading.try_lock().map_err(|_| ReloadError::Busy)?;
    let old = proxy.config();
    let new = Config::load(&path).map_err(ReloadError::Refused)?;
    let changes = node_changes(&old, &new, proxy.routing.load().ring.nodes())?;
    if !changes.is_empty()
        && (proxy.routing.load().migration.is_some() || proxy.migration.is_changing())
    {
        return Err(ReloadError::InProgress);
    }
    let restart = restart_only(&old, &new);
    if !restart.is_empty() {
        tracing::warn!(
            file = %path.display(),
            "changed in the file, kept until a restart: {}",
            restart.join(", ")
        );
    }
    let live = Arc::new(settings(&old, &new, old.nodes.clone()));
    proxy
        .timeouts
        .set(live.connect_timeout_ms, live.request_timeout_ms);
    proxy.config.store(live.clone());
    tracing::info!(file = %path.display(), node_changes = changes.len(), "config reloaded: limits and timeouts apply to new work");
    let total = changes.len();
    for (done, change) in changes.into_iter().enumerate() {
        let (_, label) = change.next_nodes(&[]);
        tracing::info!("reload: {label} ({} of {total})", done + 1);
        let failed = |why: String| ReloadError::Change {
            done,
            total,
            label: label.clone(),
            why,
        };
        apply(proxy, change, &new)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !settled(proxy, Duration::from_millis(CHANGE_WAIT_MS)).await {
            return Err(failed("it did not finish in time".into()));
        }
        let t = proxy.migration.text();
        if t.state == "aborted" {
            return Err(failed(t.last_error));
        }
    }
    // Every change applied: the next reload compares with this file.
    if !new.nodes.is_empty() {
        proxy
            .config
            .store(Arc::new(settings(&old, &new, new.nodes.clone())));
    }
    Ok(())
}

/// Starts one change the way its admin command does.
async fn apply(proxy: &Arc<Proxy>, change: Change, new: &Config) -> Result<(), AdminError> {
    match change {
        Change::Add(NodeSpec { name, addr, weight }) => {
            let mut args: Vec<Bytes> =
                vec![addr.into(), "WEIGHT".into(), weight.to_string().into()];
            args.extend(["NAME".into(), name.clone().into()]);
            let replicas: Vec<String> = new
                .replicas
                .get(&name)
                .into_iter()
                .flatten()
                .map(|r| r.addr.clone())
                .collect();
            if !replicas.is_empty() {
                args.extend(["REPLICAS".into(), replicas.join(",").into()]);
            }
            add_node(proxy, &args).await
        }
        Change::Remove(name) => remove_node(proxy, &name).await,
        reweight => {
            let lock = start_change(proxy).await?.0;
            migration::begin(proxy, reweight).await?;
            drop(lock);
            await_fleet(proxy).await
        }
    }
}

/// Waits until no change runs here (the copy, cutover and sweep are done).
async fn settled(proxy: &Proxy, max: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + max;
    // Polled: the fleet's followers and the leader end a change on
    // different paths, and a 50 ms tick is nothing next to a copy.
    while proxy.routing.load().migration.is_some() || proxy.migration.is_changing() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// The node changes that make `ring` what `new` lists, in the order they
/// run: adds, weights, removals (see the module comment).
fn node_changes(old: &Config, new: &Config, ring: &[NodeSpec]) -> Result<Vec<Change>, ReloadError> {
    if new.nodes.is_empty() {
        return Ok(Vec::new());
    }
    let in_ring = |name: &str| ring.iter().find(|n| n.name == name);
    let (mut adds, mut weights) = (Vec::new(), Vec::new());
    for n in &new.nodes {
        match in_ring(&n.name) {
            None => adds.push(Change::Add(n.clone())),
            Some(r) if r.addr != n.addr => {
                return Err(ReloadError::Moved {
                    name: n.name.clone(),
                    ring: r.addr.clone(),
                    file: n.addr.clone(),
                })
            }
            Some(r) if r.weight != n.weight => weights.push(Change::Reweight {
                name: n.name.clone(),
                weight: n.weight,
            }),
            Some(_) => {}
        }
    }
    let removes = old
        .nodes
        .iter()
        .filter(|o| !new.nodes.iter().any(|n| n.name == o.name))
        .filter(|o| in_ring(&o.name).is_some())
        .map(|o| Change::Remove(o.name.clone()));
    adds.extend(weights);
    adds.extend(removes);
    Ok(adds)
}

/// The running config `old` with `new`'s limits and timeouts, over `nodes`.
fn settings(old: &Config, new: &Config, nodes: Vec<NodeSpec>) -> Config {
    Config {
        connect_timeout_ms: new.connect_timeout_ms,
        request_timeout_ms: new.request_timeout_ms,
        max_clients: new.max_clients,
        pipeline_depth: new.pipeline_depth,
        limits: new.limits,
        output_limits: new.output_limits,
        drain_timeout_ms: new.drain_timeout_ms,
        migration: new.migration,
        nodes,
        ..old.clone()
    }
}

/// The settings `new` changes that only a restart applies, by field.
fn restart_only(old: &Config, new: &Config) -> Vec<&'static str> {
    let differs =
        |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") != format!("{b:?}");
    [
        ("proxy.listen", differs(&old.listen, &new.listen)),
        ("proxy.threads", differs(&old.threads, &new.threads)),
        (
            "proxy.connections_per_node",
            differs(&old.connections_per_node, &new.connections_per_node),
        ),
        (
            "proxy.max_pinned_per_node",
            differs(&old.max_pinned_per_node, &new.max_pinned_per_node),
        ),
        (
            "proxy.max_query_buffer_total",
            differs(&old.max_query_buffer_total, &new.max_query_buffer_total),
        ),
        (
            "proxy.max_output_buffer_total",
            differs(&old.max_output_buffer_total, &new.max_output_buffer_total),
        ),
        (
            "proxy.state_file",
            differs(&old.state_file, &new.state_file),
        ),
        ("[ring]", differs(&old.ring, &new.ring)),
        ("[topology]", differs(&old.topology, &new.topology)),
        ("users and requirepass", differs(&old.auth, &new.auth)),
        (
            "[failover]",
            differs(&old.ha, &new.ha) || differs(&old.sentinel, &new.sentinel),
        ),
        ("replicas", differs(&old.replicas, &new.replicas)),
        ("node credentials", differs(&old.node_auth, &new.node_auth)),
        ("[tls]", differs(&old.tls, &new.tls)),
        (
            "[admin], [hot_keys], [slowlog]",
            differs(&old.ops, &new.ops),
        ),
    ]
    .into_iter()
    .filter_map(|(name, changed)| changed.then_some(name))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(nodes: &[(&str, &str, u32)]) -> Config {
        let mut text = String::new();
        for (name, addr, weight) in nodes {
            text +=
                &format!("[[nodes]]\nname = \"{name}\"\naddr = \"{addr}\"\nweight = {weight}\n");
        }
        Config::parse(&text).unwrap()
    }

    fn labels(changes: &[Change]) -> Vec<String> {
        changes.iter().map(|c| c.next_nodes(&[]).1).collect()
    }

    #[test]
    fn node_changes_run_adds_then_weights_then_removals() {
        let old = config(&[
            ("a", "127.0.0.1:1", 1),
            ("b", "127.0.0.1:2", 1),
            ("c", "127.0.0.1:3", 1),
        ]);
        let new = config(&[
            ("a", "127.0.0.1:1", 2),
            ("b", "127.0.0.1:2", 1),
            ("d", "127.0.0.1:4", 1),
        ]);
        let changes = node_changes(&old, &new, &old.nodes).unwrap();
        assert_eq!(labels(&changes), ["add d", "reweight a to 2", "remove c"]);
    }

    #[test]
    fn a_node_added_at_run_time_and_in_no_file_stays() {
        let old = config(&[("a", "127.0.0.1:1", 1)]);
        let mut ring = old.nodes.clone();
        ring.push(NodeSpec {
            name: "x".into(),
            addr: "127.0.0.1:9".into(),
            weight: 1,
        });
        assert!(node_changes(&old, &old, &ring).unwrap().is_empty());
    }

    #[test]
    fn a_file_without_nodes_leaves_the_ring_alone() {
        let old = config(&[("a", "127.0.0.1:1", 1)]);
        let new = Config::parse("").unwrap();
        assert!(node_changes(&old, &new, &old.nodes).unwrap().is_empty());
    }

    #[test]
    fn a_node_at_another_address_is_refused() {
        let old = config(&[("a", "127.0.0.1:1", 1)]);
        let new = config(&[("a", "127.0.0.1:5", 1)]);
        let e = node_changes(&old, &new, &old.nodes).unwrap_err();
        assert!(
            e.to_string()
                .contains("node a is at 127.0.0.1:1 in the ring but at 127.0.0.1:5"),
            "{e}"
        );
    }
}
