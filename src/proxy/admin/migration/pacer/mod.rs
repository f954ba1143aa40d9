//! The copy phase's pace: how many keys per second the mover may copy.
//! Built by `copy_walk` (`copy.rs`) for one change and shared by its walks
//! (one per old owner); reads the proxy's request metrics, publishes the
//! rate in the migration status, and never touches a socket.
//!
//! `migration.copy_rate = "adaptive"` (the default) runs a [`Controller`]
//! (`controller.rs`, the rule alone): before the copy this measures the
//! clients' mean latency and throughput over keyed requests (the baseline);
//! then, every `WINDOW_MS`, the controller compares the last window's with
//! it and cuts, holds or grows the rate. The baseline is measured again with the
//! copy paused for `PROBE_MS` every few seconds (every second while the rate
//! sits at its floor): clients may slow down for reasons of their own (more
//! of them, a busier machine), and a baseline from before would then hold
//! the copy at its floor for nothing. The rate never leaves `[floor,
//! max_keys_per_sec]`, so a copy always progresses and a configured cap
//! stays a hard one. `"unlimited"` copies as fast as the nodes do, or at
//! exactly `max_keys_per_sec` when it is set.

mod controller;

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::proxy::config::CopyRate;
use crate::proxy::Proxy;
use controller::{Clients, Controller, Window};

/// How often the adaptive rate is reconsidered.
const WINDOW_MS: u64 = 200;
/// How long the clients' latency is measured before the copy starts.
const BASELINE_MS: u64 = 500;
/// How long the copy pauses to measure the baseline again; the first
/// [`PROBE_DRAIN_MS`] of it let the batches already sent finish.
const PROBE_MS: u64 = 300;
const PROBE_DRAIN_MS: u64 = 100;
/// The lowest adaptive rate: however slow the clients, a copy progresses.
const FLOOR_KEYS_PER_SEC: f64 = 1_000.0;
/// Fewer answered requests than this in a window is no measurement.
const MIN_SAMPLES: u64 = 20;
/// Unused allowance kept across a pause, so an idle spell is not banked.
const BURST: Duration = Duration::from_millis(WINDOW_MS);

/// The clients' answered keyed requests and their summed latency, and
/// whether any request waits at a node now.
fn client_totals(proxy: &Proxy) -> ((u64, u64), bool) {
    let waiting = proxy
        .routing
        .load()
        .primaries()
        .any(|n| n.health.metrics.in_flight.load(Ordering::Relaxed) > 0);
    (proxy.ops.metrics.keyed_totals(), waiting)
}

/// How the clients fared between two readings of [`client_totals`]
/// `elapsed` apart; `None` with too few answers to tell.
fn measure(before: (u64, u64), after: (u64, u64), elapsed: Duration) -> Option<Clients> {
    let n = after.0.saturating_sub(before.0);
    (n >= MIN_SAMPLES).then(|| Clients {
        latency_ns: after.1.saturating_sub(before.1) as f64 / n as f64,
        answered_per_sec: n as f64 / elapsed.as_secs_f64().max(1e-3),
    })
}

/// The pace of one change's copy, shared by its walks.
pub(crate) struct Pacer<'a> {
    proxy: &'a Proxy,
    /// A std mutex: held only to update a few numbers, never across `.await`.
    state: Mutex<PaceState>,
}

struct PaceState {
    /// `None`: a fixed rate (or none).
    controller: Option<Controller>,
    /// Keys per second; `None`: unlimited.
    rate: Option<f64>,
    /// When the copy may go on: advanced by each batch's share of the rate.
    due: Instant,
    window_start: Instant,
    window_keys: u64,
    window_totals: (u64, u64),
    /// The copy is paused until then while the baseline is measured.
    paused_until: Option<Instant>,
}

/// What a walk does after a batch.
enum Step {
    Go,
    Wait(Duration),
    /// Pause every walk and measure the baseline.
    Probe,
}

impl<'a> Pacer<'a> {
    /// The pace the config asks for; an adaptive one first measures the
    /// clients' latency for [`BASELINE_MS`].
    pub(crate) async fn start(proxy: &'a Proxy) -> Pacer<'a> {
        let c = proxy.config().migration;
        let cap = (c.max_keys_per_sec > 0).then_some(c.max_keys_per_sec as f64);
        let controller = match c.copy_rate {
            CopyRate::Unlimited => None,
            CopyRate::Adaptive => {
                let (before, _) = client_totals(proxy);
                tokio::time::sleep(Duration::from_millis(BASELINE_MS)).await;
                let (after, _) = client_totals(proxy);
                let baseline = measure(before, after, Duration::from_millis(BASELINE_MS));
                Some(Controller::new(
                    FLOOR_KEYS_PER_SEC,
                    cap.unwrap_or(f64::INFINITY),
                    baseline,
                ))
            }
        };
        let rate = controller.as_ref().map(Controller::rate).or(cap);
        let now = Instant::now();
        let pacer = Pacer {
            proxy,
            state: Mutex::new(PaceState {
                controller,
                rate,
                due: now,
                window_start: now,
                window_keys: 0,
                window_totals: client_totals(proxy).0,
                paused_until: None,
            }),
        };
        pacer.publish(rate, None);
        pacer
    }

    /// Shows the rate (and the clients' latency and throughput over the
    /// baseline's) in the migration status.
    fn publish(&self, rate: Option<f64>, ratios: Option<(f64, f64)>) {
        let m = &self.proxy.migration;
        let milli = |r: f64| (r * 1000.0).round().max(1.0) as u64;
        m.copy_rate
            .store(rate.map_or(0, |r| r.round() as u64), Ordering::Relaxed);
        m.copy_latency_ratio_milli
            .store(ratios.map_or(0, |r| milli(r.0)), Ordering::Relaxed);
        m.copy_throughput_ratio_milli
            .store(ratios.map_or(0, |r| milli(r.1)), Ordering::Relaxed);
    }

    /// Called after `keys` keys were copied: waits until the rate allows
    /// the next batch (at least yielding, so the clients' tasks run).
    pub(crate) async fn after(&self, keys: usize) {
        match self.step(keys) {
            Step::Go => tokio::task::yield_now().await,
            Step::Wait(d) => tokio::time::sleep(d).await,
            Step::Probe => self.probe().await,
        }
    }

    /// Accounts for a batch, closes the window when it is due, and says
    /// what the walk does next.
    fn step(&self, keys: usize) -> Step {
        let mut s = self.state.lock().expect("pace lock");
        let now = Instant::now();
        s.window_keys += keys as u64;
        if let Some(until) = s.paused_until {
            return Step::Wait(until.saturating_duration_since(now));
        }
        let elapsed = now.duration_since(s.window_start);
        if elapsed >= Duration::from_millis(WINDOW_MS) {
            let (totals, waiting) = client_totals(self.proxy);
            let w = Window {
                clients: measure(s.window_totals, totals, elapsed),
                waiting,
                achieved: s.window_keys as f64 / elapsed.as_secs_f64(),
            };
            if let Some(c) = s.controller.as_mut() {
                let rate = c.observe(w);
                let (ratios, probe) = (c.ratios(), c.is_probe_due());
                s.rate = Some(rate);
                self.publish(Some(rate), ratios);
                if probe {
                    s.paused_until = Some(now + Duration::from_millis(PROBE_MS));
                    return Step::Probe;
                }
            }
            s.window_start = now;
            s.window_keys = 0;
            s.window_totals = totals;
        }
        let Some(rate) = s.rate else {
            return Step::Go;
        };
        let from = s.due.max(now.checked_sub(BURST).unwrap_or(now));
        s.due = from + Duration::from_secs_f64(keys as f64 / rate);
        match s.due.checked_duration_since(now) {
            Some(d) if !d.is_zero() => Step::Wait(d),
            _ => Step::Go,
        }
    }

    /// Pauses the copy (every walk waits out `paused_until`) and measures
    /// the clients' latency without it, once the batches in flight are done.
    async fn probe(&self) {
        tokio::time::sleep(Duration::from_millis(PROBE_DRAIN_MS)).await;
        let (before, _) = client_totals(self.proxy);
        let measured = Duration::from_millis(PROBE_MS - PROBE_DRAIN_MS);
        tokio::time::sleep(measured).await;
        let (after, _) = client_totals(self.proxy);
        let mut s = self.state.lock().expect("pace lock");
        if let Some(c) = s.controller.as_mut() {
            c.probed(measure(before, after, measured));
        }
        let now = Instant::now();
        s.paused_until = None;
        s.due = now;
        s.window_start = now;
        s.window_keys = 0;
        s.window_totals = after;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measure_needs_enough_answers() {
        let second = Duration::from_secs(1);
        assert_eq!(measure((0, 0), (10, 10_000), second), None);
        assert_eq!(
            measure((10, 0), (110, 100_000), second / 2),
            Some(Clients {
                latency_ns: 1_000.0,
                answered_per_sec: 200.0
            })
        );
    }
}
