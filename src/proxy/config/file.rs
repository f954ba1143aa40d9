//! The TOML file as written: every section and field optional, unknown
//! ones refused. Only `Config::load` (in `mod.rs`) reads these; it turns
//! them into a validated [`super::Config`].

use serde::Deserialize;

use super::*;
use crate::proxy::conn::auth::config::{
    UserSection, DEFAULT_AUTH_FAILURES_PER_SEC, DEFAULT_AUTH_TIMEOUT_MS,
};

/// The whole file as written; every section optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    #[serde(default)]
    pub(super) proxy: ProxySection,
    #[serde(default)]
    pub(super) ring: RingSection,
    #[serde(default)]
    pub(super) migration: MigrationSection,
    #[serde(default)]
    pub(super) up: UpSection,
    #[serde(default)]
    pub(super) nodes: Vec<NodeSection>,
    #[serde(default)]
    pub(super) admin: AdminSection,
    #[serde(default)]
    pub(super) hot_keys: HotKeysSection,
    #[serde(default)]
    pub(super) slowlog: SlowlogSection,
    #[serde(default)]
    pub(super) topology: TopologySection,
    #[serde(default)]
    pub(super) users: Vec<UserSection>,
    #[serde(default)]
    pub(super) failover: ha::FailoverSection,
    #[serde(default)]
    pub(super) backend_auth: BackendAuthSection,
    pub(super) backend_tls: Option<BackendTlsSection>,
    pub(super) tls: Option<TlsSection>,
}

/// `[backend_tls]`: TLS towards the nodes, for every node unless its
/// `[[nodes]]` entry says otherwise (`tls`, `tls_*`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BackendTlsSection {
    /// TLS towards every node by default (false: only the entries with `tls = true`).
    #[serde(default = "yes")]
    pub(super) enabled: bool,
    pub(super) ca: Option<String>,
    pub(super) cert: Option<String>,
    pub(super) key: Option<String>,
    pub(super) server_name: Option<String>,
}

/// `[tls]`: the TLS listener towards clients.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TlsSection {
    pub(super) listen: String,
    pub(super) cert: String,
    pub(super) key: String,
    pub(super) client_ca: Option<String>,
    #[serde(default = "yes")]
    pub(super) plaintext: bool,
}

fn yes() -> bool {
    true
}

/// `[backend_auth]`: what the proxy sends every node that has no
/// `username`/`password` of its own.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BackendAuthSection {
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct ProxySection {
    pub(super) listen: String,
    pub(super) connect_timeout_ms: u64,
    pub(super) request_timeout_ms: u64,
    pub(super) max_clients: usize,
    pub(super) pipeline_depth: usize,
    pub(super) connections_per_node: usize,
    pub(super) max_pinned_per_node: usize,
    pub(super) threads: usize,
    pub(super) max_bulk_len: usize,
    pub(super) max_args: usize,
    pub(super) max_query_buffer: usize,
    pub(super) max_query_buffer_total: usize,
    pub(super) max_output_buffer_total: usize,
    /// Unset: a share of `max_output_buffer_total`.
    pub(super) client_output_hard_limit: Option<usize>,
    pub(super) client_output_soft_limit: Option<usize>,
    pub(super) client_output_soft_seconds: u64,
    pub(super) drain_timeout_ms: u64,
    pub(super) state_file: Option<String>,
    pub(super) requirepass: Option<String>,
    pub(super) protected_mode: bool,
    pub(super) auth_timeout_ms: u64,
    pub(super) auth_failures_per_sec: u32,
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
            max_pinned_per_node: DEFAULT_MAX_PINNED_PER_NODE,
            threads: DEFAULT_THREADS,
            max_bulk_len: limits.max_bulk_len,
            max_args: limits.max_args,
            max_query_buffer: limits.max_query_buffer,
            max_query_buffer_total: DEFAULT_MAX_QUERY_BUFFER_TOTAL,
            max_output_buffer_total: DEFAULT_MAX_OUTPUT_BUFFER_TOTAL,
            client_output_hard_limit: None,
            client_output_soft_limit: None,
            client_output_soft_seconds: DEFAULT_CLIENT_OUTPUT_SOFT_SECONDS,
            drain_timeout_ms: DEFAULT_DRAIN_TIMEOUT_MS,
            state_file: None,
            requirepass: None,
            protected_mode: true,
            auth_timeout_ms: DEFAULT_AUTH_TIMEOUT_MS,
            auth_failures_per_sec: DEFAULT_AUTH_FAILURES_PER_SEC,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RingSection {
    pub(super) points: String,
    pub(super) vnodes: u32,
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
pub(super) struct MigrationSection {
    pub(super) batch: usize,
    pub(super) max_keys_per_sec: u64,
    /// `"adaptive"` or `"unlimited"`.
    pub(super) copy_rate: String,
    pub(super) timeout_ms: u64,
}

impl Default for MigrationSection {
    fn default() -> Self {
        MigrationSection {
            batch: DEFAULT_MIGRATION_BATCH,
            max_keys_per_sec: 0,
            copy_rate: "unlimited".into(),
            timeout_ms: 5_000,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct UpSection {
    pub(super) nodes: usize,
    pub(super) first_node_port: u16,
    pub(super) node_maxmemory: u64,
    pub(super) replicas: usize,
    pub(super) node_password: bool,
}

impl Default for UpSection {
    fn default() -> Self {
        UpSection {
            nodes: DEFAULT_UP_NODES,
            first_node_port: DEFAULT_FIRST_NODE_PORT,
            node_maxmemory: 0,
            replicas: 0,
            node_password: true,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NodeSection {
    pub(super) addr: String,
    pub(super) name: Option<String>,
    pub(super) weight: Option<u32>,
    /// The shard's replicas (`host:port`), copies of this node.
    #[serde(default)]
    pub(super) replicas: Vec<String>,
    /// The shard's name at the Sentinels (`[failover] mode = "sentinel"`).
    pub(super) master_name: Option<String>,
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
    /// TLS towards this node (default: `[backend_tls] enabled`).
    pub(super) tls: Option<bool>,
    pub(super) tls_ca: Option<String>,
    pub(super) tls_cert: Option<String>,
    pub(super) tls_key: Option<String>,
    pub(super) tls_server_name: Option<String>,
}

/// The dotted name of the key whose value starts at byte `at` of a TOML
/// text: the key on that line, under the last table header before it
/// (`[[nodes]]` entries are numbered: `nodes[1].weight`).
pub(super) fn field_at(text: &str, at: usize) -> Option<String> {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let key = line.split_once('=')?.0.trim().trim_matches('"');
    if key.is_empty() || key.starts_with('[') {
        return None;
    }
    let mut table = String::new();
    let mut counts: Vec<(String, usize)> = Vec::new();
    for l in text[..line_start].lines().map(str::trim) {
        if let Some(name) = l.strip_prefix("[[").and_then(|r| r.split_once("]]")) {
            let name = name.0.trim().to_string();
            let n = match counts.iter_mut().find(|(c, _)| *c == name) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    counts.push((name.clone(), 0));
                    0
                }
            };
            table = format!("{name}[{n}]");
        } else if let Some(name) = l.strip_prefix('[').and_then(|r| r.split_once(']')) {
            table = name.0.trim().to_string();
        }
    }
    Some(if table.is_empty() {
        key.to_string()
    } else {
        format!("{table}.{key}")
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct TopologySection {
    pub(super) store: String,
    pub(super) endpoints: Vec<String>,
    pub(super) prefix: String,
    pub(super) user: Option<String>,
    pub(super) password: Option<String>,
    pub(super) lease_ttl_s: u64,
    pub(super) proxy_id: Option<String>,
}

impl Default for TopologySection {
    fn default() -> Self {
        TopologySection {
            store: "file".into(),
            endpoints: vec![DEFAULT_ETCD_ENDPOINT.into()],
            prefix: DEFAULT_ETCD_PREFIX.into(),
            user: None,
            password: None,
            lease_ttl_s: DEFAULT_LEASE_TTL_S,
            proxy_id: None,
        }
    }
}
