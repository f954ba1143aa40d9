//! Proxy configuration: the TOML file, its defaults, and validation into a
//! [`Config`] whose every field is known good.
//!
//! Read by `main.rs` (`shardis up`, `shardis proxy`, `--check-config`); errors
//! name the file and the field so a user can fix them in one look.

use std::path::Path;
use std::time::Duration;

mod backend;
mod choice;
mod file;
pub mod ha;
pub mod ops;
mod tls;
mod topology;
pub use tls::TlsConfig;

pub use backend::EjectPolicy;
use file::*;
use ops::{AdminSection, HotKeysSection, OpsConfig, SlowlogSection};
pub use topology::{
    EtcdConfig, TopologyConfig, DEFAULT_ETCD_ENDPOINT, DEFAULT_ETCD_PREFIX, DEFAULT_LEASE_TTL_S,
};

pub use crate::proxy::conn::auth::config::AuthConfig;
use crate::proxy::conn::budget::OutputLimits;
use crate::proxy::upstream::credentials::Credentials;
pub use crate::proxy::upstream::credentials::NodeCredentials;
use crate::resp::Limits;
use crate::ring::{NodeSpec, PointScheme, RingConfig, DEFAULT_VNODES};

/// Where the proxy listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7000";
/// First port of the built-in nodes `shardis up` starts.
pub const DEFAULT_FIRST_NODE_PORT: u16 = 7001;
/// Built-in nodes `shardis up` starts.
pub const DEFAULT_UP_NODES: usize = 10;
/// Replicas per shard `shardis up --replicas` starts, at most (a shard
/// has a primary and 0–2 replicas).
pub const MAX_UP_REPLICAS: usize = 2;
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 1_000;
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 5_000;
pub const DEFAULT_MAX_CLIENTS: usize = 10_000;
/// Replies a client may owe before the proxy stops reading from it.
pub const DEFAULT_PIPELINE_DEPTH: usize = 1_024;
pub const DEFAULT_CONNECTIONS_PER_NODE: usize = 1;
/// Dedicated (pinned) upstream connections per node, at most.
pub const DEFAULT_MAX_PINNED_PER_NODE: usize = 1024;
/// Proxy runtime threads; 0 = one per core.
pub const DEFAULT_THREADS: usize = 0;
/// Reply bytes owed to all clients together (Redis 7's `maxmemory-clients`
/// for replies); over it, the client owing the most is closed.
pub const DEFAULT_MAX_OUTPUT_BUFFER_TOTAL: usize = 2 << 30;
/// Unless set, a client's output hard limit is this share of the total
/// (1/8): however many clients stop reading, no one of them holds more.
pub const CLIENT_OUTPUT_HARD_SHARE: usize = 8;
/// Unless set, a client's output soft limit is this share of the total (1/32).
pub const CLIENT_OUTPUT_SOFT_SHARE: usize = 32;
/// Reply bytes one client may be owed before it is closed at once (Redis's
/// `client-output-buffer-limit` hard limit), with the default total: 256 MB,
/// so a value larger than that needs a larger limit.
pub const DEFAULT_CLIENT_OUTPUT_HARD_LIMIT: usize =
    DEFAULT_MAX_OUTPUT_BUFFER_TOTAL / CLIENT_OUTPUT_HARD_SHARE;
/// Reply bytes one client may be owed for at most
/// `DEFAULT_CLIENT_OUTPUT_SOFT_SECONDS` before it is closed (64 MB with the
/// default total).
pub const DEFAULT_CLIENT_OUTPUT_SOFT_LIMIT: usize =
    DEFAULT_MAX_OUTPUT_BUFFER_TOTAL / CLIENT_OUTPUT_SOFT_SHARE;
pub const DEFAULT_CLIENT_OUTPUT_SOFT_SECONDS: u64 = 60;
/// Query buffer bytes of all clients together; over it, the client with the
/// largest buffer is closed.
pub const DEFAULT_MAX_QUERY_BUFFER_TOTAL: usize = 2 << 30;
/// On SIGTERM, how long the proxy keeps answering owed replies before it exits.
pub const DEFAULT_DRAIN_TIMEOUT_MS: u64 = 10_000;
/// Keys moved per MIGRATE by the background mover.
pub const DEFAULT_MIGRATION_BATCH: usize = 200;
/// Ketama makes points four at a time (one MD5 digest each), so fewer than
/// four per node leaves nodes without a point.
const KETAMA_MIN_VNODES: u32 = 4;

/// Validated proxy configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: String,
    pub connect_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub max_clients: usize,
    pub pipeline_depth: usize,
    pub connections_per_node: usize,
    /// Dedicated connections (transactions, blocking commands, pub/sub) one
    /// node may have open at once; a client beyond it gets an error.
    pub max_pinned_per_node: usize,
    /// Runtime worker threads; 0 = one per core.
    pub threads: usize,
    /// Request limits; `max_bulk_len` also bounds every bulk in a node's reply.
    pub limits: Limits,
    /// Reply bytes one client may be owed (0 = no limit).
    pub output_limits: OutputLimits,
    /// Query buffer bytes of all clients together.
    pub max_query_buffer_total: usize,
    /// Reply bytes owed to all clients together.
    pub max_output_buffer_total: usize,
    /// On shutdown, how long owed replies are still answered.
    pub drain_timeout_ms: u64,
    /// Where topology changes are persisted; `None` keeps them in memory only.
    pub state_file: Option<String>,
    pub ring: RingConfig,
    pub migration: MigrationConfig,
    pub up: UpConfig,
    /// The backends; empty is allowed only for `shardis up`, which fills it.
    pub nodes: Vec<NodeSpec>,
    /// `[admin]`, `[hot_keys]`, `[slowlog]`.
    pub ops: OpsConfig,
    /// Connect to every node at start rather than on first use
    /// (twemproxy's `preconnect`).
    pub preconnect: bool,
    /// The listener's accept queue (twemproxy's `backlog`).
    pub backlog: u32,
    /// twemproxy's `auto_eject_hosts`: when set, a server failing this often
    /// leaves the ring for a while and its keys go to the others.
    pub eject: Option<EjectPolicy>,
    /// `[topology]`: where the ring lives (the state file, or etcd).
    pub topology: TopologyConfig,
    /// `[proxy] requirepass`, `protected_mode`, `auth_*` and `[[users]]`.
    pub auth: AuthConfig,
    /// Each shard's replicas, by the shard's (its primary's) name.
    pub replicas: std::collections::BTreeMap<String, Vec<NodeSpec>>,
    /// `[failover]`: policies and the failure detector's thresholds.
    pub ha: ha::HaConfig,
    /// `[failover] sentinels` and each shard's `master_name` (sentinel mode).
    pub sentinel: ha::SentinelConfig,
    /// What every upstream connection says first: `[backend_auth]` and each
    /// `[[nodes]]` entry's username and password, or a twemproxy pool's
    /// `redis_auth`; and the database it selects (`redis_db`; 0 from TOML).
    pub node_auth: NodeCredentials,
    /// `[tls]`: the TLS listener towards clients, if any.
    pub tls: Option<TlsConfig>,
}

/// Background mover settings.
#[derive(Clone, Copy, Debug)]
pub struct MigrationConfig {
    pub batch: usize,
    /// A hard cap on the copy's rate in either mode; 0 = none.
    pub max_keys_per_sec: u64,
    /// How the copy paces itself under the cap.
    pub copy_rate: CopyRate,
    pub timeout_ms: u64,
}

/// `migration.copy_rate`: how fast the copy phase moves keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyRate {
    /// Backs off while clients' latency is above what it was before the
    /// copy, speeds up while it is not (see `admin::migration::pacer`).
    Adaptive,
    /// As fast as the nodes copy (or at `max_keys_per_sec` when set).
    Unlimited,
}

/// `shardis up` settings.
#[derive(Clone, Copy, Debug)]
pub struct UpConfig {
    pub nodes: usize,
    pub first_node_port: u16,
    pub node_maxmemory: u64,
    /// Built-in replicas `up` starts for each generated node (0–2).
    pub replicas: usize,
    /// `up` starts its nodes with a password (`[backend_auth] password`,
    /// else one it generates and keeps in its state directory).
    pub node_password: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config::from_file_config(FileConfig::default()).expect("defaults are valid")
    }
}

impl Config {
    /// Reads and validates a TOML file; the error is one line naming the file and field.
    /// A relative `state_file` is resolved next to the file, and its
    /// directory must exist and be writable: a change would otherwise fail
    /// to persist long after start-up.
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut config = Config::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(state) = &config.state_file {
            let state = Path::new(state);
            if state.is_relative() {
                let dir = path.parent().unwrap_or(Path::new(""));
                config.state_file = Some(dir.join(state).to_string_lossy().into_owned());
            }
        }
        config
            .check_state_dir()
            .map_err(|e| format!("{}: proxy.state_file: {e}", path.display()))?;
        Ok(config)
    }

    /// Errs unless the state file's directory exists and accepts a new file.
    pub fn check_state_dir(&self) -> Result<(), String> {
        let Some(state) = &self.state_file else {
            return Ok(());
        };
        let dir = Path::new(state)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !dir.is_dir() {
            return Err(format!(
                "{state}: directory {} does not exist",
                dir.display()
            ));
        }
        // The state is written as a temporary file renamed into place: probe that.
        let probe = dir.join(format!(".shardis-write-test-{}", std::process::id()));
        std::fs::write(&probe, b"")
            .and_then(|_| std::fs::remove_file(&probe))
            .map_err(|e| format!("{state}: directory {} is not writable: {e}", dir.display()))
    }

    /// Parses and validates TOML text.
    pub fn parse(text: &str) -> Result<Config, String> {
        let file: FileConfig = toml::from_str(text).map_err(|e| {
            // toml's message is multi-line with a source excerpt; keep the first line and the field.
            let msg = e
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            match e.span() {
                // `get`: a span inside a multi-byte character is not a boundary.
                Some(span) if text.get(..span.start).is_some() => {
                    let at = span.start;
                    let line = text[..at].matches('\n').count() + 1;
                    match field_at(text, at) {
                        Some(f)
                            if !msg
                                .contains(&format!("`{}`", f.rsplit('.').next().unwrap_or(&f))) =>
                        {
                            format!("line {line}: {f}: {msg}")
                        }
                        _ => format!("line {line}: {msg}"),
                    }
                }
                _ => msg,
            }
        })?;
        Config::from_file_config(file)
    }

    fn from_file_config(mut f: FileConfig) -> Result<Config, String> {
        let p = f.proxy;
        check_host_port("proxy.listen", &p.listen)?;
        for (field, v) in [
            ("proxy.connect_timeout_ms", p.connect_timeout_ms as usize),
            ("proxy.request_timeout_ms", p.request_timeout_ms as usize),
            ("proxy.max_clients", p.max_clients),
            ("proxy.pipeline_depth", p.pipeline_depth),
            ("proxy.connections_per_node", p.connections_per_node),
            ("proxy.max_pinned_per_node", p.max_pinned_per_node),
            ("proxy.max_bulk_len", p.max_bulk_len),
            ("proxy.max_args", p.max_args),
            ("proxy.max_query_buffer", p.max_query_buffer),
            ("proxy.max_query_buffer_total", p.max_query_buffer_total),
            ("proxy.max_output_buffer_total", p.max_output_buffer_total),
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
        if f.up.replicas > MAX_UP_REPLICAS {
            return Err(format!("up.replicas: at most {MAX_UP_REPLICAS}"));
        }
        let scheme: PointScheme = f.ring.points.parse().map_err(|_| {
            format!(
                "ring.points: expected \"ketama\" or \"vnode\", got {:?}",
                f.ring.points
            )
        })?;
        if scheme == PointScheme::Ketama && f.ring.vnodes < KETAMA_MIN_VNODES {
            return Err(format!(
                "ring.vnodes: ketama makes points four at a time (one MD5 digest each), so vnodes must be at least {KETAMA_MIN_VNODES}, got {}",
                f.ring.vnodes
            ));
        }
        if f.ring.vnodes == 0 || f.ring.vnodes > 100_000 {
            return Err(format!(
                "ring.vnodes: expected 1..=100000, got {}",
                f.ring.vnodes
            ));
        }
        let mut nodes = Vec::with_capacity(f.nodes.len());
        let mut replicas = std::collections::BTreeMap::new();
        let mut seen = std::collections::HashSet::new();
        let mut masters = std::collections::BTreeMap::new();
        let mut node_auth = NodeCredentials {
            default: credentials(
                "backend_auth",
                f.backend_auth.username,
                f.backend_auth.password,
            )?,
            ..Default::default()
        };
        let backend_tls = f.backend_tls;
        node_auth.tls.default = tls::backend_default(backend_tls.as_ref())?;
        for (i, n) in f.nodes.into_iter().enumerate() {
            check_host_port(&format!("nodes[{i}].addr"), &n.addr)?;
            let weight = n.weight.unwrap_or(1);
            if weight == 0 {
                return Err(format!("nodes[{i}].weight: must be greater than 0"));
            }
            let name = n.name.clone().unwrap_or_else(|| n.addr.clone());
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(format!(
                    "nodes[{i}].name: must be non-empty without spaces, got {name:?}"
                ));
            }
            let own_tls = tls::node(i, &n, backend_tls.as_ref(), &node_auth.tls.default)?;
            if let Some(t) = own_tls {
                node_auth.tls.by_name.insert(name.clone(), t);
            }
            ha::add_replicas(i, (&name, &n.addr), n.replicas, &mut seen, &mut replicas)?;
            if let Some(m) = n.master_name {
                masters.insert(name.clone(), m);
            }
            if let Some(c) = credentials(&format!("nodes[{i}]"), n.username, n.password)? {
                node_auth.by_name.insert(name.clone(), c);
            }
            nodes.push(NodeSpec {
                name,
                addr: n.addr,
                weight,
            });
        }
        let sentinels = f.failover.take_sentinels();
        let ha = ha::HaConfig::validate(f.failover)?;
        let sentinel = ha::SentinelConfig::validate(ha.mode, sentinels, masters, &nodes)?;
        let ops = OpsConfig::validate(f.admin, f.hot_keys, f.slowlog)?;
        let topology = TopologyConfig::validate(f.topology, p.state_file.as_deref())?;
        let auth = AuthConfig::validate(
            p.requirepass,
            f.users,
            p.protected_mode,
            p.auth_timeout_ms,
            p.auth_failures_per_sec,
        )?;
        auth.check_protected("proxy.listen", &p.listen)?;
        let tls = match f.tls {
            None => None,
            Some(t) => {
                check_host_port("tls.listen", &t.listen)?;
                auth.check_protected("tls.listen", &t.listen)?;
                for (field, v) in [("tls.cert", &t.cert), ("tls.key", &t.key)] {
                    if v.is_empty() {
                        return Err(format!("{field}: a PEM file is required"));
                    }
                }
                Some(TlsConfig {
                    listen: t.listen,
                    cert: t.cert.into(),
                    key: t.key.into(),
                    client_ca: t.client_ca.filter(|c| !c.is_empty()).map(Into::into),
                    plaintext: t.plaintext,
                })
            }
        };
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
            max_pinned_per_node: p.max_pinned_per_node,
            threads: p.threads,
            limits: Limits {
                max_args: p.max_args,
                max_bulk_len: p.max_bulk_len,
                max_inline_len: Limits::default().max_inline_len,
                max_query_buffer: p.max_query_buffer,
                unauthenticated: false,
            },
            output_limits: OutputLimits {
                hard_bytes: p
                    .client_output_hard_limit
                    .unwrap_or(p.max_output_buffer_total / CLIENT_OUTPUT_HARD_SHARE),
                soft_bytes: p
                    .client_output_soft_limit
                    .unwrap_or(p.max_output_buffer_total / CLIENT_OUTPUT_SOFT_SHARE),
                soft_time: Duration::from_secs(p.client_output_soft_seconds),
            },
            max_query_buffer_total: p.max_query_buffer_total,
            max_output_buffer_total: p.max_output_buffer_total,
            drain_timeout_ms: p.drain_timeout_ms,
            state_file: p.state_file.filter(|s| !s.is_empty()),
            ring,
            migration: MigrationConfig {
                batch: f.migration.batch,
                max_keys_per_sec: f.migration.max_keys_per_sec,
                copy_rate: choice::one_of(
                    "migration.copy_rate",
                    &f.migration.copy_rate,
                    &[
                        ("adaptive", CopyRate::Adaptive),
                        ("unlimited", CopyRate::Unlimited),
                    ],
                )?,
                timeout_ms: f.migration.timeout_ms,
            },
            up: UpConfig {
                nodes: f.up.nodes,
                first_node_port: f.up.first_node_port,
                node_maxmemory: f.up.node_maxmemory,
                replicas: f.up.replicas,
                node_password: f.up.node_password,
            },
            nodes,
            ops,
            preconnect: false,
            backlog: crate::listen::BACKLOG,
            eject: None,
            topology,
            auth,
            replicas,
            ha,
            node_auth,
            tls,
            sentinel,
        })
    }
}

/// A node's credentials from `field`'s username and password (a username
/// alone is refused: it would be sent with no password).
fn credentials(
    field: &str,
    username: Option<String>,
    password: Option<String>,
) -> Result<Option<std::sync::Arc<Credentials>>, String> {
    match (username, password.filter(|p| !p.is_empty())) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(format!("{field}.password: a username needs a password")),
        (u, Some(p)) => Ok(Some(std::sync::Arc::new(Credentials::new(u, p)))),
    }
}

/// Errs unless `value` is `host:port` with a non-empty host and a port in 0..=65535.
pub fn check_host_port(field: &str, value: &str) -> Result<(), String> {
    let ok = value
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{field}: expected host:port with a port from 0 to 65535, got {value:?}"
        ))
    }
}

#[cfg(test)]
mod tests;
