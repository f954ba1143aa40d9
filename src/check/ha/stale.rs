//! Stale reads under `read_from = "replica"`, measured: on a fresh cluster
//! of three shards with one replica each, the load of `versions.rs` on
//! node1's keys, in two runs:
//!
//! - **small `max_lag_bytes`**: the replica in sync, read from steadily;
//!   the stale reads are those replication's asynchrony allows.
//! - **replica paused**: node1's replica is stopped (SIGSTOP) until its lag
//!   has shown above the bound for half a second (at least a second, at
//!   most five, so a slow machine's load still outgrows the bound), then
//!   continued. Its probe's `probe_timeout_ms` is set beyond the
//!   pause, so the failure detector keeps it up: only `max_lag_bytes`, on
//!   the offsets the proxy polls every `probe_interval_ms`, can take it out
//!   of reads. The checker watches `CLUSTER RING` for the moment its lag
//!   shows above `max_lag_bytes`; a read that starts more than one poll
//!   interval after that and is not refused went to the stopped replica,
//!   and breaks the bound.
//!
//! Promised in both: no read returns a value never written, no reader sees
//! a key's versions go backwards (each client sticks to one replica).
//! Called by `mod.rs`, which prints the lines.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::cluster::{HaCluster, Shape};
use super::versions::{self, Figures, Outcome, Read, Versions};
use crate::procs::NodeKind;
use crate::proxy::config::ha::DEFAULT_PROBE_INTERVAL_MS;

const SHARDS: usize = 3;
/// Keys overwritten (one writer each) and readers.
pub(super) const KEYS: usize = 4;
pub(super) const READERS: usize = 4;
/// `max_lag_bytes` of the steady run, and of the paused one.
const SMALL_LAG: u64 = 4_096;
const PAUSE_LAG: u64 = 16_384;
/// Load of the steady run; before the pause, the pause, after it.
const STEADY: Duration = Duration::from_millis(2_000);
const BEFORE: Duration = Duration::from_millis(700);
const PAUSE: Duration = Duration::from_millis(1_000);
/// The pause lasts at least [`PAUSE`], until the lag has shown above the
/// bound for [`HOLD`], and at most [`PAUSE_MAX`].
const HOLD: Duration = Duration::from_millis(500);
const PAUSE_MAX: Duration = Duration::from_millis(5_000);
const AFTER: Duration = Duration::from_millis(1_000);
/// While the replica is stopped, a read on a fresh connection this often.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// The probes' interval (the default, which the runs keep).
pub(super) const POLL: Duration = Duration::from_millis(DEFAULT_PROBE_INTERVAL_MS);

/// What one run measured.
pub(crate) struct StaleOut {
    pub name: &'static str,
    pub max_lag_bytes: u64,
    pub figures: Figures,
    /// Paused run: of the reads started more than [`POLL`] after `CLUSTER
    /// RING` showed the stopped replica's lag above `max_lag_bytes` (and
    /// before it was continued), those sent to it, and all.
    pub after_bound: Option<(u64, u64)>,
    /// Other broken promises (the lag never showed above the bound).
    pub broken: u64,
    pub extra: String,
}

impl StaleOut {
    pub(crate) fn violations(&self) -> u64 {
        let f = &self.figures;
        let after = self.after_bound.map_or(0, |(sent, _)| sent);
        f.never_written + f.backwards + after + self.broken
    }

    pub(crate) const HEADER: &'static str = "| scenario | max_lag_bytes | reads | refused | failed | stale | stale % | max behind, versions | max behind, ms | max behind, bytes (est.) | never written | backwards | paused replica read after the bound | promise | notes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

    pub(crate) fn line(&self) -> String {
        let f = &self.figures;
        let (after, promise) = match self.after_bound {
            Some((sent, all)) => (
                format!("{sent} of {all}"),
                "0 never written, 0 backwards, 0 after the bound",
            ),
            None => ("-".to_string(), "0 never written, 0 backwards"),
        };
        let verdict = if self.violations() == 0 {
            "ok"
        } else {
            "**BROKEN**"
        };
        format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {} | {:.1} | {} | {} | {} | {after} | {promise}: {verdict} | {} |",
            self.name,
            self.max_lag_bytes,
            f.reads,
            f.refused,
            f.failed,
            f.stale,
            f.stale_pct(),
            f.max_versions,
            f.max_behind.as_secs_f64() * 1000.0,
            f.max_bytes,
            f.never_written,
            f.backwards,
            self.extra,
        )
    }
}

fn config(max_lag: u64, probe_timeout_ms: Option<u64>) -> String {
    let mut c = format!("[failover]\nread_from = \"replica\"\nmax_lag_bytes = {max_lag}\n");
    if let Some(ms) = probe_timeout_ms {
        c.push_str(&format!("probe_timeout_ms = {ms}\n"));
    }
    c
}

/// A cluster of one replica a shard, in sync, and the load on node1's keys.
async fn loaded(kind: NodeKind, extra: &str) -> Result<(HaCluster, Versions, Vec<String>), String> {
    let shape = Shape {
        shards: SHARDS,
        replicas: 1,
        extra,
        aof: false,
        sentinel: false,
    };
    let c = HaCluster::start(kind, &shape)?;
    c.wait_synced(SHARDS, 1).await?;
    let tag = c.tag_on("node1", 0).await?;
    let keys = versions::keys(&tag, KEYS);
    let load = Versions::start(&c.proxy_addr, &keys, READERS).await?;
    Ok((c, load, keys))
}

/// The writes' totals: acknowledged, and per second over `secs`.
fn writes_note(writes: &[versions::WriterLog], secs: f64, set_bytes: u64) -> String {
    let acked: usize = writes.iter().map(|w| w.acked.len()).sum();
    format!(
        "{acked} SETs acknowledged ({:.0}/s, {set_bytes} B each)",
        acked as f64 / secs
    )
}

/// The replica in sync, read from for [`STEADY`] under a small
/// `max_lag_bytes`.
pub(super) async fn steady(kind: NodeKind) -> Result<StaleOut, String> {
    let (c, load, _) = loaded(kind, &config(SMALL_LAG, None)).await?;
    tokio::time::sleep(STEADY).await;
    let secs = load.now().as_secs_f64();
    let set_bytes = load.set_bytes;
    let (writes, reads) = load.stop().await?;
    drop(c);
    Ok(StaleOut {
        name: "small max_lag_bytes, replica in sync",
        max_lag_bytes: SMALL_LAG,
        figures: versions::judge(&writes, &reads, set_bytes),
        after_bound: None,
        broken: 0,
        extra: writes_note(&writes, secs, set_bytes),
    })
}

/// Continues a stopped member when dropped, so an error cannot leave it
/// stopped.
struct Continue<'a>(&'a HaCluster, &'a str);

impl Drop for Continue<'_> {
    fn drop(&mut self) {
        let _ = self.0.signal(self.1, "-CONT");
    }
}

/// The `lag=` `CLUSTER RING` shows for replica `addr`.
fn lag_in(ring: &str, addr: &str) -> Option<u64> {
    let line = ring.lines().find(|l| l.starts_with(&format!("{addr} ")))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("lag="))
        .and_then(|n| n.parse().ok())
}

/// node1's replica stopped under the load (see [`HOLD`]), then continued.
pub(super) async fn paused(kind: NodeKind) -> Result<StaleOut, String> {
    // The probe outwaits the pause: the detector never calls it suspect.
    let probe_timeout = PAUSE_MAX.as_millis() as u64 * 2;
    let (c, load, keys) = loaded(kind, &config(PAUSE_LAG, Some(probe_timeout))).await?;
    tokio::time::sleep(BEFORE).await;
    let replica = c.replicas_of(0, 1)[0].clone();
    let stopped_at = load.now();
    c.signal(&replica, "-STOP")?;
    let guard = Continue(&c, &replica);
    let sampling = Arc::new(AtomicBool::new(false));
    let samples = tokio::spawn(versions::sample(
        c.proxy_addr.clone(),
        keys[0].clone(),
        SAMPLE_EVERY,
        sampling.clone(),
        load.t0,
    ));
    let (mut shown, mut peak) = (None, 0);
    let held = |now: Duration, shown: Option<Duration>| {
        now >= stopped_at + PAUSE_MAX
            || (now >= stopped_at + PAUSE && shown.is_some_and(|s| now >= s + HOLD))
    };
    while !held(load.now(), shown) {
        let lag = lag_in(&c.ring().await?, &replica).unwrap_or(0);
        peak = peak.max(lag);
        if shown.is_none() && lag > PAUSE_LAG {
            shown = Some(load.now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let continued_at = load.now();
    sampling.store(true, Ordering::Relaxed);
    drop(guard);
    tokio::time::sleep(AFTER).await;
    let secs = load.now().as_secs_f64();
    let set_bytes = load.set_bytes;
    let (writes, mut reads) = load.stop().await?;
    let samples = samples.await.map_err(|e| e.to_string())?;
    let sampled = samples.len();
    reads.extend(samples);
    drop(c);
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let mut extra = format!(
        "SIGSTOP for {}, probe_timeout_ms = {probe_timeout}, {sampled} more reads on fresh connections (one every {}): ",
        ms(continued_at - stopped_at),
        ms(SAMPLE_EVERY)
    );
    let mut out = StaleOut {
        name: "replica paused (SIGSTOP), lag bound only",
        max_lag_bytes: PAUSE_LAG,
        figures: versions::judge(&writes, &reads, set_bytes),
        after_bound: None,
        broken: 0,
        extra: String::new(),
    };
    match shown {
        Some(at) => {
            out.after_bound = Some(versions::not_refused_between(
                &reads,
                at + POLL,
                continued_at,
            ));
            let (sent, _) = versions::not_refused_between(&reads, stopped_at, at + POLL);
            extra.push_str(&format!(
                "lag shown above the bound {} after the stop (peak shown {peak} B); {sent} reads sent to it before the bound",
                ms(at - stopped_at)
            ));
        }
        None => {
            out.broken += 1;
            extra.push_str(&format!(
                "its lag never showed above the bound (peak shown {peak} B)"
            ));
        }
    }
    if let Some(r) = versions::first_refused(&reads, stopped_at) {
        extra.push_str(&format!(
            "; first refusal {} after the stop",
            ms(r - stopped_at)
        ));
    }
    if let Some(back) = first_answered(&reads, continued_at) {
        extra.push_str(&format!(
            "; read from again {} after SIGCONT",
            ms(back - continued_at)
        ));
    }
    extra.push_str(&format!("; {}", writes_note(&writes, secs, set_bytes)));
    out.extra = extra;
    Ok(out)
}

/// The first read started at or after `from` that was answered: when.
fn first_answered(reads: &[Vec<Read>], from: Duration) -> Option<Duration> {
    reads
        .iter()
        .flatten()
        .filter(|r| r.start >= from && matches!(r.outcome, Outcome::Version(_)))
        .map(|r| r.start)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replicas_lag_is_read_from_its_ring_line() {
        let ring = "node1 127.0.0.1:1 w=1 repl=master offset=900\n127.0.0.1:2 127.0.0.1:2 replica_of=node1 state=up role=replica repl=replica offset=100 lag=800 link=up\n";
        assert_eq!(lag_in(ring, "127.0.0.1:2"), Some(800));
        assert_eq!(lag_in(ring, "127.0.0.1:1"), None);
        assert_eq!(lag_in(ring, "127.0.0.1:3"), None);
    }
}
