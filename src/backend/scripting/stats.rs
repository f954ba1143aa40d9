//! Counters for the commands scripts and functions run (`redis.call`,
//! `redis.pcall`), kept apart from the node's top-level counts so that the
//! proxy, which counts what its clients sent, can add them to its INFO
//! commandstats, errorstats and `total_error_replies`.
//!
//! Redis 7.0's rules (`server.c` `call()`, `afterErrorReply`,
//! `script.c` `scriptCall`, `script_lua.c`):
//! - a call refused before it ran (unknown command, arity, not allowed
//!   from scripts, a write from a read-only script, OOM, READONLY,
//!   NOREPLICAS) counts its error and the command's `rejected_calls`, not
//!   its `calls`;
//! - a call that ran counts `calls` and `usec`, and, when it replied an
//!   error, `failed_calls` and the error;
//! - the error table either hands to Lua is marked
//!   `ignore_error_stats_update`; when the script's own reply is that error
//!   (`redis.call` raised it, or the script returned it), Redis replies it
//!   with `ERR_REPLY_FLAG_NO_STATS_UPDATE`: the EVAL counts a failed call but
//!   the error is not counted a second time. The proxy counted the EVAL's
//!   error reply as any other, so such replies are counted here too
//!   (`reraised`), for the proxy to take back out.
//!
//! Shown by the node's `INFO shardis_scriptstats` ([`SECTION`]); reset by
//! CONFIG RESETSTAT. Called by `bridge.rs` and `eval.rs` only.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;

use crate::resp::reply::error_code;

/// The INFO section name the node answers with these counts; a name no
/// Redis section has.
pub(crate) const SECTION: &str = "shardis_scriptstats";

/// Distinct error codes kept, as Redis's `ERROR_STATS_NUMBER`.
const MAX_ERROR_CODES: usize = 128;

/// One command's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) calls: u64,
    pub(crate) usec: u64,
    pub(crate) rejected: u64,
    pub(crate) failed: u64,
}

#[derive(Default)]
struct Inner {
    commands: BTreeMap<&'static str, Counts>,
    errors: HashMap<Box<[u8]>, u64>,
    total: u64,
    reraised: HashMap<Box<[u8]>, u64>,
    reraised_total: u64,
}

/// The script-side counters of one node.
#[derive(Default)]
pub(crate) struct ScriptStats {
    /// A std mutex: taken once per call a script makes (scripts run one at
    /// a time on a node) and by INFO and RESETSTAT, never across `.await`.
    inner: Mutex<Inner>,
}

/// Counts `code` in a bounded table.
fn bump(table: &mut HashMap<Box<[u8]>, u64>, code: &[u8]) {
    if let Some(n) = table.get_mut(code) {
        *n += 1;
    } else if table.len() < MAX_ERROR_CODES {
        table.insert(code.into(), 1);
    }
}

/// The code of an error message as `afterErrorReply` reads it: the first
/// word after a leading `-`, else `ERR`.
fn message_code(msg: &[u8]) -> &[u8] {
    if msg.first() == Some(&b'-') {
        error_code(msg)
    } else {
        b"ERR"
    }
}

impl ScriptStats {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `name` ran for `usec`; `error`: its reply, when that was an error.
    pub(crate) fn ran(&self, name: &'static str, usec: u64, error: Option<&[u8]>) {
        let mut s = self.lock();
        let c = s.commands.entry(name).or_default();
        c.calls += 1;
        c.usec += usec;
        if let Some(reply) = error {
            c.failed += 1;
            s.total += 1;
            bump(&mut s.errors, error_code(reply));
        }
    }

    /// A call was refused with `msg` before it ran; `name`: its command,
    /// when the name was one.
    pub(crate) fn rejected(&self, name: Option<&'static str>, msg: &[u8]) {
        let mut s = self.lock();
        if let Some(name) = name {
            s.commands.entry(name).or_default().rejected += 1;
        }
        s.total += 1;
        bump(&mut s.errors, message_code(msg));
    }

    /// The script replied `reply`, an error already counted by the call
    /// that raised it.
    pub(crate) fn reraised(&self, reply: &[u8]) {
        let mut s = self.lock();
        s.reraised_total += 1;
        bump(&mut s.reraised, error_code(reply));
    }

    /// CONFIG RESETSTAT.
    pub(crate) fn reset(&self) {
        *self.lock() = Inner::default();
    }

    /// The `field:value` lines of the INFO section: `script_cmdstat_NAME`
    /// (Redis's commandstats line), `script_errorstat_CODE`,
    /// `script_total_error_replies`, `script_reraised_errorstat_CODE` and
    /// `script_reraised_error_replies`.
    pub(crate) fn lines(&self) -> Vec<(String, String)> {
        let s = self.lock();
        let mut out = Vec::new();
        for (name, c) in &s.commands {
            out.push((format!("script_cmdstat_{name}"), cmdstat(c)));
        }
        let mut codes = |prefix: &str, t: &HashMap<Box<[u8]>, u64>| {
            let mut v: Vec<(String, String)> = t
                .iter()
                .map(|(code, n)| {
                    let code = String::from_utf8_lossy(code);
                    (format!("{prefix}{code}"), format!("count={n}"))
                })
                .collect();
            v.sort();
            out.extend(v);
        };
        codes("script_errorstat_", &s.errors);
        codes("script_reraised_errorstat_", &s.reraised);
        out.push(("script_total_error_replies".into(), s.total.to_string()));
        out.push((
            "script_reraised_error_replies".into(),
            s.reraised_total.to_string(),
        ));
        out
    }

    /// The section's text, as INFO lays it out (`# Shardis_scriptstats`).
    pub(crate) fn section_text(&self) -> String {
        let mut t = String::from("# Shardis_scriptstats\r\n");
        for (k, v) in self.lines() {
            let _ = write!(t, "{k}:{v}\r\n");
        }
        t
    }
}

/// Redis's commandstats value for `c`.
pub(crate) fn cmdstat(c: &Counts) -> String {
    let per = if c.calls == 0 {
        0.0
    } else {
        c.usec as f64 / c.calls as f64
    };
    format!(
        "calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
        c.calls, c.usec, c.rejected, c.failed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_failed_and_reraised_are_told_apart() {
        let s = ScriptStats::default();
        s.rejected(Some("set"), b"-OOM command not allowed");
        s.rejected(None, b"Unknown Redis command called from script");
        s.ran("select", 3, Some(b"-ERR DB index is out of range\r\n"));
        s.ran("get", 1, None);
        s.reraised(b"-OOM command not allowed\r\n");
        let lines = s.lines();
        let get = |k: &str| lines.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(
            get("script_cmdstat_set"),
            Some("calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0")
        );
        assert_eq!(
            get("script_cmdstat_select"),
            Some("calls=1,usec=3,usec_per_call=3.00,rejected_calls=0,failed_calls=1")
        );
        assert_eq!(get("script_errorstat_OOM"), Some("count=1"));
        assert_eq!(get("script_errorstat_ERR"), Some("count=2"));
        assert_eq!(get("script_total_error_replies"), Some("3"));
        assert_eq!(get("script_reraised_errorstat_OOM"), Some("count=1"));
        assert_eq!(get("script_reraised_error_replies"), Some("1"));
        s.reset();
        assert_eq!(s.lines().len(), 2);
    }
}
