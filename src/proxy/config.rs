//! Proxy configuration: the TOML file, its defaults, and validation into a
//! [`Config`] whose every field is known good.
//!
//! Read by `main.rs` (`shardis up`, `shardis proxy`, `--check-config`); errors
//! name the file and the field so a user can fix them in one look.

use std::path::Path;

use serde::Deserialize;

use super::operator::{AdminSection, HotKeysSection, OpsConfig, SlowlogSection};
use crate::resp::Limits;
use crate::ring::{NodeSpec, PointScheme, RingConfig, DEFAULT_VNODES};

/// Where the proxy listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7000";
/// First port of the built-in nodes `shardis up` starts.
pub const DEFAULT_FIRST_NODE_PORT: u16 = 7001;
/// Built-in nodes `shardis up` starts.
pub const DEFAULT_UP_NODES: usize = 10;
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 1_000;
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 5_000;
pub const DEFAULT_MAX_CLIENTS: usize = 10_000;
/// Replies a client may owe before the proxy stops reading from it.
pub const DEFAULT_PIPELINE_DEPTH: usize = 1_024;
pub const DEFAULT_CONNECTIONS_PER_NODE: usize = 1;
/// Proxy runtime threads; 0 = one per core.
pub const DEFAULT_THREADS: usize = 0;
/// Keys moved per MIGRATE by the background mover.
pub const DEFAULT_MIGRATION_BATCH: usize = 200;

/// The whole file as written; every section optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    proxy: ProxySection,
    #[serde(default)]
    ring: RingSection,
    #[serde(default)]
    migration: MigrationSection,
    #[serde(default)]
    up: UpSection,
    #[serde(default)]
    nodes: Vec<NodeSection>,
    #[serde(default)]
    admin: AdminSection,
    #[serde(default)]
    hot_keys: HotKeysSection,
    #[serde(default)]
    slowlog: SlowlogSection,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ProxySection {
    listen: String,
    connect_timeout_ms: u64,
    request_timeout_ms: u64,
    max_clients: usize,
    pipeline_depth: usize,
    connections_per_node: usize,
    threads: usize,
    max_bulk_len: usize,
    max_args: usize,
    max_query_buffer: usize,
    state_file: Option<String>,
}

impl Default for ProxySection {
    fn default() -> Self {
        let limits = Limits::default();
        ProxySection {
            listen: DEFAULT_LISTEN.into(),
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            max_clients: DEFAULT_MAX_CLIENTS,
            pipeline_depth: DEFAULT_PIPELINE_DEPTH,
            connections_per_node: DEFAULT_CONNECTIONS_PER_NODE,
            threads: DEFAULT_THREADS,
            max_bulk_len: limits.max_bulk_len,
            max_args: limits.max_args,
            max_query_buffer: limits.max_query_buffer,
            state_file: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RingSection {
    points: String,
    vnodes: u32,
}

impl Default for RingSection {
    fn default() -> Self {
        RingSection {
            points: "ketama".into(),
            vnodes: DEFAULT_VNODES,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct MigrationSection {
    batch: usize,
    max_keys_per_sec: u64,
    timeout_ms: u64,
}

impl Default for MigrationSection {
    fn default() -> Self {
        MigrationSection {
            batch: DEFAULT_MIGRATION_BATCH,
            max_keys_per_sec: 0,
            timeout_ms: 5_000,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct UpSection {
    nodes: usize,
    first_node_port: u16,
    node_maxmemory: u64,
}

impl Default for UpSection {
    fn default() -> Self {
        UpSection {
            nodes: DEFAULT_UP_NODES,
            first_node_port: DEFAULT_FIRST_NODE_PORT,
            node_maxmemory: 0,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSection {
    addr: String,
    name: Option<String>,
    weight: Option<u32>,
}

/// Validated proxy configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: String,
    pub connect_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub max_clients: usize,
    pub pipeline_depth: usize,
    pub connections_per_node: usize,
    /// Runtime worker threads; 0 = one per core.
    pub threads: usize,
    pub limits: Limits,
    /// Where topology changes are persisted; `None` keeps them in memory only.
    pub state_file: Option<String>,
    pub ring: RingConfig,
    pub migration: MigrationConfig,
    pub up: UpConfig,
    /// The backends; empty is allowed only for `shardis up`, which fills it.
    pub nodes: Vec<NodeSpec>,
    /// `[admin]`, `[hot_keys]`, `[slowlog]`.
    pub ops: OpsConfig,
}

/// Background mover settings.
#[derive(Clone, Copy, Debug)]
pub struct MigrationConfig {
    pub batch: usize,
    /// 0 = unlimited.
    pub max_keys_per_sec: u64,
    pub timeout_ms: u64,
}

/// `shardis up` settings.
#[derive(Clone, Copy, Debug)]
pub struct UpConfig {
    pub nodes: usize,
    pub first_node_port: u16,
    pub node_maxmemory: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config::from_file_config(FileConfig::default()).expect("defaults are valid")
    }
}

impl Config {
    /// Reads and validates a TOML file; the error is one line naming the file and field.
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses and validates TOML text.
    pub fn parse(text: &str) -> Result<Config, String> {
        let file: FileConfig = toml::from_str(text).map_err(|e| {
            // toml's message is multi-line with a source excerpt; keep the first line and the field.
            let msg = e.message().trim().to_string();
            match e.span() {
                Some(span) => {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    format!("line {line}: {msg}")
                }
                None => msg,
            }
        })?;
        Config::from_file_config(file)
    }

    fn from_file_config(f: FileConfig) -> Result<Config, String> {
        let p = f.proxy;
        if !p.listen.contains(':') {
            return Err(format!(
                "proxy.listen: expected host:port, got {:?}",
                p.listen
            ));
        }
        for (field, v) in [
            ("proxy.connect_timeout_ms", p.connect_timeout_ms as usize),
            ("proxy.request_timeout_ms", p.request_timeout_ms as usize),
            ("proxy.max_clients", p.max_clients),
            ("proxy.pipeline_depth", p.pipeline_depth),
            ("proxy.connections_per_node", p.connections_per_node),
            ("proxy.max_bulk_len", p.max_bulk_len),
            ("proxy.max_args", p.max_args),
            ("proxy.max_query_buffer", p.max_query_buffer),
            ("migration.batch", f.migration.batch),
            ("migration.timeout_ms", f.migration.timeout_ms as usize),
            ("up.nodes", f.up.nodes),
        ] {
            if v == 0 {
                return Err(format!("{field}: must be greater than 0"));
            }
        }
        if p.connections_per_node > 64 {
            return Err("proxy.connections_per_node: at most 64".into());
        }
        let scheme: PointScheme = f.ring.points.parse().map_err(|_| {
            format!(
                "ring.points: expected \"ketama\" or \"vnode\", got {:?}",
                f.ring.points
            )
        })?;
        if f.ring.vnodes == 0 || f.ring.vnodes > 100_000 {
            return Err(format!(
                "ring.vnodes: expected 1..=100000, got {}",
                f.ring.vnodes
            ));
        }
        let mut nodes = Vec::with_capacity(f.nodes.len());
        for (i, n) in f.nodes.into_iter().enumerate() {
            if n.addr.parse::<std::net::SocketAddr>().is_err() && !n.addr.contains(':') {
                return Err(format!(
                    "nodes[{i}].addr: expected host:port, got {:?}",
                    n.addr
                ));
            }
            let weight = n.weight.unwrap_or(1);
            if weight == 0 {
                return Err(format!("nodes[{i}].weight: must be greater than 0"));
            }
            let name = n.name.unwrap_or_else(|| n.addr.clone());
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(format!(
                    "nodes[{i}].name: must be non-empty without spaces, got {name:?}"
                ));
            }
            nodes.push(NodeSpec {
                name,
                addr: n.addr,
                weight,
            });
        }
        let ops = OpsConfig::validate(f.admin, f.hot_keys, f.slowlog)?;
        let ring = RingConfig {
            scheme,
            vnodes: f.ring.vnodes,
        };
        if !nodes.is_empty() {
            crate::ring::Ring::new(nodes.clone(), ring, 1).map_err(|e| format!("nodes: {e}"))?;
        }
        Ok(Config {
            listen: p.listen,
            connect_timeout_ms: p.connect_timeout_ms,
            request_timeout_ms: p.request_timeout_ms,
            max_clients: p.max_clients,
            pipeline_depth: p.pipeline_depth,
            connections_per_node: p.connections_per_node,
            threads: p.threads,
            limits: Limits {
                max_args: p.max_args,
                max_bulk_len: p.max_bulk_len,
                max_inline_len: Limits::default().max_inline_len,
                max_query_buffer: p.max_query_buffer,
            },
            state_file: p.state_file.filter(|s| !s.is_empty()),
            ring,
            migration: MigrationConfig {
                batch: f.migration.batch,
                max_keys_per_sec: f.migration.max_keys_per_sec,
                timeout_ms: f.migration.timeout_ms,
            },
            up: UpConfig {
                nodes: f.up.nodes,
                first_node_port: f.up.first_node_port,
                node_maxmemory: f.up.node_maxmemory,
            },
            nodes,
            ops,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::parse("").unwrap();
        assert_eq!(c.listen, DEFAULT_LISTEN);
        assert_eq!(c.ring.vnodes, 160);
        assert_eq!(c.up.nodes, 10);
        assert!(c.nodes.is_empty());
    }

    #[test]
    fn nodes_default_name_to_addr_and_weight_to_one() {
        let c = Config::parse("[[nodes]]\naddr = \"127.0.0.1:7001\"\n[[nodes]]\naddr = \"127.0.0.1:7002\"\nname = \"b\"\nweight = 2\n").unwrap();
        assert_eq!(
            c.nodes[0],
            NodeSpec {
                name: "127.0.0.1:7001".into(),
                addr: "127.0.0.1:7001".into(),
                weight: 1
            }
        );
        assert_eq!(c.nodes[1].name, "b");
        assert_eq!(c.nodes[1].weight, 2);
    }

    #[test]
    fn invalid_fields_are_named() {
        let cases = [
            ("[ring]\npoints = \"modulo\"\n", "ring.points"),
            ("[ring]\nvnodes = 0\n", "ring.vnodes"),
            ("[proxy]\npipeline_depth = 0\n", "proxy.pipeline_depth"),
            ("[proxy]\nlisten = \"nowhere\"\n", "proxy.listen"),
            ("[proxy]\nbogus = 1\n", "bogus"),
            ("[[nodes]]\naddr = \"x\"\n", "nodes[0].addr"),
            (
                "[[nodes]]\naddr = \"127.0.0.1:1\"\nweight = 0\n",
                "nodes[0].weight",
            ),
            (
                "[[nodes]]\naddr = \"127.0.0.1:1\"\n[[nodes]]\naddr = \"127.0.0.1:1\"\n",
                "nodes:",
            ),
            ("[proxy]\nrequest_timeout_ms = \"x\"\n", "line 2"),
        ];
        for (text, field) in cases {
            let err = Config::parse(text).unwrap_err();
            assert!(err.contains(field), "{text:?} -> {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }
}
