//! Synthetic key streams and the parallel driver every simulation pass runs on.
//!
//! Keys are never stored: key `i` is a pure function of (kind, seed, i), written
//! into a caller's stack buffer, so any thread can produce any range and a run
//! is reproducible whatever the thread count. [`par_chunks`] hands out chunks
//! of the key range to scoped threads with per-thread state merged by the
//! caller, and draws the progress bar on stderr.

use std::io::{IsTerminal, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Longest key any kind produces (`user:` + 20 digits).
pub(crate) const MAX_KEY_LEN: usize = 32;

/// Length of a `random` key in bytes.
pub(crate) const RANDOM_KEY_LEN: usize = 16;

/// Keys per work unit: big enough that the shared counter is touched rarely,
/// small enough for an even finish and a smooth progress bar.
const CHUNK: u64 = 1 << 16;

/// What the synthetic keys look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    /// `user:0`, `user:1`, … (the seed is not used).
    User,
    /// 16 seeded pseudo-random bytes per key; may contain `{…}`, which then
    /// acts as a hash tag exactly as it would in the proxy.
    Random,
}

/// Produces key `i` of a stream.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyGen {
    kind: KeyKind,
    seed: u64,
}

impl KeyGen {
    /// A generator for `kind` keys under `seed`.
    pub(crate) fn new(kind: KeyKind, seed: u64) -> KeyGen {
        KeyGen { kind, seed }
    }

    /// Writes key `i` into `buf` and returns it; no allocation.
    #[inline]
    pub(crate) fn key<'b>(&self, i: u64, buf: &'b mut [u8; MAX_KEY_LEN]) -> &'b [u8] {
        match self.kind {
            KeyKind::User => {
                buf[..5].copy_from_slice(b"user:");
                let n = write_decimal(i, &mut buf[5..]);
                &buf[..5 + n]
            }
            KeyKind::Random => {
                // Counter-based: key i needs no state from key i-1.
                let a = splitmix64(self.seed ^ splitmix64(i));
                let b = splitmix64(a);
                buf[..8].copy_from_slice(&a.to_le_bytes());
                buf[8..16].copy_from_slice(&b.to_le_bytes());
                &buf[..RANDOM_KEY_LEN]
            }
        }
    }
}

/// Writes `v` in decimal at the start of `out` (≥ 20 bytes); returns the length.
#[inline]
pub(crate) fn write_decimal(v: u64, out: &mut [u8]) -> usize {
    let mut tmp = [0u8; 20];
    let d = crate::resp::encode::fmt_u64(&mut tmp, v);
    out[..d.len()].copy_from_slice(d);
    d.len()
}

/// The splitmix64 output function: a fast, well-mixed 64→64 bijection.
#[inline]
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Nanoseconds per operation of `run` (which performs `ops` operations): the
/// best of 30 short runs, so runs preempted on busy shared cores do not
/// inflate it (keep one run around a millisecond, under a scheduler slice).
pub(crate) fn best_ns_per_op(ops: usize, mut run: impl FnMut()) -> f64 {
    (0..30)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_nanos() as f64 / ops.max(1) as f64
        })
        .fold(f64::MAX, f64::min)
}

/// Number of worker threads for `requested` (0 = every core).
pub(crate) fn thread_count(requested: usize) -> usize {
    if requested > 0 {
        return requested;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether to draw a progress bar: forced, or stderr is a terminal.
pub(crate) fn want_progress(forced: bool) -> bool {
    forced || std::io::stderr().is_terminal()
}

/// Runs `work` over `0..total` in chunks on `threads` scoped threads, each with
/// its own state from `init`; returns the states for the caller to merge.
/// With `progress`, draws `label`, a bar, rate and ETA on stderr.
pub(crate) fn par_chunks<S, I, W>(
    total: u64,
    threads: usize,
    progress: Option<&str>,
    init: I,
    work: W,
) -> Vec<S>
where
    S: Send,
    I: Fn() -> S + Sync,
    W: Fn(&mut S, Range<u64>) + Sync,
{
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let running = AtomicUsize::new(threads);
    let started = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut state = init();
                    loop {
                        let start = next.fetch_add(CHUNK, Ordering::Relaxed);
                        if start >= total {
                            break;
                        }
                        let end = (start + CHUNK).min(total);
                        work(&mut state, start..end);
                        done.fetch_add(end - start, Ordering::Relaxed);
                    }
                    running.fetch_sub(1, Ordering::Release);
                    state
                })
            })
            .collect();
        if let Some(label) = progress {
            while running.load(Ordering::Acquire) > 0 {
                draw(
                    label,
                    done.load(Ordering::Relaxed),
                    total,
                    started.elapsed(),
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            // Erase the bar so the report starts on a clean line.
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:width$}\r", "", width = 100);
            let _ = err.flush();
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("simulation worker panicked"))
            .collect()
    })
}

/// One progress line: `label [#####.....]  45.2%  452.0M/1.0G keys  3.10M/s  ETA 2m55s`.
fn draw(label: &str, done: u64, total: u64, elapsed: Duration) {
    const WIDTH: usize = 30;
    let frac = if total == 0 {
        1.0
    } else {
        done as f64 / total as f64
    };
    let filled = ((frac * WIDTH as f64) as usize).min(WIDTH);
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
    let eta = if rate > 0.0 {
        (total - done) as f64 / rate
    } else {
        f64::NAN
    };
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r{label} [{}{}] {:5.1}%  {}/{} keys  {}/s  ETA {}   ",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled),
        frac * 100.0,
        super::table::si(done as f64),
        super::table::si(total as f64),
        super::table::si(rate),
        super::table::duration(eta),
    );
    let _ = err.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_keys_are_formatted_without_allocation() {
        let g = KeyGen::new(KeyKind::User, 7);
        let cases: &[(u64, &[u8])] = &[
            (0, b"user:0"),
            (9, b"user:9"),
            (10, b"user:10"),
            (1_000_000_000, b"user:1000000000"),
            (u64::MAX, b"user:18446744073709551615"),
        ];
        let mut buf = [0u8; MAX_KEY_LEN];
        for (i, want) in cases {
            assert_eq!(g.key(*i, &mut buf), *want);
        }
    }

    #[test]
    fn random_keys_depend_only_on_seed_and_index() {
        let (mut a, mut b) = ([0u8; MAX_KEY_LEN], [0u8; MAX_KEY_LEN]);
        let g1 = KeyGen::new(KeyKind::Random, 1);
        let g2 = KeyGen::new(KeyKind::Random, 2);
        assert_eq!(
            g1.key(5, &mut a),
            KeyGen::new(KeyKind::Random, 1).key(5, &mut b)
        );
        assert_ne!(g1.key(5, &mut a), g2.key(5, &mut b));
        assert_ne!(g1.key(5, &mut a), g1.key(6, &mut b));
        assert_eq!(g1.key(5, &mut a).len(), RANDOM_KEY_LEN);
    }

    #[test]
    fn par_chunks_visits_every_index_once_for_any_thread_count() {
        for threads in [1, 2, 3, 8] {
            let total = 3 * CHUNK + 17;
            let states = par_chunks(
                total,
                threads,
                None,
                || (0u64, 0u64),
                |s, r| {
                    s.0 += r.end - r.start;
                    s.1 += r.sum::<u64>();
                },
            );
            let count: u64 = states.iter().map(|s| s.0).sum();
            let sum: u64 = states.iter().map(|s| s.1).sum();
            assert_eq!(count, total, "threads {threads}");
            assert_eq!(sum, total * (total - 1) / 2, "threads {threads}");
        }
    }
}
