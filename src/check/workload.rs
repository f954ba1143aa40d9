//! The checker's clients: each worker owns its keys, so it knows exactly what
//! every read must return.
//!
//! - `s` keys: single-writer, strictly increasing values. A read must return
//!   the last acknowledged value (or a value whose write failed ambiguously);
//!   nil after an acknowledged write is a lost write, an older value a stale read.
//! - `d` keys: written once, then deleted; after the DEL is acknowledged the
//!   key must stay gone (else: resurrected).
//! - `c` keys: INCR counters; the final value must lie between the number of
//!   acknowledged INCRs and that plus the ambiguous ones.
//! - `t` keys: written with a one-hour TTL; the TTL must survive every move.
//! - hashes, lists, sets and sorted sets: see `collections.rs`; under the
//!   default mix half the operations go there.
//! - transactions (MULTI/EXEC transfers under a sum invariant, WATCH
//!   check-and-set): see `txn.rs`; a tenth of the default mix.
//!
//! A node killed with SIGKILL takes its keys with it (a cache node has no
//! persistence): the checker then declares an [`Amnesty`] for the keys the
//! dead node owned under the ring before or after the change, and for those
//! only, a missing key, a counter reset or a lost TTL is not a violation. A
//! value older than the last acknowledged one still is (a stale copy must
//! never reappear), and so is a deleted key coming back.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::client::{Client, Reply};
use super::collections::{self, Coll};
use super::report::Report;
use super::txn::{self, Txn};
use crate::ring::Ring;

/// Keys lost with a killed node: those it owned under any of `rings`.
pub(crate) struct Amnesty {
    pub node: String,
    pub rings: Vec<Ring>,
}

impl Amnesty {
    pub(crate) fn covers(&self, key: &[u8]) -> bool {
        self.rings
            .iter()
            .any(|r| r.node(r.locate(key)).name == self.node)
    }
}

pub(in crate::check) const S_KEYS: usize = 64;
pub(in crate::check) const C_KEYS: usize = 4;
pub(in crate::check) const TTL_MS: i64 = 3_600_000;
/// TTL'd keys per worker, reused round-robin, so the data set (and with it
/// every copy) stays small however long the run.
const T_KEYS: u64 = 256;
/// Deleted keys per worker checked again at the end (the most recent).
const VERIFY_DELETED: usize = 2_000;

/// Counters shared by all workers and the per-second reporter.
#[derive(Default)]
pub(crate) struct Shared {
    pub ops: AtomicU64,
    pub errors: AtomicU64,
    pub lost: AtomicU64,
    pub stale: AtomicU64,
    pub resurrected: AtomicU64,
    pub wrong_counters: AtomicU64,
    /// Account sums seen broken during the run (`txn.rs`).
    pub tx_sum: AtomicU64,
    /// Violations found by the collection workloads, by type (hash, list,
    /// set, sorted set); also counted in the kinds above.
    pub by_type: [AtomicU64; 4],
    pub max_error_window_ms: AtomicU64,
    /// Longest single request (success or error), over the run and in the
    /// current scenario (reset by [`Shared::set_phase`]).
    pub max_stall_ms: AtomicU64,
    pub phase_stall_ms: AtomicU64,
    pub phase_error_window_ms: AtomicU64,
    phase: Mutex<String>,
    amnesties: Mutex<Vec<Arc<Amnesty>>>,
}

impl Shared {
    pub(crate) fn set_phase(&self, p: &str) {
        *self.phase.lock().expect("phase lock") = p.to_string();
        self.phase_stall_ms.store(0, Ordering::Relaxed);
        self.phase_error_window_ms.store(0, Ordering::Relaxed);
    }

    /// Declares keys lost with a killed node (call after the kill).
    pub(crate) fn add_amnesty(&self, a: Amnesty) {
        self.amnesties
            .lock()
            .expect("amnesty lock")
            .push(Arc::new(a));
    }

    pub(crate) fn amnesties(&self) -> Vec<Arc<Amnesty>> {
        self.amnesties.lock().expect("amnesty lock").clone()
    }

    pub(crate) fn phase(&self) -> String {
        self.phase.lock().expect("phase lock").clone()
    }
}

/// What one worker knows when it stops.
#[derive(Clone)]
pub(crate) struct WorkerState {
    pub(super) id: usize,
    pub(in crate::check) acked: Vec<u64>,
    /// Values written by requests that failed ambiguously since the last ack.
    pub(in crate::check) pending: Vec<Vec<u64>>,
    pub(in crate::check) incr_acked: Vec<i64>,
    pub(in crate::check) incr_unknown: Vec<i64>,
    pub(in crate::check) deleted: Vec<u64>,
    pub(in crate::check) ttl_keys: Vec<u64>,
    /// Amnesties already applied.
    excused: usize,
    pub(super) coll: Coll,
    pub(super) txn: Txn,
}

impl WorkerState {
    /// Applies amnesties declared since the last call: for a key the killed
    /// node held, nil (or a reset counter) becomes acceptable; the last
    /// acknowledged value stays acceptable too.
    pub(super) fn apply_amnesties(&mut self, shared: &Shared) {
        let all = shared.amnesties();
        let w = self.id;
        for a in &all[self.excused.min(all.len())..] {
            for i in 0..S_KEYS {
                if self.acked[i] > 0 && a.covers(&key(w, "s", i as u64)) {
                    self.pending[i].push(self.acked[i]);
                    self.acked[i] = 0;
                }
            }
            for j in 0..C_KEYS {
                if a.covers(&key(w, "c", j as u64)) {
                    self.incr_unknown[j] += self.incr_acked[j];
                    self.incr_acked[j] = 0;
                }
            }
            self.ttl_keys.retain(|&n| !a.covers(&key(w, "t", n)));
            self.coll.excuse(w, a);
            self.txn.excuse(w, a);
        }
        self.excused = all.len();
    }
}

/// Which workloads a worker runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mix {
    All,
    Strings,
    Collections,
    Transactions,
}

pub(crate) struct Worker {
    pub(super) st: WorkerState,
    pub(super) client: Client,
    pub(super) shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    rng: u64,
    next_d: u64,
    next_t: u64,
    error_since: Option<Instant>,
    /// Pause after each request (zero: flat out).
    pace: Duration,
    mix: Mix,
}

pub(in crate::check) fn key(w: usize, kind: &str, i: u64) -> Vec<u8> {
    format!("chk:{w}:{kind}:{i}").into_bytes()
}

impl Worker {
    pub(crate) fn new(
        id: usize,
        proxy: &str,
        shared: Arc<Shared>,
        stop: Arc<AtomicBool>,
        pace: Duration,
        mix: Mix,
    ) -> Worker {
        Worker {
            st: WorkerState {
                id,
                acked: vec![0; S_KEYS],
                pending: vec![Vec::new(); S_KEYS],
                incr_acked: vec![0; C_KEYS],
                incr_unknown: vec![0; C_KEYS],
                deleted: Vec::new(),
                ttl_keys: Vec::new(),
                excused: 0,
                coll: Coll::default(),
                txn: Txn::default(),
            },
            client: Client::new(proxy, Duration::from_secs(5)),
            shared,
            stop,
            rng: 0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D),
            next_d: 0,
            next_t: 0,
            error_since: None,
            pace,
            mix,
        }
    }

    pub(super) fn rand(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n
    }

    /// One request; records errors and the error window.
    pub(super) async fn call(&mut self, args: &[&[u8]]) -> Option<Reply> {
        self.shared.ops.fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let r = self.client.call(args).await;
        let took = t0.elapsed().as_millis() as u64;
        self.shared.max_stall_ms.fetch_max(took, Ordering::Relaxed);
        self.shared
            .phase_stall_ms
            .fetch_max(took, Ordering::Relaxed);
        match r {
            Ok(Reply::Error(_)) | Err(_) => {
                self.shared.errors.fetch_add(1, Ordering::Relaxed);
                self.error_since.get_or_insert_with(Instant::now);
                // Back off a little so a restarting proxy is not hammered.
                tokio::time::sleep(Duration::from_millis(5)).await;
                None
            }
            Ok(r) => {
                if let Some(since) = self.error_since.take() {
                    let ms = since.elapsed().as_millis() as u64;
                    self.shared
                        .max_error_window_ms
                        .fetch_max(ms, Ordering::Relaxed);
                    self.shared
                        .phase_error_window_ms
                        .fetch_max(ms, Ordering::Relaxed);
                }
                Some(r)
            }
        }
    }

    pub(crate) async fn run(mut self) -> WorkerState {
        let w = self.st.id;
        let deadline = Instant::now() + Duration::from_secs(900);
        while !self.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            self.st.apply_amnesties(&self.shared);
            if !self.pace.is_zero() {
                tokio::time::sleep(self.pace).await;
            }
            // Under `All`, half the operations go to the collection types
            // and a tenth to transactions.
            let (coll, tx) = match self.mix {
                Mix::All => match self.rand(10) {
                    0..=4 => (true, false),
                    5 => (false, true),
                    _ => (false, false),
                },
                Mix::Strings => (false, false),
                Mix::Collections => (true, false),
                Mix::Transactions => (false, true),
            };
            if coll {
                self.coll_step().await;
                continue;
            }
            if tx {
                self.txn_step().await;
                continue;
            }
            match self.rand(10) {
                0..=3 => {
                    let i = self.rand(S_KEYS as u64) as usize;
                    let v = self.st.acked[i]
                        .max(self.st.pending[i].iter().copied().max().unwrap_or(0))
                        + 1;
                    let (k, val) = (key(w, "s", i as u64), v.to_string());
                    match self.call(&[b"SET", &k, val.as_bytes()]).await {
                        Some(Reply::Simple(_)) => {
                            self.st.acked[i] = v;
                            self.st.pending[i].clear();
                        }
                        _ => self.st.pending[i].push(v),
                    }
                }
                4..=6 => {
                    let i = self.rand(S_KEYS as u64) as usize;
                    if let Some(r) = self.call(&[b"GET", &key(w, "s", i as u64)]).await {
                        check_s(&mut self.st, i, &r, &self.shared);
                    }
                }
                7 => {
                    let j = self.rand(C_KEYS as u64) as usize;
                    match self.call(&[b"INCR", &key(w, "c", j as u64)]).await {
                        Some(Reply::Int(_)) => self.st.incr_acked[j] += 1,
                        _ => self.st.incr_unknown[j] += 1,
                    }
                }
                8 => {
                    // Write once, delete, and read an older deleted key back.
                    let n = self.next_d;
                    self.next_d += 1;
                    let k = key(w, "d", n);
                    if let Some(Reply::Simple(_)) = self.call(&[b"SET", &k, b"1"]).await {
                        if let Some(Reply::Int(1)) = self.call(&[b"DEL", &k]).await {
                            self.st.deleted.push(n);
                        }
                    }
                    if !self.st.deleted.is_empty() {
                        let at = self.rand(self.st.deleted.len() as u64) as usize;
                        let pick = self.st.deleted[at];
                        if let Some(Reply::Bulk(Some(_))) =
                            self.call(&[b"GET", &key(w, "d", pick)]).await
                        {
                            self.shared.resurrected.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                _ => {
                    let n = self.next_t % T_KEYS;
                    self.next_t += 1;
                    let ttl = TTL_MS.to_string();
                    if let Some(Reply::Simple(_)) = self
                        .call(&[b"SET", &key(w, "t", n), b"v", b"PX", ttl.as_bytes()])
                        .await
                    {
                        if !self.st.ttl_keys.contains(&n) {
                            self.st.ttl_keys.push(n);
                        }
                    }
                }
            }
        }
        self.st
    }
}

/// Checks a read of `s` key `i` against what the worker knows; returns a violation kind.
pub(in crate::check) fn check_s(
    st: &mut WorkerState,
    i: usize,
    r: &Reply,
    shared: &Shared,
) -> Option<&'static str> {
    let got = match r {
        Reply::Bulk(None) => None,
        Reply::Bulk(Some(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<u64>().ok()),
        _ => return None,
    };
    match got {
        None if st.acked[i] > 0 => {
            shared.lost.fetch_add(1, Ordering::Relaxed);
            Some("lost")
        }
        None => None,
        Some(v) if v == st.acked[i] => None,
        Some(v) if st.pending[i].contains(&v) => {
            // An ambiguous write did apply.
            st.acked[i] = v;
            st.pending[i].retain(|&p| p > v);
            None
        }
        Some(_) => {
            shared.stale.fetch_add(1, Ordering::Relaxed);
            Some("stale")
        }
    }
}

/// Final reads through the proxy against what each worker knows.
pub(crate) async fn verify(
    proxy: &str,
    workers: &[WorkerState],
    all: &Shared,
) -> Result<Report, String> {
    let shared = Shared::default();
    let mut c = Client::new(proxy, Duration::from_secs(10));
    let mut report = Report::default();
    for st in workers {
        let mut st = st.clone();
        st.apply_amnesties(all);
        let w = st.id;
        for i in 0..S_KEYS {
            let r = c.call(&[b"GET", &key(w, "s", i as u64)]).await?;
            check_s(&mut st, i, &r, &shared);
        }
        for j in 0..C_KEYS {
            let r = c.call(&[b"GET", &key(w, "c", j as u64)]).await?;
            let v = r.as_int().unwrap_or(0);
            if v < st.incr_acked[j] || v > st.incr_acked[j] + st.incr_unknown[j] {
                report.wrong_counters += 1;
            }
        }
        for &n in st.deleted.iter().rev().take(VERIFY_DELETED) {
            if let Reply::Bulk(Some(_)) = c.call(&[b"GET", &key(w, "d", n)]).await? {
                report.resurrected += 1;
            }
        }
        for &n in &st.ttl_keys {
            let r = c.call(&[b"PTTL", &key(w, "t", n)]).await?;
            match r.as_int() {
                Some(ms) if ms > 0 && ms <= TTL_MS => {}
                _ => report.lost_ttls += 1,
            }
        }
        let v = collections::verify(&mut c, w, &mut st.coll, &shared).await?;
        report.lost_ttls += v.lost_ttls;
        report.coll_keys += v.keys;
        report.coll_ttls += v.ttls;
    }
    let txns: Vec<(usize, Txn)> = workers
        .iter()
        .map(|st| {
            let mut st = st.clone();
            st.apply_amnesties(all);
            (st.id, st.txn)
        })
        .collect();
    let (sums, cas) = txn::verify(&mut c, &txns, &all.amnesties()).await?;
    report.tx_sum = sums;
    report.tx_cas = cas;
    report.tx_transfers = txns.iter().map(|(_, t)| t.transfers).sum();
    report.tx_cas_committed = txns.iter().flat_map(|(_, t)| t.cas_acked).sum::<i64>() as u64;
    report.tx_cas_aborted = txns.iter().map(|(_, t)| t.cas_aborted).sum();
    report.lost = shared.lost.load(Ordering::Relaxed);
    report.stale = shared.stale.load(Ordering::Relaxed);
    report.resurrected += shared.resurrected.load(Ordering::Relaxed);
    report.wrong_counters += shared.wrong_counters.load(Ordering::Relaxed);
    for (t, n) in shared.by_type.iter().enumerate() {
        report.by_type[t] = n.load(Ordering::Relaxed);
    }
    Ok(report)
}
