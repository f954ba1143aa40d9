//! INFO `commandstats`, `errorstats` and `total_error_replies` of the
//! proxy, as Redis 7 reports them: what the proxy's clients were answered,
//! per command (`calls`, `usec`, `usec_per_call`, `rejected_calls`,
//! `failed_calls`) and per error code (the error's first word), since start
//! or the last `CONFIG RESETSTAT`.
//!
//! Commands are counted by the metrics (`metrics.rs`, which `/metrics`
//! exports and which never go back): RESETSTAT keeps a copy of them here and
//! INFO subtracts it. Error codes are counted here, when the session hands
//! an error reply to its client (`Ops::answered`). A request the proxy
//! refused before any node saw it (arity, unknown command, NOAUTH,
//! CROSSSLOT) is `rejected`; an error a node returned is `failed`, as Redis
//! tells them apart. Commands a script runs on a node are the node's, not
//! counted here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::proxy::ops::metrics::Metrics;
pub(crate) use crate::resp::reply::error_code;

/// Distinct error codes kept, as Redis's `ERROR_STATS_NUMBER`: a client
/// cannot grow the table without bound by inventing codes (a script's
/// `redis.error_reply`); errors with a new code past it are counted only in
/// `total_error_replies`.
pub(crate) const MAX_ERROR_CODES: usize = 128;

/// Error replies by code.
#[derive(Default)]
pub(crate) struct ErrorStats {
    /// A std mutex: taken only while an error reply is counted or INFO
    /// reads the table, never across `.await`.
    codes: Mutex<HashMap<Box<[u8]>, u64>>,
    total: AtomicU64,
}

impl ErrorStats {
    /// Counts one error reply (`-CODE message` or a RESP3 blob error).
    pub(crate) fn record(&self, reply: &[u8]) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let code = error_code(reply);
        let mut codes = lock(&self.codes);
        if let Some(n) = codes.get_mut(code) {
            *n += 1;
        } else if codes.len() < MAX_ERROR_CODES {
            codes.insert(code.into(), 1);
        }
    }

    /// INFO `total_error_replies`.
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// `errorstat_CODE` → `count=N`, by code.
    pub(crate) fn lines(&self) -> Vec<(String, String)> {
        let mut lines: Vec<(String, String)> = lock(&self.codes)
            .iter()
            .map(|(code, n)| {
                let code = String::from_utf8_lossy(code);
                (format!("errorstat_{code}"), format!("count={n}"))
            })
            .collect();
        lines.sort();
        lines
    }

    fn reset(&self) {
        lock(&self.codes).clear();
        self.total.store(0, Ordering::Relaxed);
    }
}

/// One command's counters at the last RESETSTAT.
#[derive(Clone, Copy, Default)]
struct Counts {
    calls: u64,
    rejected: u64,
    failed: u64,
    ns: u64,
}

/// What RESETSTAT resets: the error table, and the command counters as
/// INFO shows them.
#[derive(Default)]
pub(crate) struct CallStats {
    pub(crate) errors: ErrorStats,
    /// Each command's counters at the last RESETSTAT (empty: none yet). A
    /// std mutex: taken by RESETSTAT and INFO only.
    baseline: Mutex<Vec<Counts>>,
}

impl CallStats {
    /// CONFIG RESETSTAT.
    pub(crate) fn reset(&self, metrics: &Metrics) {
        self.errors.reset();
        *lock(&self.baseline) = counts(metrics);
    }

    /// `cmdstat_NAME` → Redis's `calls=…,usec=…,usec_per_call=…,
    /// rejected_calls=…,failed_calls=…`, for each command used since the
    /// last RESETSTAT.
    pub(crate) fn command_lines(&self, metrics: &Metrics) -> Vec<(String, String)> {
        let base = lock(&self.baseline).clone();
        let names = metrics.table_commands().map(|(name, _)| name);
        counts(metrics)
            .into_iter()
            .zip(names)
            .enumerate()
            .filter_map(|(i, (now, name))| {
                let was = base.get(i).copied().unwrap_or_default();
                let calls = now.calls.saturating_sub(was.calls);
                let rejected = now.rejected.saturating_sub(was.rejected);
                let failed = now.failed.saturating_sub(was.failed);
                if calls == 0 && rejected == 0 {
                    return None;
                }
                // Redis counts a rejected call in `rejected_calls` only.
                let ran = calls - rejected.min(calls);
                let usec = now.ns.saturating_sub(was.ns) / 1_000;
                let per = if ran == 0 { 0.0 } else { usec as f64 / ran as f64 };
                Some((
                    format!("cmdstat_{}", name.to_ascii_lowercase()),
                    format!(
                        "calls={ran},usec={usec},usec_per_call={per:.2},rejected_calls={rejected},failed_calls={failed}"
                    ),
                ))
            })
            .collect()
    }
}

/// Every known command's counters now, in table order (unknown commands,
/// the metrics' last slot, are left out, as Redis has no row for them).
fn counts(metrics: &Metrics) -> Vec<Counts> {
    metrics
        .table_commands()
        .map(|(_, c)| {
            let errors = c.errors.load(Ordering::Relaxed);
            let rejected = c.rejected.load(Ordering::Relaxed);
            Counts {
                calls: c.calls.load(Ordering::Relaxed),
                rejected,
                failed: errors.saturating_sub(rejected),
                ns: c.latency.totals().1,
            }
        })
        .collect()
}

/// A poisoned lock still holds consistent counters.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_the_first_word_or_err() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"-NOGROUP No such key\r\n", b"NOGROUP"),
            (b"-ERR syntax error\r\n", b"ERR"),
            (b"-MY_ERR_CODE custom msg\r\n", b"MY_ERR_CODE"),
            (b"-nospace\r\n", b"ERR"),
            (b"- leading space\r\n", b"ERR"),
            (b"-", b"ERR"),
            (b"!21\r\nSYNTAX invalid syntax\r\n", b"SYNTAX"),
            (b"!3\r\n", b"ERR"),
            (b"-AVERYLONGCODETHATGOESPASTTHIRTYTWOBYTES yes\r\n", b"ERR"),
        ];
        for (reply, code) in cases {
            assert_eq!(
                error_code(reply),
                *code,
                "{}",
                String::from_utf8_lossy(reply)
            );
        }
    }

    #[test]
    fn error_codes_are_bounded_and_reset() {
        let s = ErrorStats::default();
        for i in 0..MAX_ERROR_CODES + 10 {
            s.record(format!("-CODE{i} x\r\n").as_bytes());
        }
        s.record(b"-CODE0 again\r\n");
        assert_eq!(s.lines().len(), MAX_ERROR_CODES);
        assert_eq!(s.total(), MAX_ERROR_CODES as u64 + 11);
        assert!(s
            .lines()
            .contains(&("errorstat_CODE0".into(), "count=2".into())));
        s.reset();
        assert!(s.lines().is_empty());
        assert_eq!(s.total(), 0);
    }
}
