//! Reads twemproxy's `nutcracker.yml` into plain data: several pools, each
//! with its listener, placement, timeouts and servers.
//!
//! Called by whatever loads a proxy configuration from YAML; it hands back a
//! [`Config`] and the warnings to print. Pure: takes the file's text, never
//! opens a socket or a file, never panics on any input (fuzzed in its tests).
//!
//! The shape is twemproxy's: a mapping of pool names, each a mapping of
//! scalar directives plus one `servers:` sequence. Values are read as the
//! raw scalars twemproxy reads (`timeout: 0x10` is not a number here either).
//! Where twemproxy fails a directive it does not know, this warns and goes
//! on, naming the key; a directive shardis does not act on also warns.
//! Errors name the file, the pool, the field and the line.
//!
//! ```yaml
//! alpha:
//!   listen: 127.0.0.1:22121
//!   hash: fnv1a_64
//!   distribution: ketama
//!   redis: true
//!   servers:
//!    - 127.0.0.1:6379:1 cache-1
//! ```

mod events;
mod pool;
#[cfg(test)]
mod tests;

use crate::ring::{NodeSpec, Placement, Ring, RingError};
use std::fmt;

/// Refused above this size: a nutcracker.yml is a few kilobytes.
pub const MAX_FILE_BYTES: usize = 16 * 1024 * 1024;

/// twemproxy's defaults for unset directives (`nc_conf.h`).
pub const DEFAULT_BACKLOG: u32 = 512;
pub const DEFAULT_SERVER_CONNECTIONS: u32 = 1;
pub const DEFAULT_SERVER_RETRY_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_SERVER_FAILURE_LIMIT: u32 = 2;

/// A whole `nutcracker.yml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The pools, in file order.
    pub pools: Vec<Pool>,
    /// One line per directive ignored, naming file, pool and key.
    pub warnings: Vec<String>,
}

/// One pool: one listener in front of one set of servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub name: String,
    pub listen: Listen,
    /// `hash`, `distribution`, `hash_tag`.
    pub placement: Placement,
    /// `timeout` in ms; `None` waits forever (twemproxy's default).
    pub timeout_ms: Option<u64>,
    pub backlog: u32,
    pub preconnect: bool,
    pub redis_auth: Option<String>,
    pub redis_db: u32,
    pub server_connections: u32,
    pub auto_eject_hosts: bool,
    pub server_retry_timeout_ms: u64,
    pub server_failure_limit: u32,
    /// In file order.
    pub servers: Vec<Server>,
}

/// Where a pool listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// `host:port`.
    Tcp { host: String, port: u16 },
    /// `/path/to.sock [octal permissions]`.
    Unix { path: String, perm: Option<u32> },
}

/// Where a server lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerAddr {
    Tcp { host: String, port: u16 },
    Unix { path: String },
}

/// One `servers:` entry, `host:port:weight [name]` or `/path:weight [name]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub addr: ServerAddr,
    pub weight: u32,
    /// The optional name; placement uses [`Server::ring_name`].
    pub name: Option<String>,
}

impl Server {
    /// The name twemproxy hashes: the given one, else `host:port` (`host`
    /// alone on port 11211), else for a socket its path followed by `:` —
    /// twemproxy's quirk, kept because points depend on it.
    pub fn ring_name(&self) -> String {
        match (&self.name, &self.addr) {
            (Some(n), _) => n.clone(),
            (None, ServerAddr::Tcp { host, port }) => {
                crate::ring::twemproxy::server_name(host, *port)
            }
            (None, ServerAddr::Unix { path }) => format!("{path}:"),
        }
    }

    /// `host:port` or the socket path.
    pub fn address(&self) -> String {
        match &self.addr {
            ServerAddr::Tcp { host, port } => format!("{host}:{port}"),
            ServerAddr::Unix { path } => path.clone(),
        }
    }
}

impl Pool {
    /// The ring nodes of this pool: twemproxy's names, addresses, weights.
    pub fn node_specs(&self) -> Vec<NodeSpec> {
        self.servers
            .iter()
            .map(|s| NodeSpec {
                name: s.ring_name(),
                addr: s.address(),
                weight: s.weight,
            })
            .collect()
    }

    /// A ring placing keys as twemproxy places them for this pool.
    pub fn ring(&self, epoch: u64) -> Result<Ring, RingError> {
        Ring::twemproxy(self.node_specs(), self.placement, epoch)
    }
}

/// Why a `nutcracker.yml` was refused: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    /// 1-based, when known.
    pub line: Option<usize>,
    pub pool: Option<String>,
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(pool) = &self.pool {
            write!(f, ": pool '{pool}'")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Parses the text of a `nutcracker.yml`; `file` names it in messages.
pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    let err = |line: Option<usize>, message: String| ConfigError {
        file: file.to_string(),
        line,
        pool: None,
        field: None,
        message,
    };
    if text.len() > MAX_FILE_BYTES {
        return Err(err(None, format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    let raw = events::read(text).map_err(|(line, m)| err(line, m))?;
    if raw.is_empty() {
        return Err(err(None, "has no pools".to_string()));
    }
    let mut pools = Vec::with_capacity(raw.len());
    let mut warnings = Vec::new();
    for r in &raw {
        pools.push(pool::build(file, r, &mut warnings)?);
    }
    for (i, a) in pools.iter().enumerate() {
        for (b, rb) in pools.iter().zip(&raw).skip(i + 1) {
            let clash = if a.name == b.name {
                Some(format!("a second pool named '{}'", a.name))
            } else if a.listen == b.listen {
                Some(format!("listens where pool '{}' does", a.name))
            } else {
                None
            };
            if let Some(message) = clash {
                return Err(ConfigError {
                    pool: Some(b.name.clone()),
                    ..err(Some(rb.line), message)
                });
            }
        }
    }
    Ok(Config { pools, warnings })
}
