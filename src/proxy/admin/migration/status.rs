//! Progress and history of topology changes, for `CLUSTER RINGINFO`, plus the two
//! pieces of change state that outlive one change: the nodes whose stray
//! copies are still to be deleted, and an operator's request to abort the
//! running change. Written by the migration engine and the admin path; never
//! does I/O.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use tokio::sync::Notify;

use crate::ring::NodeSpec;

/// Progress counters and the text parts of the current or last change.
#[derive(Default)]
pub(crate) struct Tracker {
    pub(crate) keys_copied: AtomicU64,
    pub(crate) keys_resynced: AtomicU64,
    pub(crate) keys_scanned: AtomicU64,
    pub(crate) keys_to_scan: AtomicU64,
    pub(crate) keys_swept: AtomicU64,
    pub(crate) last_rebuild_us: AtomicU64,
    pub(crate) last_pause_ms: AtomicU64,
    /// Time the last cutover spent writing the state file (inside the pause).
    pub(crate) last_persist_us: AtomicU64,
    /// The copy's allowed rate now, keys per second (0: unlimited).
    pub(crate) copy_rate: AtomicU64,
    /// The clients' latency over its baseline in the pacer's last window,
    /// × 1000 (0: not measured).
    pub(crate) copy_latency_ratio_milli: AtomicU64,
    /// The same for the clients' throughput (answered per second).
    pub(crate) copy_throughput_ratio_milli: AtomicU64,
    info: Mutex<TrackerText>,
    /// Nodes holding copies of keys they do not own whose deletion failed
    /// (they were unreachable); retried in the background. A std mutex: held
    /// only to copy or edit the list, never across `.await`.
    pending: Mutex<Vec<NodeSpec>>,
    /// Set by `CLUSTER REMOVENODE` of an unreachable node during a copy:
    /// (the node to blame, why).
    abort_reason: Mutex<Option<(String, String)>>,
    /// One state-file writer at a time (they share a temporary file name).
    pub(super) persist_lock: tokio::sync::Mutex<()>,
    /// Wakes the running change when `abort_reason` is set.
    pub(super) abort: Notify,
    /// Wakes whoever waits for the running change to end.
    pub(super) ended: Notify,
    /// The background retry of pending sweeps is running.
    pub(super) retrying: AtomicBool,
    /// The change shown is another proxy's, mirrored from a shared store:
    /// this proxy routes by it but does not drive it.
    pub(super) following: AtomicBool,
}

/// The text parts of [`Tracker`].
#[derive(Default, Clone)]
pub(crate) struct TrackerText {
    /// `ok`, `copying`, `catch-up`, `cutover`, `sweeping` or `aborted`.
    pub(crate) state: String,
    pub(crate) change: String,
    pub(crate) last_error: String,
    pub(crate) started: Option<Instant>,
    pub(crate) last_duration_ms: u64,
}

impl Tracker {
    pub(super) fn reset(&self, change: String) {
        for c in [
            &self.keys_copied,
            &self.keys_resynced,
            &self.keys_scanned,
            &self.keys_to_scan,
            &self.keys_swept,
            &self.copy_rate,
            &self.copy_latency_ratio_milli,
            &self.copy_throughput_ratio_milli,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.last_pause_ms.store(0, Ordering::Relaxed);
        *self.abort_reason.lock().expect("abort lock") = None;
        self.following.store(false, Ordering::Relaxed);
        let mut t = self.info.lock().expect("tracker lock");
        t.state = "copying".into();
        t.change = change;
        t.last_error.clear();
        t.started = Some(Instant::now());
    }

    /// `CLUSTER RINGINFO`'s lines on the copy's pace: the mode, the rate
    /// allowed now (or last, once the copy ended) and the clients' latency
    /// and throughput over the baseline the adaptive pace measured.
    pub(crate) fn pace_lines(&self, c: &crate::proxy::config::MigrationConfig) -> String {
        use crate::proxy::config::CopyRate;
        let mode = match (c.copy_rate, c.max_keys_per_sec) {
            (CopyRate::Adaptive, _) => "adaptive",
            (CopyRate::Unlimited, 0) => "unlimited",
            (CopyRate::Unlimited, _) => "fixed",
        };
        let rate = match self.copy_rate.load(Ordering::Relaxed) {
            0 if c.copy_rate == CopyRate::Unlimited && c.max_keys_per_sec > 0 => {
                c.max_keys_per_sec.to_string()
            }
            0 if c.copy_rate == CopyRate::Unlimited => "unlimited".to_string(),
            0 => "-".to_string(),
            r => r.to_string(),
        };
        let ratio = |a: &AtomicU64| match a.load(Ordering::Relaxed) {
            0 => "-".to_string(),
            r => format!("{:.2}", r as f64 / 1000.0),
        };
        format!(
            "migration_copy_rate_mode:{mode}\r\nmigration_copy_rate_keys_per_sec:{rate}\r\nmigration_client_latency_ratio:{}\r\nmigration_client_throughput_ratio:{}\r\n",
            ratio(&self.copy_latency_ratio_milli),
            ratio(&self.copy_throughput_ratio_milli),
        )
    }

    pub(super) fn set(&self, f: impl FnOnce(&mut TrackerText)) {
        f(&mut self.info.lock().expect("tracker lock"));
    }

    pub(super) fn state(&self, s: &str) {
        self.set(|t| t.state = s.into());
        if matches!(s, "ok" | "aborted") {
            self.ended.notify_waiters();
        }
    }

    pub(crate) fn text(&self) -> TrackerText {
        let t = self.info.lock().expect("tracker lock").clone();
        TrackerText {
            state: if t.state.is_empty() {
                "ok".into()
            } else {
                t.state
            },
            ..t
        }
    }

    /// True while a change runs (from its start to the end of its first sweep pass).
    pub(crate) fn is_changing(&self) -> bool {
        matches!(
            self.text().state.as_str(),
            "copying" | "catch-up" | "cutover" | "sweeping"
        )
    }

    /// True while this proxy drives a change (not one it only follows).
    pub(crate) fn is_driving(&self) -> bool {
        self.is_changing() && !self.following.load(Ordering::Relaxed)
    }

    /// True while the running change can still be aborted (before the swap).
    pub(crate) fn is_copying(&self) -> bool {
        matches!(self.text().state.as_str(), "copying" | "catch-up")
    }

    /// Asks the running change to abort (it does so between two batches).
    pub(crate) fn request_abort(&self, node: &str, why: &str) {
        *self.abort_reason.lock().expect("abort lock") = Some((node.into(), why.into()));
        self.abort.notify_one();
    }

    pub(super) fn abort_reason(&self) -> Option<(String, String)> {
        self.abort_reason.lock().expect("abort lock").clone()
    }

    /// The nodes whose stray copies are still to be deleted.
    pub(crate) fn pending(&self) -> Vec<NodeSpec> {
        self.pending.lock().expect("pending lock").clone()
    }

    pub(super) fn add_pending(&self, node: &NodeSpec) {
        let mut p = self.pending.lock().expect("pending lock");
        if !p.iter().any(|n| n.name == node.name || n.addr == node.addr) {
            p.push(node.clone());
        }
    }

    /// Forgets `name_or_addr`; true if it was pending.
    pub(super) fn drop_pending(&self, name_or_addr: &str) -> bool {
        let mut p = self.pending.lock().expect("pending lock");
        let before = p.len();
        p.retain(|n| n.name != name_or_addr && n.addr != name_or_addr);
        p.len() != before
    }
}
