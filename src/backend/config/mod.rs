//! The node's run-time parameters: the ones CONFIG GET reports and CONFIG
//! SET changes, with Redis 7's names, aliases, defaults and validation.
//!
//! A handful act on the node (`maxmemory`, `maxmemory-policy`,
//! `maxmemory-samples`, `proto-max-bulk-len`, `hll-sparse-max-bytes`,
//! `lfu-log-factor`, `lfu-decay-time`, the `pubsub` class of
//! `client-output-buffer-limit`) and are mirrored in atomics read on
//! the hot path; the rest (encoding thresholds, `timeout`, `save`, …) are
//! validated and kept so tools that tune them get Redis's answers. Used by
//! `commands/config.rs` (CONFIG), the dispatcher (`maxmemory`), eviction
//! (policy) and the bit, LCS and HLL commands. Never does I/O.

pub(crate) mod memory;

use crate::backend::keyspace::policy::{Policy, POLICY_NAMES};
use crate::backend::pubsub::limits;
use crate::backend::pubsub::mailbox::Limits;
use memory::parse_memory;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Mutex;

/// How a parameter's value is checked and normalised.
#[derive(Clone, Copy)]
enum Kind {
    /// Bytes with an optional unit (`100mb`); reported as a plain number.
    Memory(u64, u64),
    /// A plain integer in a range.
    Int(i64, i64),
    Bool,
    Enum(&'static [&'static str]),
    /// `save`: pairs of seconds and changes, or empty.
    Save,
    /// Any text (`masterauth`).
    Text,
    /// Reported, never changed at run time.
    Immutable,
    /// `client-output-buffer-limit`: class groups merged into the current
    /// value (`pubsub/limits.rs`).
    OutputBufferLimit,
    /// `notify-keyspace-events`: Redis's class characters (`notify/`).
    Notify,
}

struct Param {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    default: &'static str,
}

const LONG_MAX: u64 = i64::MAX as u64;
const INT_MAX: i64 = i32::MAX as i64;

const fn p(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param {
        name,
        alias: None,
        kind,
        default,
    }
}

const fn pa(name: &'static str, alias: &'static str, kind: Kind, default: &'static str) -> Param {
    Param {
        name,
        alias: Some(alias),
        kind,
        default,
    }
}

/// Default `proto-max-bulk-len` (Redis: 512 MB).
pub(crate) const DEFAULT_PROTO_MAX_BULK_LEN: u64 = 512 * 1024 * 1024;
/// Default `hll-sparse-max-bytes`.
pub(crate) const DEFAULT_HLL_SPARSE_MAX_BYTES: u64 = 3000;
/// Default `maxmemory-samples`: more than Redis's 5, a closer LRU for
/// little cost.
pub(crate) const DEFAULT_SAMPLES: u64 = 16;

/// Every parameter the node knows. The first entries are the live ones;
/// their positions are used by [`Settings::apply`].
static PARAMS: &[Param] = &[
    p("maxmemory", Kind::Memory(0, u64::MAX), "0"),
    p("maxmemory-policy", Kind::Enum(&POLICY_NAMES), "allkeys-lru"),
    p("maxmemory-samples", Kind::Int(1, INT_MAX), "16"),
    p(
        "proto-max-bulk-len",
        Kind::Memory(1024 * 1024, LONG_MAX),
        "536870912",
    ),
    p("hll-sparse-max-bytes", Kind::Memory(0, LONG_MAX), "3000"),
    p("lfu-log-factor", Kind::Int(0, INT_MAX), "10"),
    p("lfu-decay-time", Kind::Int(0, INT_MAX), "1"),
    p(
        "client-output-buffer-limit",
        Kind::OutputBufferLimit,
        limits::DEFAULT_TEXT,
    ),
    pa(
        "min-replicas-to-write",
        "min-slaves-to-write",
        Kind::Int(0, INT_MAX),
        "0",
    ),
    pa(
        "min-replicas-max-lag",
        "min-slaves-max-lag",
        Kind::Int(0, INT_MAX),
        "10",
    ),
    p("notify-keyspace-events", Kind::Notify, ""),
    // Read where they act: how long a script runs before other clients
    // are answered -BUSY.
    pa(
        "busy-reply-threshold",
        "lua-time-limit",
        Kind::Int(0, i64::MAX),
        "5000",
    ),
    // Kept, reported, not acted on.
    p("maxmemory-eviction-tenacity", Kind::Int(0, 100), "10"),
    pa(
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        Kind::Int(0, i64::MAX),
        "512",
    ),
    pa(
        "hash-max-listpack-value",
        "hash-max-ziplist-value",
        Kind::Memory(0, LONG_MAX),
        "64",
    ),
    pa(
        "zset-max-listpack-entries",
        "zset-max-ziplist-entries",
        Kind::Int(0, i64::MAX),
        "128",
    ),
    pa(
        "zset-max-listpack-value",
        "zset-max-ziplist-value",
        Kind::Memory(0, LONG_MAX),
        "64",
    ),
    pa(
        "list-max-listpack-size",
        "list-max-ziplist-size",
        Kind::Int(i32::MIN as i64, INT_MAX),
        "-2",
    ),
    p("list-compress-depth", Kind::Int(0, INT_MAX), "0"),
    p("set-max-intset-entries", Kind::Int(0, i64::MAX), "512"),
    p("set-max-listpack-entries", Kind::Int(0, i64::MAX), "128"),
    p("set-max-listpack-value", Kind::Memory(0, LONG_MAX), "64"),
    p("stream-node-max-bytes", Kind::Memory(0, LONG_MAX), "4096"),
    p("stream-node-max-entries", Kind::Int(0, i64::MAX), "100"),
    p("timeout", Kind::Int(0, INT_MAX), "0"),
    p("hz", Kind::Int(0, INT_MAX), "10"),
    p("maxclients", Kind::Int(1, u32::MAX as i64), "10000"),
    p("save", Kind::Save, ""),
    p("appendonly", Kind::Bool, "no"),
    p("activerehashing", Kind::Bool, "yes"),
    p("lazyfree-lazy-eviction", Kind::Bool, "no"),
    p("repl-backlog-size", Kind::Memory(1, LONG_MAX), "1048576"),
    p("repl-backlog-ttl", Kind::Int(0, INT_MAX), "3600"),
    p("repl-timeout", Kind::Int(1, INT_MAX), "60"),
    p("repl-ping-replica-period", Kind::Int(1, INT_MAX), "10"),
    pa("replica-read-only", "slave-read-only", Kind::Bool, "yes"),
    pa(
        "replica-priority",
        "slave-priority",
        Kind::Int(0, INT_MAX),
        "100",
    ),
    pa(
        "replica-serve-stale-data",
        "slave-serve-stale-data",
        Kind::Bool,
        "yes",
    ),
    p("replica-announced", Kind::Bool, "yes"),
    p("databases", Kind::Immutable, "1"),
    p("port", Kind::Immutable, "0"),
    p("bind", Kind::Immutable, "127.0.0.1"),
    p("cluster-enabled", Kind::Immutable, "no"),
    // No authentication: redis-server without a password reports it empty.
    p("requirepass", Kind::Immutable, ""),
    // What a replica's link says to its primary first (AUTH), as Redis.
    p("masteruser", Kind::Text, ""),
    p("masterauth", Kind::Text, ""),
    p(
        "client-query-buffer-limit",
        Kind::Memory(1024 * 1024, LONG_MAX),
        "1073741824",
    ),
];

const MAXMEMORY: usize = 0;
const POLICY: usize = 1;
const SAMPLES: usize = 2;
const BULK: usize = 3;
const HLL_SPARSE: usize = 4;
const LFU_LOG: usize = 5;
const LFU_DECAY: usize = 6;
const OUTPUT_BUFFER: usize = 7;
const MIN_REPLICAS: usize = 8;
const MIN_REPLICAS_LAG: usize = 9;
const NOTIFY: usize = 10;

/// The node's parameters.
pub(crate) struct Settings {
    /// Bytes; 0 = unlimited.
    pub(crate) maxmemory: AtomicU64,
    policy: AtomicU8,
    /// Entries compared per eviction.
    pub(crate) samples: AtomicU64,
    /// Longest string and request argument (`proto-max-bulk-len`).
    pub(crate) max_bulk_len: AtomicU64,
    /// Largest sparse HyperLogLog before it turns dense.
    pub(crate) hll_sparse_max_bytes: AtomicU64,
    /// LFU counter growth: higher is slower.
    pub(crate) lfu_log_factor: AtomicU64,
    /// Minutes per LFU counter decrement; 0 = never.
    pub(crate) lfu_decay_time: AtomicU64,
    /// The `pubsub` class of `client-output-buffer-limit`: hard bytes, soft
    /// bytes, soft seconds.
    pubsub_limits: [AtomicU64; 3],
    /// `min-replicas-to-write` and `min-replicas-max-lag` (seconds): read
    /// by every write, so kept out of the mutex.
    pub(crate) min_replicas: [AtomicU64; 2],
    /// `notify-keyspace-events` as bits; the keyspace holds the live copy.
    pub(crate) notify_flags: AtomicU32,
    /// Every parameter's current text, indexed like `PARAMS`. A std mutex:
    /// held only to read or replace strings, never across an `.await`.
    values: Mutex<Vec<String>>,
}

/// Why CONFIG SET refused; rendered by `commands/config.rs`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SetError {
    /// Not a parameter: carries the name as typed.
    Unknown(String),
    /// `(argument as typed, reason)`.
    Failed(String, &'static str),
    /// A value's reason is built at run time (ranges, enum lists).
    FailedOwned(String, String),
}

impl Settings {
    /// Defaults, with the command line's `maxmemory`, bulk limit and port.
    pub(crate) fn new(maxmemory: u64, max_bulk_len: usize, port: u16) -> Settings {
        let mut values: Vec<String> = PARAMS.iter().map(|p| p.default.to_string()).collect();
        values[MAXMEMORY] = maxmemory.to_string();
        values[BULK] = max_bulk_len.to_string();
        if let Some(i) = PARAMS.iter().position(|p| p.name == "port") {
            values[i] = port.to_string();
        }
        let s = Settings {
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(Policy::AllkeysLru as u8),
            samples: AtomicU64::new(DEFAULT_SAMPLES),
            max_bulk_len: AtomicU64::new(DEFAULT_PROTO_MAX_BULK_LEN),
            hll_sparse_max_bytes: AtomicU64::new(DEFAULT_HLL_SPARSE_MAX_BYTES),
            lfu_log_factor: AtomicU64::new(10),
            lfu_decay_time: AtomicU64::new(1),
            pubsub_limits: Default::default(),
            min_replicas: Default::default(),
            notify_flags: AtomicU32::new(0),
            values: Mutex::new(Vec::new()),
        };
        for (i, v) in values.iter().enumerate() {
            s.apply(i, v);
        }
        *s.lock() = values;
        s
    }

    /// With `--masterauth` / `--masteruser` set.
    pub(crate) fn with_masterauth(self, auth: Option<&crate::backend::MasterAuth>) -> Settings {
        if let Some(a) = auth {
            let user = a.user.as_deref().unwrap_or("");
            let pairs: [(&[u8], &[u8]); 2] = [
                (b"masteruser", user.as_bytes()),
                (b"masterauth", a.password.as_bytes()),
            ];
            let _ = self.set(&pairs);
        }
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.values.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The eviction policy.
    pub(crate) fn policy(&self) -> Policy {
        Policy::ALL[self.policy.load(Relaxed) as usize]
    }

    /// What a subscriber may have pending before it is disconnected.
    pub(crate) fn pubsub_limits(&self) -> Limits {
        let [hard, soft, soft_secs] = &self.pubsub_limits;
        Limits {
            hard: hard.load(Relaxed),
            soft: soft.load(Relaxed),
            soft_secs: soft_secs.load(Relaxed),
        }
    }

    /// `proto-max-bulk-len` in bytes.
    pub(crate) fn max_bulk(&self) -> u64 {
        self.max_bulk_len.load(Relaxed)
    }

    /// A numeric parameter's current value by name or alias (the encoding
    /// thresholds are read this way by the commands that build values).
    pub(crate) fn int(&self, name: &str) -> Option<i64> {
        let i = find(name.as_bytes())?;
        self.lock()[i].parse().ok()
    }

    /// A yes/no parameter's current value by name or alias.
    pub(crate) fn flag(&self, name: &str) -> bool {
        find(name.as_bytes()).is_some_and(|i| self.lock()[i] == "yes")
    }

    /// A parameter's current text by name or alias.
    pub(crate) fn text(&self, name: &str) -> Option<String> {
        let i = find(name.as_bytes())?;
        Some(self.lock()[i].clone())
    }

    /// `(name, value)` of every parameter whose name or alias matches.
    /// `exact` names (no glob characters) are reported as typed, like Redis.
    pub(crate) fn get(&self, pattern: &[u8]) -> Vec<(String, String)> {
        let values = self.lock();
        let is_glob = pattern.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
        let lower = pattern.to_ascii_lowercase();
        let mut out = Vec::new();
        for (i, prm) in PARAMS.iter().enumerate() {
            for name in std::iter::once(prm.name).chain(prm.alias) {
                let hit = if is_glob {
                    crate::glob::matches(&lower, name.as_bytes())
                } else {
                    lower == name.as_bytes()
                };
                if hit {
                    let shown = if is_glob {
                        name.to_string()
                    } else {
                        String::from_utf8_lossy(pattern).into_owned()
                    };
                    out.push((shown, values[i].clone()));
                }
            }
        }
        out
    }

    /// Validates every pair, then applies them all (Redis 7 sets several
    /// parameters atomically: either all change or none).
    pub(crate) fn set(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), SetError> {
        let mut found: Vec<usize> = Vec::with_capacity(pairs.len());
        let mut first_bad: Option<SetError> = None;
        for (name, _) in pairs {
            let typed = String::from_utf8_lossy(name).into_owned();
            let Some(i) = find(name) else {
                return Err(SetError::Unknown(typed));
            };
            if first_bad.is_none() {
                if matches!(PARAMS[i].kind, Kind::Immutable) {
                    first_bad = Some(SetError::Failed(typed, "can't set immutable config"));
                } else if found.contains(&i) {
                    first_bad = Some(SetError::Failed(typed, "duplicate parameter"));
                }
            }
            found.push(i);
        }
        if let Some(e) = first_bad {
            return Err(e);
        }
        let mut normalised = Vec::with_capacity(pairs.len());
        for (&i, (name, value)) in found.iter().zip(pairs) {
            let current = self.lock()[i].clone();
            let v = normalise(PARAMS[i].kind, value, &current)
                .map_err(|why| SetError::FailedOwned(String::from_utf8_lossy(name).into(), why))?;
            normalised.push(v);
        }
        let mut values = self.lock();
        for ((i, v), (_, raw)) in found.into_iter().zip(normalised).zip(pairs) {
            self.apply(i, &v);
            if i == NOTIFY {
                // CONFIG GET hides `n` behind `A`: the flags come from the value set.
                self.apply(i, &String::from_utf8_lossy(raw));
            }
            values[i] = v;
        }
        Ok(())
    }

    /// Mirrors a live parameter's (already valid) text into its atomic.
    fn apply(&self, i: usize, v: &str) {
        let n = || v.parse::<u64>().unwrap_or(0);
        match i {
            MAXMEMORY => self.maxmemory.store(n(), Relaxed),
            POLICY => {
                let at = POLICY_NAMES.iter().position(|p| *p == v).unwrap_or(4);
                self.policy.store(at as u8, Relaxed);
            }
            SAMPLES => self.samples.store(n(), Relaxed),
            BULK => self.max_bulk_len.store(n(), Relaxed),
            HLL_SPARSE => self.hll_sparse_max_bytes.store(n(), Relaxed),
            LFU_LOG => self.lfu_log_factor.store(n(), Relaxed),
            LFU_DECAY => self.lfu_decay_time.store(n(), Relaxed),
            MIN_REPLICAS => self.min_replicas[0].store(n(), Relaxed),
            MIN_REPLICAS_LAG => self.min_replicas[1].store(n(), Relaxed),
            NOTIFY => {
                let f = crate::backend::notify::parse_flags(v.as_bytes()).unwrap_or(0);
                self.notify_flags.store(f, Relaxed);
            }
            OUTPUT_BUFFER => {
                let l = limits::pubsub(v);
                for (a, v) in self.pubsub_limits.iter().zip([l.hard, l.soft, l.soft_secs]) {
                    a.store(v, Relaxed);
                }
            }
            _ => {}
        }
    }
}

fn find(name: &[u8]) -> Option<usize> {
    PARAMS.iter().position(|p| {
        name.eq_ignore_ascii_case(p.name.as_bytes())
            || p.alias
                .is_some_and(|a| name.eq_ignore_ascii_case(a.as_bytes()))
    })
}

/// Checks a value as Redis's config.c does and returns the text CONFIG GET
/// will show, or Redis's reason for refusing it. `current` is the value now.
fn normalise(kind: Kind, value: &[u8], current: &str) -> Result<String, String> {
    let text = String::from_utf8_lossy(value);
    match kind {
        Kind::Memory(min, max) => {
            let n = parse_memory(value).ok_or("argument must be a memory value")?;
            if n < min || n > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(n.to_string())
        }
        Kind::Int(min, max) => {
            let n = crate::resp::parse_i64(value)
                .ok_or("argument couldn't be parsed into an integer")?;
            if n < min || n > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(n.to_string())
        }
        Kind::Bool => match text.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Enum(names) => names
            .iter()
            .find(|n| n.eq_ignore_ascii_case(&text))
            .map(|n| n.to_string())
            .ok_or_else(|| {
                format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                )
            }),
        Kind::Save => {
            let parts: Vec<&str> = text.split(' ').filter(|s| !s.is_empty()).collect();
            let valid = parts.len().is_multiple_of(2)
                && parts
                    .iter()
                    .all(|p| crate::resp::parse_i64(p.as_bytes()).is_some_and(|n| n >= 0));
            if !valid {
                return Err("Invalid save parameters".into());
            }
            Ok(parts.join(" "))
        }
        Kind::Text => Ok(text.into_owned()),
        Kind::Immutable => Err("can't set immutable config".into()),
        Kind::OutputBufferLimit => limits::merge(current, value),
        Kind::Notify => crate::backend::notify::normalise(value),
    }
}

#[cfg(test)]
mod tests;
