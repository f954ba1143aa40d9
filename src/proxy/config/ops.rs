//! The operator plane's settings: `[admin]`, `[hot_keys]` and `[slowlog]`
//! as written, their defaults, and their validation into [`OpsConfig`].
//!
//! Parsed by `config` (these sections only); `ops::Ops::new` builds the
//! operator plane from the result. Imports nothing of the proxy's.

use serde::Deserialize;

/// Where `shardis up` serves the admin HTTP API unless configured.
pub(crate) const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:7070";
/// Keys the hot-key sketch tracks unless configured.
pub const DEFAULT_HOT_KEYS_CAPACITY: usize = 128;
pub const DEFAULT_SHARD_ALARM_RATIO: f64 = 3.0;
/// The hot-GET cache's `cache_max_bytes` unless configured.
pub(crate) const DEFAULT_HOT_CACHE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Redis's `slowlog-log-slower-than` default, microseconds.
pub const DEFAULT_SLOWLOG_SLOWER_THAN_US: i64 = 10_000;
/// Redis's `slowlog-max-len` default.
pub const DEFAULT_SLOWLOG_MAX_LEN: usize = 128;
/// A cached reply may be at most this stale (one hour).
const MAX_CACHE_TTL_MS: u64 = 3_600_000;

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
            shard_alarm_ratio: DEFAULT_SHARD_ALARM_RATIO,
            capacity: DEFAULT_HOT_KEYS_CAPACITY,
            cache_ttl_ms: 0,
            cache_max_bytes: DEFAULT_HOT_CACHE_MAX_BYTES,
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
            log_slower_than_us: DEFAULT_SLOWLOG_SLOWER_THAN_US,
            max_len: DEFAULT_SLOWLOG_MAX_LEN,
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
