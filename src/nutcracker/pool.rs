//! Directive by directive: a raw pool into a [`Pool`], with twemproxy's
//! value rules (`nc_conf.c`): numbers are plain decimal digits, booleans
//! exactly `true` or `false`, a directive given twice is an error, and unset
//! directives take twemproxy's defaults.

use super::events::{RawPool, RawValue};
use super::{ConfigError, Listen, Pool, Server, ServerAddr};
use super::{
    DEFAULT_BACKLOG, DEFAULT_SERVER_CONNECTIONS, DEFAULT_SERVER_FAILURE_LIMIT,
    DEFAULT_SERVER_RETRY_TIMEOUT_MS,
};
use crate::ring::{Distribution, KeyHash, Placement};

/// twemproxy directives shardis reads but does not act on.
const IGNORED: &[(&str, &str)] = &[
    (
        "client_connections",
        "twemproxy ignores it too; use the proxy's max_clients",
    ),
    (
        "tcpkeepalive",
        "shardis leaves TCP keepalive to the operating system",
    ),
];

/// Reads one pool; warnings for ignored directives go to `warnings`.
pub(super) fn build(
    file: &str,
    raw: &RawPool,
    warnings: &mut Vec<String>,
) -> Result<Pool, ConfigError> {
    let fail = |line: usize, field: Option<&str>, message: String| ConfigError {
        file: file.to_string(),
        line: Some(line),
        pool: Some(raw.name.clone()),
        field: field.map(str::to_string),
        message,
    };
    if raw.name.is_empty() {
        return Err(fail(raw.line, None, "a pool needs a name".to_string()));
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut d = Directives::default();
    for entry in &raw.entries {
        let key = entry.key.as_str();
        if seen.contains(&key) {
            return Err(fail(entry.line, Some(key), "is a duplicate".to_string()));
        }
        seen.push(key);
        let at = |message: String| fail(entry.line, Some(key), message);
        if key == "servers" {
            let RawValue::Seq(items) = &entry.value else {
                return Err(at("must be a list of \"host:port:weight [name]\"".into()));
            };
            for (item, line) in items {
                let server = parse_server(item).map_err(|m| fail(*line, Some("servers"), m))?;
                d.servers.push(server);
            }
            continue;
        }
        let RawValue::Scalar(value) = &entry.value else {
            return Err(at("must be a single value, not a list".into()));
        };
        d.set(key, value).map_err(at)?;
        if let Some((_, why)) = IGNORED.iter().find(|(k, _)| *k == key) {
            warnings.push(format!(
                "{file}:{}: pool '{}': {key}: not supported, ignored ({why})",
                entry.line, raw.name
            ));
        } else if !d.knew {
            warnings.push(format!(
                "{file}:{}: pool '{}': {key}: unknown directive, ignored",
                entry.line, raw.name
            ));
        }
    }
    let pool_err = |message: String| fail(raw.line, None, message);
    let Some(listen) = d.listen else {
        return Err(pool_err("directive \"listen:\" is missing".into()));
    };
    if d.redis != Some(true) {
        return Err(pool_err(
            "is a memcache pool (redis: false, twemproxy's default when \"redis:\" is unset); \
             shardis speaks only the Redis protocol: set \"redis: true\" for a Redis pool"
                .into(),
        ));
    }
    if d.servers.is_empty() {
        return Err(pool_err("has no servers".into()));
    }
    let names: Vec<String> = d.servers.iter().map(Server::ring_name).collect();
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(fail(
                raw.line,
                Some("servers"),
                format!("two servers named '{n}'"),
            ));
        }
    }
    if let (Some(_), Some(db @ 1..)) = (&d.redis_auth, d.redis_db) {
        let line = raw
            .entries
            .iter()
            .find(|e| e.key == "redis_db")
            .map_or(raw.line, |e| e.line);
        warnings.push(format!(
            "{file}:{line}: pool '{}': redis_db: beside redis_auth nutcracker never selects it \
             (its SELECT reaches a server before AUTH and is refused), so the keys it wrote are \
             in database 0; shardis selects database {db}: drop redis_db to keep reading them",
            raw.name
        ));
    }
    Ok(Pool {
        name: raw.name.clone(),
        listen,
        placement: Placement {
            hash: d.hash.unwrap_or(KeyHash::Fnv1a64),
            distribution: d.distribution.unwrap_or(Distribution::Ketama),
            hash_tag: d.hash_tag,
        },
        timeout_ms: d.timeout_ms,
        backlog: d.backlog.unwrap_or(DEFAULT_BACKLOG),
        preconnect: d.preconnect.unwrap_or(false),
        redis_auth: d.redis_auth,
        redis_db: d.redis_db.unwrap_or(0),
        server_connections: d.server_connections.unwrap_or(DEFAULT_SERVER_CONNECTIONS),
        auto_eject_hosts: d.auto_eject_hosts.unwrap_or(false),
        server_retry_timeout_ms: d
            .server_retry_timeout_ms
            .unwrap_or(DEFAULT_SERVER_RETRY_TIMEOUT_MS),
        server_failure_limit: d
            .server_failure_limit
            .unwrap_or(DEFAULT_SERVER_FAILURE_LIMIT),
        servers: d.servers,
    })
}

/// The directives read so far.
#[derive(Default)]
struct Directives {
    listen: Option<Listen>,
    hash: Option<KeyHash>,
    hash_tag: Option<[u8; 2]>,
    distribution: Option<Distribution>,
    timeout_ms: Option<u64>,
    backlog: Option<u32>,
    redis: Option<bool>,
    redis_auth: Option<String>,
    redis_db: Option<u32>,
    preconnect: Option<bool>,
    auto_eject_hosts: Option<bool>,
    server_connections: Option<u32>,
    server_retry_timeout_ms: Option<u64>,
    server_failure_limit: Option<u32>,
    servers: Vec<Server>,
    /// Whether the last [`Directives::set`] knew its key.
    knew: bool,
}

impl Directives {
    fn set(&mut self, key: &str, v: &str) -> Result<(), String> {
        self.knew = true;
        match key {
            "listen" => self.listen = Some(parse_listen(v)?),
            "hash" => self.hash = Some(v.parse()?),
            "hash_tag" => {
                let b = v.as_bytes();
                if b.len() != 2 {
                    return Err(format!("must be two characters like \"{{}}\", got {v:?}"));
                }
                self.hash_tag = Some([b[0], b[1]]);
            }
            "distribution" => self.distribution = Some(v.parse()?),
            "timeout" => self.timeout_ms = Some(u64::from(number(v)?)),
            "backlog" => self.backlog = Some(number(v)?),
            "redis" => self.redis = Some(boolean(v)?),
            "redis_auth" => self.redis_auth = Some(v.to_string()),
            "redis_db" => self.redis_db = Some(number(v)?),
            "preconnect" => self.preconnect = Some(boolean(v)?),
            "auto_eject_hosts" => self.auto_eject_hosts = Some(boolean(v)?),
            "server_connections" => {
                let n = number(v)?;
                if n == 0 {
                    return Err("cannot be 0".into());
                }
                self.server_connections = Some(n);
            }
            "server_retry_timeout" => self.server_retry_timeout_ms = Some(u64::from(number(v)?)),
            "server_failure_limit" => self.server_failure_limit = Some(number(v)?),
            "client_connections" => {
                number(v)?;
            }
            "tcpkeepalive" => {
                boolean(v)?;
            }
            _ => self.knew = false,
        }
        Ok(())
    }
}

/// twemproxy's `nc_atoi`: decimal digits only, no sign, within `i32`.
fn number(v: &str) -> Result<u32, String> {
    let not = || format!("is not a number: {v:?}");
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not());
    }
    match v.parse::<u32>() {
        Ok(n) if n <= i32::MAX as u32 => Ok(n),
        _ => Err(not()),
    }
}

fn boolean(v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("is not \"true\" or \"false\": {v:?}")),
    }
}

fn port(v: &str) -> Result<u16, String> {
    match number(v) {
        Ok(p) if (1..=u32::from(u16::MAX)).contains(&p) => Ok(p as u16),
        _ => Err(format!("has an invalid port {v:?}")),
    }
}

/// `host:port`, or `/path/to.sock [octal permissions]`.
fn parse_listen(v: &str) -> Result<Listen, String> {
    if v.starts_with('/') {
        return Ok(match v.rsplit_once(' ') {
            None => Listen::Unix {
                path: v.to_string(),
                perm: None,
            },
            Some((path, perm)) => {
                let bad =
                    || format!("has an invalid file permission {perm:?} (octal, at most 0777)");
                let p = u32::from_str_radix(perm, 8).map_err(|_| bad())?;
                if p > 0o777 {
                    return Err(bad());
                }
                Listen::Unix {
                    path: path.to_string(),
                    perm: Some(p),
                }
            }
        });
    }
    let Some((host, p)) = v.rsplit_once(':') else {
        return Err(format!("is not \"host:port\" or a socket path: {v:?}"));
    };
    if host.is_empty() {
        return Err(format!("has no host: {v:?}"));
    }
    Ok(Listen::Tcp {
        host: host.to_string(),
        port: port(p)?,
    })
}

/// `host:port:weight [name]` or `/path/to.sock:weight [name]`, read from the
/// end as twemproxy reads it.
pub(super) fn parse_server(v: &str) -> Result<Server, String> {
    let shape =
        || format!("{v:?} is not \"host:port:weight [name]\" or \"/path/to.sock:weight [name]\"");
    let (main, name) = match v.rsplit_once(' ') {
        Some((main, name)) => {
            if name.is_empty() {
                return Err(format!("{v:?} has an empty name"));
            }
            (main, Some(name.to_string()))
        }
        None => (v, None),
    };
    let (rest, weight) = main.rsplit_once(':').ok_or_else(shape)?;
    let weight = match number(weight) {
        Ok(0) => return Err(format!("{v:?} has a zero weight")),
        Ok(w) => w,
        Err(_) => return Err(format!("{v:?} has an invalid weight {weight:?}")),
    };
    let addr = if rest.starts_with('/') {
        ServerAddr::Unix {
            path: rest.to_string(),
        }
    } else {
        let (host, p) = rest.rsplit_once(':').ok_or_else(shape)?;
        if host.is_empty() {
            return Err(shape());
        }
        ServerAddr::Tcp {
            host: host.to_string(),
            port: port(p).map_err(|e| format!("{v:?} {e}"))?,
        }
    };
    Ok(Server { addr, weight, name })
}
