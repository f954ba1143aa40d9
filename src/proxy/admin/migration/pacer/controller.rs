//! The adaptive pace's rule, pure (no clock, no I/O): given what one window
//! of the copy saw, the rate for the next. Driven by `Pacer` (`mod.rs`).
//!
//! Two signals against the baseline, because clients come in two kinds:
//! those that wait for each reply (closed loop) lose throughput, those that
//! send at their own pace (open loop) see latency. The window's strain is
//! the larger of latency ÷ its baseline and baseline throughput ÷ the
//! window's. Above `1 + SLOWDOWN_TARGET` the rate is cut by `BACKOFF`; below
//! half that margin it grows by `GROWTH`, but only while the copy uses what
//! it is allowed; in between it holds. A window with no answer while
//! requests wait at the nodes counts as too slow; `IDLE_WINDOWS` in a row
//! with no request at all (nobody to protect) as room to grow, but a
//! shorter lull as no news: clients that pause between bursts would
//! otherwise come back to a copy running at many times its rate.

/// Windows between two measurements of the baseline.
const PROBE_EVERY_WINDOWS: u32 = 25;
/// The same while the rate is at its floor.
const PROBE_AT_FLOOR_WINDOWS: u32 = 5;
/// Where an adaptive copy starts.
const START_KEYS_PER_SEC: f64 = 5_000.0;
/// How much strain clients may take: a closed-loop client keeps about
/// 1 / 1.15 = 0.87 of its throughput, an open-loop one waits 15 % longer.
const SLOWDOWN_TARGET: f64 = 0.15;
/// The rate's factor after a window that was too slow.
const BACKOFF: f64 = 0.7;
/// The rate's factor after a window with room to spare.
const GROWTH: f64 = 1.25;
/// Windows without a request before the copy speeds up for want of clients.
const IDLE_WINDOWS: u32 = 5;
/// How far a baseline moves towards a better window.
const BASELINE_EASE: f64 = 0.2;

/// How the clients fared over some time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Clients {
    /// Mean latency of the requests answered, ns.
    pub(crate) latency_ns: f64,
    /// Requests answered per second.
    pub(crate) answered_per_sec: f64,
}

/// What one window saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Window {
    /// `None` with too few answers to tell.
    pub(crate) clients: Option<Clients>,
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
    /// How the clients fared with no copy running.
    baseline: Option<Clients>,
    /// The last window's (latency, throughput) over the baseline's.
    ratios: Option<(f64, f64)>,
    /// Windows observed since the baseline was last measured.
    windows_since_probe: u32,
    /// Windows in a row with no request answered or waiting.
    idle_windows: u32,
    /// Windows in a row whose throughput was over budget.
    low_windows: u32,
}

impl Controller {
    /// A controller between `floor` and `cap` (`f64::INFINITY`: none);
    /// `baseline` is what was measured before the copy, if any client was
    /// answered then (else the first window's becomes it).
    pub(crate) fn new(floor: f64, cap: f64, baseline: Option<Clients>) -> Controller {
        let floor = floor.min(cap);
        Controller {
            rate: START_KEYS_PER_SEC.clamp(floor, cap),
            floor,
            cap,
            baseline,
            ratios: None,
            windows_since_probe: 0,
            idle_windows: 0,
            low_windows: 0,
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

    /// Takes what was measured with the copy paused (if enough clients
    /// were answered) as the new baseline, better or worse.
    pub(crate) fn probed(&mut self, clients: Option<Clients>) {
        if clients.is_some() {
            self.baseline = clients;
        }
        self.windows_since_probe = 0;
    }

    /// The rate allowed now, keys per second.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// The last window's client latency and throughput over the baseline's.
    pub(crate) fn ratios(&self) -> Option<(f64, f64)> {
        self.ratios
    }

    /// Takes one window into account; returns the new rate.
    pub(crate) fn observe(&mut self, w: Window) -> f64 {
        self.windows_since_probe += 1;
        let idle = w.clients.is_none() && !w.waiting;
        self.idle_windows = if idle { self.idle_windows + 1 } else { 0 };
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
        self.rate = match (w.clients, self.baseline) {
            (Some(c), None) => {
                self.baseline = Some(c);
                self.ratios = Some((1.0, 1.0));
                self.rate
            }
            (Some(c), Some(b)) => {
                let latency = c.latency_ns / b.latency_ns;
                let throughput = c.answered_per_sec / b.answered_per_sec;
                self.ratios = Some((latency, throughput));
                let ease = |b: f64, c: f64| b + (c - b) * BASELINE_EASE;
                self.baseline = Some(Clients {
                    latency_ns: ease(b.latency_ns, c.latency_ns.min(b.latency_ns)),
                    answered_per_sec: ease(
                        b.answered_per_sec,
                        c.answered_per_sec.max(b.answered_per_sec),
                    ),
                });
                // One window short of answers may be the clients' own
                // pause (a window straddles it): it holds the rate, two
                // in a row cut it.
                let over = 1.0 / throughput.max(1e-9);
                self.low_windows = if over > 1.0 + SLOWDOWN_TARGET {
                    self.low_windows + 1
                } else {
                    0
                };
                let over = if self.low_windows == 1 {
                    1.0 + SLOWDOWN_TARGET
                } else {
                    over
                };
                let strain = latency.max(over);
                if strain > 1.0 + SLOWDOWN_TARGET {
                    self.rate * BACKOFF
                } else if strain < 1.0 + SLOWDOWN_TARGET / 2.0 {
                    grow(self.rate, GROWTH)
                } else {
                    self.rate
                }
            }
            // Stalled: requests wait but none came back.
            (None, _) if w.waiting => {
                self.ratios = None;
                self.rate * BACKOFF
            }
            // Nobody to slow down, for a while now.
            (None, _) if self.idle_windows >= IDLE_WINDOWS => {
                self.ratios = None;
                grow(self.rate, 2.0)
            }
            // A lull: no news.
            (None, _) => self.rate,
        }
        .clamp(self.floor, self.cap);
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 µs and 10 000 answers per second.
    const BASE: Clients = Clients {
        latency_ns: 100_000.0,
        answered_per_sec: 10_000.0,
    };

    /// A window of `latency_us` (`None`: no answers) at the baseline's throughput.
    fn seen(latency_us: Option<f64>, achieved: f64) -> Window {
        served(latency_us, BASE.answered_per_sec, achieved)
    }

    fn served(latency_us: Option<f64>, answered_per_sec: f64, achieved: f64) -> Window {
        Window {
            clients: latency_us.map(|l| Clients {
                latency_ns: l * 1000.0,
                answered_per_sec,
            }),
            waiting: false,
            achieved,
        }
    }

    #[test]
    fn the_rate_follows_the_clients_latency_and_throughput() {
        // (what, rate before, cap, the window, rate after), all from BASE
        // and a floor of 1 000 keys/s.
        let inf = f64::INFINITY;
        let stalled = Window {
            clients: None,
            waiting: true,
            achieved: 0.0,
        };
        #[rustfmt::skip]
        let cases: &[(&str, f64, f64, Window, f64)] = &[
            ("latency at baseline: grow", 5e3, inf, seen(Some(100.0), 5e3), 6_250.0),
            ("within the band: hold", 5e3, inf, seen(Some(110.0), 5e3), 5e3),
            ("rising latency: back off", 5e3, inf, seen(Some(130.0), 5e3), 3_500.0),
            ("far above: back off", 5e3, inf, seen(Some(1e3), 5e3), 3_500.0),
            ("falling, keeping up: grow", 5e3, inf, seen(Some(90.0), 4_500.0), 6_250.0),
            ("copy not using its rate: hold", 5e3, inf, seen(Some(90.0), 1e3), 5e3),
            ("throughput down to 0.8 once: hold", 5e3, inf, served(Some(100.0), 8e3, 5e3), 5e3),
            ("throughput 0.9: hold", 5e3, inf, served(Some(100.0), 9e3, 5e3), 5e3),
            ("more throughput: grow", 5e3, inf, served(Some(100.0), 12e3, 5e3), 6_250.0),
            ("a lull: hold", 5e3, inf, seen(None, 5e3), 5e3),
            ("stalled: back off", 5e3, inf, stalled, 3_500.0),
            ("never below the floor", 1_200.0, inf, seen(Some(500.0), 1_200.0), 1e3),
            ("floor under pressure stays", 1e3, inf, stalled, 1e3),
            ("never above the cap", 7e3, 8e3, seen(Some(100.0), 7e3), 8e3),
            ("growth stops at the cap", 8e3, 8e3, seen(Some(100.0), 8e3), 8e3),
            ("a cap under the floor wins", 500.0, 500.0, seen(Some(500.0), 500.0), 500.0),
        ];
        for &(what, before, cap, w, want) in cases {
            let mut c = Controller::new(1e3, cap, Some(BASE));
            c.rate = before;
            assert_eq!(c.observe(w), want, "{what}");
        }
    }

    #[test]
    fn throughput_short_twice_in_a_row_cuts_the_rate() {
        let mut c = Controller::new(1e3, f64::INFINITY, Some(BASE));
        assert_eq!(c.observe(served(Some(100.0), 8e3, 5e3)), 5e3);
        assert_eq!(c.observe(served(Some(100.0), 8e3, 5e3)), 3_500.0);
        assert_eq!(
            c.observe(served(Some(100.0), 8e3, 3_500.0)),
            3_500.0 * BACKOFF
        );
        // Back within budget: the count starts over.
        assert_eq!(
            c.observe(served(Some(100.0), 10e3, 2_450.0)),
            2_450.0 * GROWTH
        );
        assert_eq!(c.observe(served(Some(100.0), 8e3, 3e3)), 2_450.0 * GROWTH);
    }

    #[test]
    fn only_a_long_silence_speeds_the_copy_up() {
        let mut c = Controller::new(1e3, f64::INFINITY, Some(BASE));
        for _ in 1..IDLE_WINDOWS {
            assert_eq!(c.observe(seen(None, 5e3)), 5e3);
        }
        assert_eq!(c.observe(seen(None, 5e3)), 10e3);
        assert_eq!(c.observe(seen(None, 10e3)), 20e3);
        // Clients are back: one window of them ends the silence.
        assert_eq!(c.observe(seen(Some(110.0), 20e3)), 20e3);
        assert_eq!(c.observe(seen(None, 20e3)), 20e3);
    }

    #[test]
    fn sustained_pressure_ends_at_the_floor_and_relief_at_the_cap() {
        let mut c = Controller::new(1_000.0, 50_000.0, Some(BASE));
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
        assert_eq!(c.ratios(), Some((1.0, 1.0)));
        // 260 µs is 1.3 × the 200 µs it measured first.
        assert_eq!(c.observe(seen(Some(260.0), 5_000.0)), 3_500.0);
    }

    #[test]
    fn a_better_window_eases_the_baseline() {
        let mut c = Controller::new(1_000.0, f64::INFINITY, Some(BASE));
        c.observe(served(Some(50.0), 20e3, 5_000.0));
        // The baseline moved a fifth of the way: 90 µs, 12 000 per second.
        c.observe(served(Some(108.0), 12e3, 6_250.0));
        let (latency, throughput) = c.ratios().unwrap();
        assert!((latency - 1.2).abs() < 1e-9 && (throughput - 1.0).abs() < 1e-9);
        assert_eq!(c.rate(), 6_250.0 * BACKOFF);
    }

    #[test]
    fn the_baseline_is_measured_again_sooner_at_the_floor() {
        let mut c = Controller::new(1_000.0, f64::INFINITY, Some(BASE));
        for _ in 0..PROBE_EVERY_WINDOWS - 1 {
            c.observe(seen(Some(110.0), c.rate()));
            assert!(!c.is_probe_due());
        }
        c.observe(seen(Some(110.0), c.rate()));
        assert!(c.is_probe_due());
        // The clients got slower on their own: the new baseline is theirs.
        c.probed(Some(Clients {
            latency_ns: 300_000.0,
            ..BASE
        }));
        assert!(!c.is_probe_due());
        assert_eq!(c.observe(seen(Some(300.0), 5e3)), 6_250.0);
        // A probe that saw too few answers keeps the baseline.
        c.probed(None);
        assert_eq!(c.observe(seen(Some(400.0), 6_250.0)), 6_250.0 * BACKOFF);

        let mut c = Controller::new(1_000.0, f64::INFINITY, Some(BASE));
        c.rate = 1_000.0;
        for _ in 0..PROBE_AT_FLOOR_WINDOWS {
            assert!(!c.is_probe_due());
            c.observe(seen(Some(500.0), 1e3));
        }
        assert!(c.is_probe_due());
    }
}
