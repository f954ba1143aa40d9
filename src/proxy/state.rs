//! The persisted topology: the nodes of the current ring, its epoch, and, while
//! a migration runs, the previous ring's nodes — so a restarted proxy routes
//! exactly as before and resumes an unfinished migration.
//!
//! Written atomically (a temporary file in the same directory, fsync, rename)
//! by the admin path after every change; read once at start-up.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ring::NodeSpec;

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
    /// The node being added, if the change was an ADDNODE.
    #[serde(default)]
    pub joining: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct File {
    epoch: u64,
    nodes: Vec<SavedNode>,
    migration: Option<SavedMigration>,
}

/// The topology read back from disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub epoch: u64,
    pub nodes: Vec<NodeSpec>,
    pub migration: Option<SavedMigration>,
}

pub fn to_saved(nodes: &[NodeSpec]) -> Vec<SavedNode> {
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
pub fn load(path: &str) -> Result<Option<Saved>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{path}: {e}")),
    };
    let f: File = toml::from_str(&text).map_err(|e| format!("{path}: {}", e.message()))?;
    if f.nodes.is_empty() {
        return Err(format!("{path}: nodes: empty"));
    }
    Ok(Some(Saved {
        epoch: f.epoch,
        nodes: to_specs(&f.nodes),
        migration: f.migration,
    }))
}

/// Writes the state file atomically.
pub fn save(
    path: &str,
    epoch: u64,
    nodes: &[NodeSpec],
    migration: Option<&SavedMigration>,
) -> Result<(), String> {
    let f = File {
        epoch,
        nodes: to_saved(nodes),
        migration: migration.cloned(),
    };
    let text = toml::to_string(&f).map_err(|e| e.to_string())?;
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
    write().map_err(|e| format!("{path}: {e}"))
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
            joining: Some("a".into()),
        };
        save(path, 4, &nodes, Some(&m)).unwrap();
        let back = load(path).unwrap().unwrap();
        assert_eq!(
            back,
            Saved {
                epoch: 4,
                nodes,
                migration: Some(m)
            }
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
