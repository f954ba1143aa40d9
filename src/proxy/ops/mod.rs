//! The operator plane's state shared with the request path: metrics, the
//! hot-key sketch, the hot-shard tripwire, the slow log and the admin
//! listener's address; and `CLUSTER HOTKEYS`.
//!
//! Built from [`OpsConfig`] (`config::ops` parses and checks the
//! `[admin]`, `[hot_keys]` and `[slowlog]` sections), owned by
//! [`crate::proxy::Proxy`] as `proxy.ops`, read by sessions, routing, the
//! admin commands and `http/`.

pub(crate) mod callstats;
pub mod hotkeys;
pub(crate) mod http;
pub mod metrics;
pub(crate) mod scriptstats;
pub mod slowlog;

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::proxy::config::ops::OpsConfig;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ops::hotkeys::{HotKeys, Tripwire};
use crate::proxy::ops::metrics::{Metrics, Timing};
use crate::proxy::ops::slowlog::SlowLog;
use crate::proxy::route::hot_cache::HotCache;
use crate::proxy::Proxy;
use crate::resp::reply::is_error;
use crate::resp::{decode_request, encode, parse_i64};

/// `CLUSTER HOTKEYS [n]`, called by `admin` (`args[0]` is `CLUSTER`).
pub(crate) fn cluster_hotkeys(proxy: &Arc<Proxy>, args: Vec<Bytes>) -> Pending {
    let n = match args.len() {
        2 => DEFAULT_HOTKEYS,
        3 => match parse_i64(&args[2]) {
            Some(n) if n > 0 => n as usize,
            _ => return Pending::error("ERR value is out of range, must be positive"),
        },
        _ => return Pending::error("ERR wrong number of arguments for 'cluster|hotkeys' command"),
    };
    let top = proxy.ops.hot_keys.top(n);
    let mut out = BytesMut::new();
    encode::array_len(&mut out, top.len());
    for (key, count) in top {
        encode::array_len(&mut out, 2);
        encode::bulk(&mut out, &key);
        encode::integer(&mut out, count as i64);
    }
    Pending::ready(out)
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

/// Keys `CLUSTER HOTKEYS` lists without a count.
const DEFAULT_HOTKEYS: usize = 10;

/// What the operator plane keeps per proxy.
pub(crate) struct Ops {
    pub(crate) metrics: Metrics,
    /// INFO commandstats and errorstats since the last CONFIG RESETSTAT.
    pub(crate) calls: callstats::CallStats,
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
            calls: callstats::CallStats::default(),
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
        let error = is_error(reply);
        m.record(
            t.served.command as usize,
            ns,
            error,
            error && t.served.nodes == 0,
        );
        if error {
            self.calls.errors.record(reply);
        }
        if t.served.nodes > 0 {
            m.command_at(t.served.command as usize)
                .engaged
                .observe(t.served.nodes as u64);
        }
        if self.slowlog.is_slow(ns / 1_000) {
            let mut buf = BytesMut::from(&t.raw[..]);
            let args = match decode_request(&mut buf, &proxy.config().limits) {
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
