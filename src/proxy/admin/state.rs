//! The persisted topology: the nodes of the current ring, its epoch, and, while
//! a migration runs, the previous ring's nodes — so a restarted proxy routes
//! exactly as before and resumes an unfinished migration.
//!
//! Written atomically (a temporary file in the same directory, fsync, rename)
//! by the migration engine after every step of a change, always off the
//! runtime's worker threads (`migration::persist` runs [`save`] under
//! `spawn_blocking`, since fsync can take milliseconds); read once at start-up.
//! Nothing here touches the routing snapshot.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ring::NodeSpec;

/// Why the state file could not be read or written. Every variant names the
/// file; `Display` is the one place that words them.
#[derive(Debug)]
pub enum StateError {
    /// The file exists but could not be read.
    Read { path: String, err: std::io::Error },
    /// The file is not valid TOML of the expected shape.
    Parse { path: String, message: String },
    /// The file lists no nodes.
    NoNodes { path: String },
    /// The state could not be encoded as TOML.
    Encode(String),
    /// Creating, writing, syncing or renaming the file failed.
    Write { path: String, err: std::io::Error },
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Read { path, err } | StateError::Write { path, err } => {
                write!(f, "{path}: {err}")
            }
            StateError::Parse { path, message } => write!(f, "{path}: {message}"),
            StateError::NoNodes { path } => write!(f, "{path}: nodes: empty"),
            StateError::Encode(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for StateError {}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedNode {
    pub name: String,
    pub addr: String,
    pub weight: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedMigration {
    /// `copy` (the file's ring still routes; `other` is the next ring) or
    /// `sweep` (the file's ring routes; `other` is the previous ring, whose
    /// leftover copies are being deleted).
    pub phase: String,
    pub other_epoch: u64,
    pub other_nodes: Vec<SavedNode>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct File {
    epoch: u64,
    nodes: Vec<SavedNode>,
    migration: Option<SavedMigration>,
    /// Nodes still holding copies of keys they do not own (see `Saved`).
    #[serde(default)]
    pending_sweep: Vec<SavedNode>,
    /// Each shard's replicas (`host:port`), by the shard's name.
    #[serde(default)]
    replicas: BTreeMap<String, Vec<String>>,
}

/// The topology, as written to and read back from disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub epoch: u64,
    pub nodes: Vec<NodeSpec>,
    pub migration: Option<SavedMigration>,
    /// Nodes that were unreachable when their copies were to be deleted (an
    /// old owner after a cutover, a joining node after an abort): the proxy
    /// keeps retrying, and flushes such a node's strays before re-adding it.
    pub pending_sweep: Vec<NodeSpec>,
    /// Each shard's replicas by the shard's name: after a failover the
    /// old primary is one of them, and a restarted proxy keeps it so.
    pub replicas: BTreeMap<String, Vec<String>>,
}

pub(crate) fn to_saved(nodes: &[NodeSpec]) -> Vec<SavedNode> {
    nodes
        .iter()
        .map(|n| SavedNode {
            name: n.name.clone(),
            addr: n.addr.clone(),
            weight: n.weight,
        })
        .collect()
}

pub fn to_specs(nodes: &[SavedNode]) -> Vec<NodeSpec> {
    nodes
        .iter()
        .map(|n| NodeSpec {
            name: n.name.clone(),
            addr: n.addr.clone(),
            weight: n.weight,
        })
        .collect()
}

/// Reads the state file; `Ok(None)` when it does not exist yet.
pub fn load(path: &str) -> Result<Option<Saved>, StateError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => {
            return Err(StateError::Read {
                path: path.to_string(),
                err,
            })
        }
    };
    let f: File = toml::from_str(&text).map_err(|e| StateError::Parse {
        path: path.to_string(),
        message: e.message().to_string(),
    })?;
    if f.nodes.is_empty() {
        return Err(StateError::NoNodes {
            path: path.to_string(),
        });
    }
    Ok(Some(Saved {
        epoch: f.epoch,
        nodes: to_specs(&f.nodes),
        migration: f.migration,
        pending_sweep: to_specs(&f.pending_sweep),
        replicas: f.replicas,
    }))
}

/// Writes the state file atomically. Blocking (fsync): call it off the
/// runtime's worker threads. The error names the file and the OS error.
pub(crate) fn save(path: &str, state: &Saved) -> Result<(), StateError> {
    let f = File {
        epoch: state.epoch,
        nodes: to_saved(&state.nodes),
        migration: state.migration.clone(),
        pending_sweep: to_saved(&state.pending_sweep),
        replicas: state.replicas.clone(),
    };
    let text = toml::to_string(&f).map_err(|e| StateError::Encode(e.to_string()))?;
    let target = Path::new(path);
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        target
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("state"),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(b"# shardis topology state: written by the proxy on every change; do not edit while it runs.\n")?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, target)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    };
    write().map_err(|err| StateError::Write {
        path: path.to_string(),
        err,
    })
}

/// How a persisted ring differs from the config's nodes, one phrase per
/// difference (empty when they agree): what the log says at start so a
/// state file never overrides the config silently.
pub fn topology_difference(config: &[NodeSpec], saved: &[NodeSpec]) -> Vec<String> {
    let names = |ns: &[NodeSpec], other: &[NodeSpec]| -> Vec<String> {
        ns.iter()
            .filter(|n| !other.iter().any(|o| o.name == n.name))
            .map(|n| format!("{} ({})", n.name, n.addr))
            .collect()
    };
    let mut out = Vec::new();
    let added = names(saved, config);
    if !added.is_empty() {
        out.push(format!("added at run time: {}", added.join(", ")));
    }
    let removed = names(config, saved);
    if !removed.is_empty() {
        out.push(format!("removed at run time: {}", removed.join(", ")));
    }
    for n in saved {
        if let Some(c) = config.iter().find(|c| c.name == n.name) {
            if c.addr != n.addr || c.weight != n.weight {
                out.push(format!(
                    "{} is {} weight {} (config: {} weight {})",
                    n.name, n.addr, n.weight, c.addr, c.weight
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_differences_are_spelled_out() {
        let n = |name: &str, port: u16| NodeSpec {
            name: name.into(),
            addr: format!("127.0.0.1:{port}"),
            weight: 1,
        };
        let config = [n("node1", 1), n("node2", 2), n("node3", 3)];
        assert!(topology_difference(&config, &config).is_empty());
        let saved = [n("node1", 1), n("node3", 3), n("node4", 4)];
        assert_eq!(
            topology_difference(&config, &saved),
            [
                "added at run time: node4 (127.0.0.1:4)",
                "removed at run time: node2 (127.0.0.1:2)"
            ]
        );
    }

    #[test]
    fn state_round_trips_through_the_file() {
        let dir = std::env::temp_dir().join(format!("shardis-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("topology.toml");
        let path = path.to_str().unwrap();
        assert_eq!(load(path).unwrap(), None);
        let nodes = vec![NodeSpec {
            name: "a".into(),
            addr: "127.0.0.1:1".into(),
            weight: 2,
        }];
        let m = SavedMigration {
            phase: "copy".into(),
            other_epoch: 5,
            other_nodes: to_saved(&nodes),
        };
        let state = Saved {
            epoch: 4,
            nodes: nodes.clone(),
            migration: Some(m),
            pending_sweep: nodes,
            replicas: BTreeMap::from([("a".to_string(), vec!["127.0.0.1:2".to_string()])]),
        };
        save(path, &state).unwrap();
        assert_eq!(load(path).unwrap().unwrap(), state);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_state_file_is_an_error_naming_the_file() {
        let path = std::env::temp_dir()
            .join(format!("shardis-no-such-dir-{}", std::process::id()))
            .join("topology.toml");
        let path = path.to_str().unwrap();
        let state = Saved {
            epoch: 1,
            nodes: Vec::new(),
            migration: None,
            pending_sweep: Vec::new(),
            replicas: BTreeMap::new(),
        };
        let err = save(path, &state).unwrap_err();
        assert!(matches!(err, StateError::Write { .. }), "{err:?}");
        let err = err.to_string();
        assert!(err.starts_with(path), "{err}");
        assert!(err.contains("No such file or directory"), "{err}");
    }
}
