//! The operator plane's settings (`[admin]`, `[hot_keys]`, `[slowlog]`) and
//! the state it shares with the request path: metrics, the hot-key sketch,
//! the hot-shard tripwire, the slow log and the admin listener's address.
//!
//! Parsed by `config.rs` (these sections only), owned by [`crate::proxy::Proxy`] as
//! `proxy.ops`, read by sessions, routing, the admin commands and `http/`.

pub mod hotkeys;
pub(crate) mod http;
pub mod metrics;
pub mod slowlog;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use serde::Deserialize;

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ops::hotkeys::{HotKeys, Tripwire};
use crate::proxy::ops::metrics::{Metrics, Timing};
use crate::proxy::ops::slowlog::SlowLog;
use crate::proxy::route::hot_cache::{self, HotCache};
use crate::proxy::Proxy;
use crate::resp::reply::is_error;
use crate::resp::{decode_request, encode, eq_ignore_case, parse_i64};

/// Where `shardis up` serves the admin HTTP API unless configured.
pub(crate) const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:7070";

/// `[admin]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct AdminSection {
    /// `host:port`; absent: off for `shardis proxy`, 127.0.0.1:7070 for
    /// `shardis up`; `""` turns it off everywhere.
    pub(crate) listen: Option<String>,
    /// Only the cache API asks for credentials (once users exist): a non-loopback address must be
    /// asked for explicitly.
    pub(crate) allow_remote: bool,
}

/// `[hot_keys]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct HotKeysSection {
    pub(crate) shard_alarm_ratio: f64,
    pub(crate) capacity: usize,
    /// How long a cached hot GET is served; 0: no cache.
    pub(crate) cache_ttl_ms: u64,
    /// The cache's bound, keys and payloads included.
    pub(crate) cache_max_bytes: u64,
}

impl Default for HotKeysSection {
    fn default() -> Self {
        HotKeysSection {
            shard_alarm_ratio: hotkeys::DEFAULT_SHARD_ALARM_RATIO,
            capacity: hotkeys::DEFAULT_CAPACITY,
            cache_ttl_ms: 0,
            cache_max_bytes: hot_cache::DEFAULT_MAX_BYTES,
        }
    }
}

/// `[slowlog]` as written (Redis's `slowlog-log-slower-than`, `slowlog-max-len`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct SlowlogSection {
    pub(crate) log_slower_than_us: i64,
    pub(crate) max_len: usize,
}

impl Default for SlowlogSection {
    fn default() -> Self {
        SlowlogSection {
            log_slower_than_us: slowlog::DEFAULT_SLOWER_THAN_US,
            max_len: slowlog::DEFAULT_MAX_LEN,
        }
    }
}

/// Validated operator settings.
#[derive(Clone, Debug)]
pub struct OpsConfig {
    /// `None`: not configured (see [`OpsConfig::admin_listen`]).
    pub admin_listen: Option<String>,
    /// Serve the admin API at [`DEFAULT_ADMIN_LISTEN`] when not configured
    /// (`shardis up` sets it; not a file setting).
    pub admin_default_on: bool,
    pub shard_alarm_ratio: f64,
    pub hot_keys_capacity: usize,
    pub hot_cache_ttl_ms: u64,
    pub hot_cache_max_bytes: u64,
    pub slowlog_slower_than_us: i64,
    pub slowlog_max_len: usize,
}

impl Default for OpsConfig {
    fn default() -> Self {
        OpsConfig::validate(
            AdminSection::default(),
            HotKeysSection::default(),
            SlowlogSection::default(),
        )
        .expect("defaults are valid")
    }
}

impl OpsConfig {
    /// Checks the three sections; errors name the field.
    pub(crate) fn validate(
        admin: AdminSection,
        hot: HotKeysSection,
        slow: SlowlogSection,
    ) -> Result<OpsConfig, String> {
        if let Some(l) = admin.listen.as_deref().filter(|l| !l.is_empty()) {
            let addr: std::net::SocketAddr = l
                .parse()
                .map_err(|_| format!("admin.listen: expected ip:port, got {l:?}"))?;
            if !addr.ip().is_loopback() && !admin.allow_remote {
                return Err(format!(
                    "admin.listen: {l} is not a loopback address; only the admin API's cache routes ask for credentials (once users exist), set admin.allow_remote = true to serve it there"
                ));
            }
        }
        if !(hot.shard_alarm_ratio.is_finite() && hot.shard_alarm_ratio > 1.0) {
            return Err(format!(
                "hot_keys.shard_alarm_ratio: must be a number greater than 1, got {}",
                hot.shard_alarm_ratio
            ));
        }
        if !(1..=100_000).contains(&hot.capacity) {
            return Err(format!(
                "hot_keys.capacity: expected 1..=100000, got {}",
                hot.capacity
            ));
        }
        if hot.cache_ttl_ms > MAX_CACHE_TTL_MS {
            return Err(format!(
                "hot_keys.cache_ttl_ms: expected 0..={MAX_CACHE_TTL_MS}, got {}",
                hot.cache_ttl_ms
            ));
        }
        if hot.cache_max_bytes == 0 {
            return Err("hot_keys.cache_max_bytes: must be at least 1".to_string());
        }
        if slow.max_len > 1_000_000 {
            return Err(format!(
                "slowlog.max_len: at most 1000000, got {}",
                slow.max_len
            ));
        }
        Ok(OpsConfig {
            admin_listen: admin.listen,
            admin_default_on: false,
            shard_alarm_ratio: hot.shard_alarm_ratio,
            hot_keys_capacity: hot.capacity,
            hot_cache_ttl_ms: hot.cache_ttl_ms,
            hot_cache_max_bytes: hot.cache_max_bytes,
            slowlog_slower_than_us: slow.log_slower_than_us,
            slowlog_max_len: slow.max_len,
        })
    }

    /// The admin address to bind, and whether it was configured (rather
    /// than defaulted); `None`: off (`""`, or not configured outside `up`).
    pub fn admin_listen(&self) -> Option<(String, bool)> {
        match self.admin_listen.as_deref() {
            Some("") => None,
            Some(l) => Some((l.to_string(), true)),
            None if self.admin_default_on => Some((DEFAULT_ADMIN_LISTEN.to_string(), false)),
            None => None,
        }
    }
}

/// `CLUSTER HOTKEYS [n]` and `CLUSTER PLAN …`, called by `admin.rs`
/// (`args[0]` is `CLUSTER`).
pub(crate) fn cluster_command(proxy: &Arc<Proxy>, s: &ClientState, args: Vec<Bytes>) -> Pending {
    if eq_ignore_case(&args[1], b"HOTKEYS") {
        let n = match args.len() {
            2 => DEFAULT_HOTKEYS,
            3 => match parse_i64(&args[2]) {
                Some(n) if n > 0 => n as usize,
                _ => return Pending::error("ERR value is out of range, must be positive"),
            },
            _ => {
                return Pending::error(
                    "ERR wrong number of arguments for 'cluster|hotkeys' command",
                )
            }
        };
        let top = proxy.ops.hot_keys.top(n);
        let mut out = BytesMut::new();
        encode::array_len(&mut out, top.len());
        for (key, count) in top {
            encode::array_len(&mut out, 2);
            encode::bulk(&mut out, &key);
            encode::integer(&mut out, count as i64);
        }
        return Pending::ready(out);
    }
    let proxy = proxy.clone();
    let proto = s.proto;
    Pending::Later(Box::pin(async move {
        match crate::proxy::admin::plan::plan(&proxy, &args[2..]).await {
            Ok(text) => {
                let mut out = BytesMut::new();
                encode::verbatim(&mut out, text.as_bytes(), proto);
                out.freeze()
            }
            Err(e) => e.reply(),
        }
    }))
}

/// Who answered a request, as the slow log and MONITOR name it: `proxy`,
/// the node's name, or `N nodes`.
pub(crate) fn served_by(proxy: &Proxy, served: crate::proxy::ops::metrics::Served) -> String {
    match served.nodes {
        0 => "proxy".to_string(),
        1 => proxy
            .routing
            .load()
            .shards
            .get(served.node as usize)
            .map_or_else(|| "?".to_string(), |s| s.name().to_string()),
        n => format!("{n} nodes"),
    }
}

/// A cached reply may be at most this stale (one hour).
const MAX_CACHE_TTL_MS: u64 = 3_600_000;

/// Keys `CLUSTER HOTKEYS` lists without a count.
const DEFAULT_HOTKEYS: usize = 10;

/// What the operator plane keeps per proxy.
pub(crate) struct Ops {
    pub(crate) metrics: Metrics,
    pub(crate) hot_keys: HotKeys,
    /// The local cache of hot GETs; `None` when `cache_ttl_ms` is 0, so the
    /// request path pays one branch for it.
    pub(crate) hot_cache: Option<HotCache>,
    pub(crate) tripwire: Tripwire,
    pub(crate) slowlog: SlowLog,
    /// The admin listener's bound address, once it listens.
    pub(crate) admin_addr: OnceLock<std::net::SocketAddr>,
}

impl Ops {
    pub(crate) fn new(c: &OpsConfig) -> Ops {
        Ops {
            metrics: Metrics::default(),
            hot_keys: HotKeys::new(c.hot_keys_capacity),
            hot_cache: (c.hot_cache_ttl_ms > 0).then(|| {
                HotCache::new(
                    std::time::Duration::from_millis(c.hot_cache_ttl_ms),
                    c.hot_cache_max_bytes,
                )
            }),
            tripwire: Tripwire::new(c.shard_alarm_ratio),
            slowlog: SlowLog::new(c.slowlog_slower_than_us, c.slowlog_max_len),
            admin_addr: OnceLock::new(),
        }
    }

    /// Records a request whose reply was complete at `now`: its command's
    /// series, the nodes it engaged, and the slow log when it took long enough.
    pub(crate) fn answered(
        &self,
        proxy: &Proxy,
        t: Timing,
        now: Instant,
        reply: &[u8],
        client: &ClientState,
    ) {
        let ns = now.duration_since(t.started).as_nanos() as u64;
        let m = &self.metrics;
        m.record(t.served.command as usize, ns, is_error(reply));
        if t.served.nodes > 0 {
            m.command_at(t.served.command as usize)
                .engaged
                .observe(t.served.nodes as u64);
        }
        if self.slowlog.is_slow(ns / 1_000) {
            let mut buf = BytesMut::from(&t.raw[..]);
            let args = match decode_request(&mut buf, &proxy.config.limits) {
                Ok(Some(req)) => req.args,
                _ => Vec::new(),
            };
            let node = served_by(proxy, t.served);
            self.slowlog
                .record(ns / 1_000, &args, &client.peer, client.name.as_ref(), &node);
        }
    }

    /// Lines for `CLUSTER RINGINFO`: `admin_listen:` and `hot_shard:`.
    pub(crate) fn info_lines(&self) -> String {
        let admin = self
            .admin_addr
            .get()
            .map_or("-".to_string(), |a| a.to_string());
        format!(
            "admin_listen:{admin}\r\nhot_shard:{}\r\n",
            self.tripwire.summary()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(admin: &str, hot: &str, slow: &str) -> Result<OpsConfig, String> {
        OpsConfig::validate(
            toml::from_str(admin).map_err(|e| e.to_string())?,
            toml::from_str(hot).map_err(|e| e.to_string())?,
            toml::from_str(slow).map_err(|e| e.to_string())?,
        )
    }

    #[test]
    fn admin_is_on_by_default_only_under_up() {
        let mut c = OpsConfig::default();
        assert_eq!(c.admin_listen(), None);
        c.admin_default_on = true;
        assert_eq!(
            c.admin_listen(),
            Some((DEFAULT_ADMIN_LISTEN.to_string(), false))
        );
        let mut off = parse("listen = \"\"", "", "").unwrap();
        off.admin_default_on = true;
        assert_eq!(off.admin_listen(), None);
        let port0 = parse("listen = \"127.0.0.1:0\"", "", "").unwrap();
        assert_eq!(
            port0.admin_listen(),
            Some(("127.0.0.1:0".to_string(), true))
        );
    }

    #[test]
    fn bad_operator_settings_are_named() {
        for (a, h, s, field) in [
            ("listen = \"0.0.0.0:7070\"", "", "", "admin.allow_remote"),
            ("listen = \"localhost\"", "", "", "admin.listen"),
            (
                "",
                "shard_alarm_ratio = 1.0",
                "",
                "hot_keys.shard_alarm_ratio",
            ),
            ("", "capacity = 0", "", "hot_keys.capacity"),
            ("", "cache_ttl_ms = 3600001", "", "hot_keys.cache_ttl_ms"),
            ("", "cache_max_bytes = 0", "", "hot_keys.cache_max_bytes"),
            ("", "", "max_len = 2000000", "slowlog.max_len"),
        ] {
            let err = parse(a, h, s).unwrap_err();
            assert!(err.contains(field), "{a} {h} {s}: {err}");
        }
        assert!(parse("listen = \"0.0.0.0:7070\"\nallow_remote = true", "", "").is_ok());
    }
}
