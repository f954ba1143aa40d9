//! The adaptive pace's rule, pure (no clock, no I/O): given what one window
//! of the copy saw, the rate for the next. Driven by `Pacer` (`mod.rs`).
//!
//! Above `1 + SLOWDOWN_TARGET` times the baseline the rate is cut by
//! `BACKOFF`; below half that margin it grows by `GROWTH`, but only while
//! the copy uses what it is allowed; in between it holds. A window with no
//! answer while requests wait at the nodes counts as too slow; one with no
//! request at all (nobody to protect) as room to grow.

/// Windows between two measurements of the baseline.
const PROBE_EVERY_WINDOWS: u32 = 25;
/// The same while the rate is at its floor.
const PROBE_AT_FLOOR_WINDOWS: u32 = 5;
/// Where an adaptive copy starts.
const START_KEYS_PER_SEC: f64 = 5_000.0;
/// How much slower (as a fraction of the baseline) clients may get:
/// closed-loop clients then keep about 1 / 1.15 = 0.87 of their throughput.
const SLOWDOWN_TARGET: f64 = 0.15;
/// The rate's factor after a window that was too slow.
const BACKOFF: f64 = 0.7;
/// The rate's factor after a window with room to spare.
const GROWTH: f64 = 1.25;
/// How far a baseline moves towards a lower window's latency.
const BASELINE_EASE: f64 = 0.2;

/// What one window saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Window {
    /// The clients' mean latency in ns; `None` with too few answers to tell.
    pub(crate) latency_ns: Option<f64>,
    /// Requests were waiting at the nodes when the window closed.
    pub(crate) waiting: bool,
    /// Keys the copy moved per second in the window.
    pub(crate) achieved: f64,
}

/// The adaptive rule, pure: one decision per window.
#[derive(Clone, Debug)]
pub(crate) struct Controller {
    rate: f64,
    floor: f64,
    cap: f64,
    /// The clients' latency with (almost) no copy running, ns.
    baseline: Option<f64>,
    /// The last window's latency over the baseline.
    ratio: Option<f64>,
    /// Windows observed since the baseline was last measured.
    windows_since_probe: u32,
}

impl Controller {
    /// A controller between `floor` and `cap` (`f64::INFINITY`: none);
    /// `baseline` is the latency measured before the copy, if any client
    /// was answered then (else the first window's becomes it).
    pub(crate) fn new(floor: f64, cap: f64, baseline: Option<f64>) -> Controller {
        let floor = floor.min(cap);
        Controller {
            rate: START_KEYS_PER_SEC.clamp(floor, cap),
            floor,
            cap,
            baseline,
            ratio: None,
            windows_since_probe: 0,
        }
    }

    /// Whether the copy should pause to measure the baseline again.
    pub(crate) fn is_probe_due(&self) -> bool {
        let every = if self.rate <= self.floor {
            PROBE_AT_FLOOR_WINDOWS
        } else {
            PROBE_EVERY_WINDOWS
        };
        self.windows_since_probe >= every
    }

    /// Takes the latency measured with the copy paused (if enough clients
    /// were answered) as the new baseline, higher or lower.
    pub(crate) fn probed(&mut self, latency_ns: Option<f64>) {
        if latency_ns.is_some() {
            self.baseline = latency_ns;
        }
        self.windows_since_probe = 0;
    }

    /// The rate allowed now, keys per second.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// The last window's client latency over the baseline.
    pub(crate) fn ratio(&self) -> Option<f64> {
        self.ratio
    }

    /// Takes one window into account; returns the new rate.
    pub(crate) fn observe(&mut self, w: Window) -> f64 {
        self.windows_since_probe += 1;
        let grow = |rate: f64, factor: f64| {
            // Only while the copy keeps up with what it is allowed: a rate
            // far above what the nodes achieve would take many windows to
            // come back down from.
            if w.achieved >= rate * 0.8 {
                rate * factor
            } else {
                rate
            }
        };
        self.rate = match (w.latency_ns, self.baseline) {
            (Some(l), None) => {
                self.baseline = Some(l);
                self.ratio = Some(1.0);
                self.rate
            }
            (Some(l), Some(b)) => {
                let ratio = l / b;
                self.ratio = Some(ratio);
                if l < b {
                    self.baseline = Some(b + (l - b) * BASELINE_EASE);
                }
                if ratio > 1.0 + SLOWDOWN_TARGET {
                    self.rate * BACKOFF
                } else if ratio < 1.0 + SLOWDOWN_TARGET / 2.0 {
                    grow(self.rate, GROWTH)
                } else {
                    self.rate
                }
            }
            // Stalled: requests wait but none came back.
            (None, _) if w.waiting => {
                self.ratio = None;
                self.rate * BACKOFF
            }
            // Nobody to slow down.
            (None, _) => {
                self.ratio = None;
                grow(self.rate, 2.0)
            }
        }
        .clamp(self.floor, self.cap);
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(latency_us: Option<f64>, achieved: f64) -> Window {
        Window {
            latency_ns: latency_us.map(|l| l * 1000.0),
            waiting: false,
            achieved,
        }
    }

    #[test]
    fn the_rate_follows_the_clients_latency() {
        // (what, rate before, cap, the window, rate after), all from a
        // baseline of 100 µs and a floor of 1 000 keys/s.
        let inf = f64::INFINITY;
        let stalled = Window {
            latency_ns: None,
            waiting: true,
            achieved: 0.0,
        };
        let cases: &[(&str, f64, f64, Window, f64)] = &[
            (
                "latency at baseline: grow",
                5e3,
                inf,
                seen(Some(100.0), 5e3),
                6_250.0,
            ),
            (
                "within the band: hold",
                5e3,
                inf,
                seen(Some(110.0), 5e3),
                5e3,
            ),
            (
                "rising latency: back off",
                5e3,
                inf,
                seen(Some(130.0), 5e3),
                3_500.0,
            ),
            (
                "far above: back off",
                5e3,
                inf,
                seen(Some(1e3), 5e3),
                3_500.0,
            ),
            (
                "falling, keeping up: grow",
                5e3,
                inf,
                seen(Some(90.0), 4_500.0),
                6_250.0,
            ),
            (
                "copy not using its rate: hold",
                5e3,
                inf,
                seen(Some(90.0), 1e3),
                5e3,
            ),
            ("no clients: double", 5e3, inf, seen(None, 5e3), 10e3),
            ("stalled: back off", 5e3, inf, stalled, 3_500.0),
            (
                "never below the floor",
                1_200.0,
                inf,
                seen(Some(500.0), 1_200.0),
                1e3,
            ),
            ("floor under pressure stays", 1e3, inf, stalled, 1e3),
            ("never above the cap", 5e3, 8e3, seen(None, 5e3), 8e3),
            (
                "growth stops at the cap",
                8e3,
                8e3,
                seen(Some(100.0), 8e3),
                8e3,
            ),
            (
                "a cap under the floor wins",
                500.0,
                500.0,
                seen(Some(500.0), 500.0),
                500.0,
            ),
        ];
        for &(what, before, cap, w, want) in cases {
            let mut c = Controller::new(1e3, cap, Some(100_000.0));
            c.rate = before;
            assert_eq!(c.observe(w), want, "{what}");
        }
    }

    #[test]
    fn sustained_pressure_ends_at_the_floor_and_relief_at_the_cap() {
        let mut c = Controller::new(1_000.0, 50_000.0, Some(100_000.0));
        for _ in 0..50 {
            c.observe(seen(Some(400.0), c.rate()));
            assert!(c.rate() >= 1_000.0);
        }
        assert_eq!(c.rate(), 1_000.0);
        for _ in 0..50 {
            c.observe(seen(Some(100.0), c.rate()));
            assert!(c.rate() <= 50_000.0);
        }
        assert_eq!(c.rate(), 50_000.0);
    }

    #[test]
    fn the_first_window_sets_a_missing_baseline() {
        let mut c = Controller::new(1_000.0, f64::INFINITY, None);
        assert_eq!(c.observe(seen(Some(200.0), 5_000.0)), 5_000.0);
        assert_eq!(c.ratio(), Some(1.0));
        // 260 µs is 1.3 × the 200 µs it measured first.
        assert_eq!(c.observe(seen(Some(260.0), 5_000.0)), 3_500.0);
    }

    #[test]
    fn a_lower_latency_eases_the_baseline_down() {
        let mut c = Controller::new(1_000.0, f64::INFINITY, Some(100_000.0));
        c.observe(seen(Some(50.0), 5_000.0));
        // The baseline moved a fifth of the way: 90 µs.
        c.observe(seen(Some(108.0), 6_250.0));
        assert!((c.ratio().unwrap() - 1.2).abs() < 1e-9);
        assert_eq!(c.rate(), 6_250.0 * BACKOFF);
    }

    #[test]
    fn the_baseline_is_measured_again_sooner_at_the_floor() {
        let mut c = Controller::new(1_000.0, f64::INFINITY, Some(100_000.0));
        for _ in 0..PROBE_EVERY_WINDOWS - 1 {
            c.observe(seen(Some(110.0), c.rate()));
            assert!(!c.is_probe_due());
        }
        c.observe(seen(Some(110.0), c.rate()));
        assert!(c.is_probe_due());
        // The clients got slower on their own: the new baseline is theirs.
        c.probed(Some(300_000.0));
        assert!(!c.is_probe_due());
        assert_eq!(c.observe(seen(Some(300.0), 5e3)), 6_250.0);
        // A probe that saw too few answers keeps the baseline.
        c.probed(None);
        assert_eq!(c.observe(seen(Some(400.0), 6_250.0)), 6_250.0 * BACKOFF);

        let mut c = Controller::new(1_000.0, f64::INFINITY, Some(100_000.0));
        c.rate = 1_000.0;
        for _ in 0..PROBE_AT_FLOOR_WINDOWS {
            assert!(!c.is_probe_due());
            c.observe(seen(Some(500.0), 1e3));
        }
        assert!(c.is_probe_due());
    }
}
