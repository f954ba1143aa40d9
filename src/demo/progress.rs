//! A hand-drawn progress bar on stderr for the demo's long steps: one line,
//! redrawn in place with `\r`, at most ten times a second.
//!
//! Drawn only when stderr is a terminal (a log file full of carriage returns
//! helps nobody); the report itself goes to stdout either way.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BAR_WIDTH: usize = 30;
const REDRAW_MS: u64 = 100;

/// A counter that work tasks bump and a drawing task shows.
#[derive(Clone)]
pub(crate) struct Progress {
    done: Arc<AtomicU64>,
    total: Arc<AtomicU64>,
}

impl Progress {
    /// A bar for `total` units of work.
    pub(crate) fn new(total: u64) -> Progress {
        Progress {
            done: Arc::new(AtomicU64::new(0)),
            total: Arc::new(AtomicU64::new(total)),
        }
    }

    /// Sets both counters (for work whose total is learnt on the way).
    pub(crate) fn set(&self, done: u64, total: u64) {
        self.done.store(done, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    /// Records `n` more units done.
    pub(crate) fn add(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    /// Units done so far.
    pub(crate) fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Redraws the bar until `work` finishes, then clears the line.
    pub(crate) async fn show<T>(
        &self,
        label: &str,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let draw = std::io::stderr().is_terminal();
        tokio::pin!(work);
        let t0 = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(REDRAW_MS));
        let out = loop {
            tokio::select! {
                out = &mut work => break out,
                _ = tick.tick() => {
                    if draw {
                        let line = bar_line(label, self.done(), self.total.load(Ordering::Relaxed), t0.elapsed());
                        let mut e = std::io::stderr().lock();
                        let _ = write!(e, "\r{line}");
                        let _ = e.flush();
                    }
                }
            }
        };
        if draw {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r{:width$}\r", "", width = 100);
            let _ = e.flush();
        }
        out
    }
}

/// `label [██████░░░░]  52%  520k/1.0M  310k/s  ETA 2s`
pub(crate) fn bar_line(label: &str, done: u64, total: u64, elapsed: Duration) -> String {
    // A total not known yet (a change that has not counted its keys) is no
    // work done: 0 %, not 100 %.
    let frac = if total == 0 {
        0.0
    } else {
        (done as f64 / total as f64).min(1.0)
    };
    let filled = (frac * BAR_WIDTH as f64).round() as usize;
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
    let eta = if rate > 0.0 && done < total {
        format!("ETA {:.0}s", (total - done) as f64 / rate)
    } else {
        String::new()
    };
    format!(
        "  {label:<18} [{}{}] {:>3.0}%  {}/{}  {}/s  {eta}   ",
        "█".repeat(filled),
        "░".repeat(BAR_WIDTH - filled),
        frac * 100.0,
        short(done as f64),
        if total == 0 {
            "?".to_string()
        } else {
            short(total as f64)
        },
        short(rate),
    )
}

/// 1234567 → `1.2M`, 52000 → `52.0k`.
pub(crate) fn short(n: f64) -> String {
    if n >= 1e9 {
        format!("{:.1}G", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.1}M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fills_in_proportion() {
        let line = bar_line("writing", 50, 100, Duration::from_secs(1));
        assert!(line.contains(&"█".repeat(15)), "{line}");
        assert!(line.contains(" 50%"), "{line}");
        assert!(line.contains("ETA 1s"), "{line}");
        assert_eq!(short(1_234_567.0), "1.2M");
    }

    #[test]
    fn a_bar_whose_total_is_not_known_yet_starts_empty() {
        let line = bar_line("adding node11", 0, 0, Duration::from_secs(1));
        assert!(line.contains(&"░".repeat(BAR_WIDTH)), "{line}");
        assert!(line.contains("  0%  0/?"), "{line}");
    }
}
