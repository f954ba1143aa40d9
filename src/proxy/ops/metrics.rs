//! Hot-path counters for the operator plane: per command (calls, errors,
//! end-to-end latency, nodes engaged), per node (requests, errors, latency,
//! in flight, reconnects) and client bytes.
//!
//! Sessions, routing and upstream actors call the `record`/`observe` methods
//! on every request; `/metrics`, `/stats` and the status page read snapshots.
//! Everything here is a fixed set of atomics created up front — one series per
//! command of the table and per node — so the hot path never takes a lock,
//! never allocates and never looks a name up in a map (prometheus-client's
//! own metric families lock on lookup; we only use its encoder).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::proxy::policy::CommandSpec;
use crate::proxy::policy::Kind;
use crate::proxy::policy::TABLE;

/// Latency bucket upper bounds in nanoseconds: 50 µs … 10 s, the usual
/// Prometheus spread shifted down for a cache.
pub const LATENCY_BOUNDS_NS: &[u64] = &[
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Bucket bounds of "nodes engaged per operation".
pub const ENGAGED_BOUNDS: &[u64] = &[1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128];

/// A histogram of fixed buckets made of atomics: `observe` is one binary
/// search over a dozen bounds and two relaxed `fetch_add`s.
pub struct Histogram {
    bounds: &'static [u64],
    /// One per bound, plus the +Inf bucket; not cumulative.
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [u64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Counts `v` in the first bucket whose bound is ≥ `v` (Prometheus `le`).
    #[inline]
    pub fn observe(&self, v: u64) {
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
    }

    /// Observations so far and their sum, without copying the buckets.
    pub fn totals(&self) -> (u64, u64) {
        let n = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        (n, self.sum.load(Ordering::Relaxed))
    }

    pub fn snapshot(&self) -> HistSnapshot {
        HistSnapshot {
            bounds: self.bounds,
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// A histogram read at one instant (non-cumulative bucket counts).
#[derive(Clone, Debug)]
pub struct HistSnapshot {
    pub bounds: &'static [u64],
    pub counts: Vec<u64>,
    pub sum: u64,
}

impl HistSnapshot {
    pub fn empty(bounds: &'static [u64]) -> HistSnapshot {
        HistSnapshot {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0,
        }
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds another snapshot over the same bounds.
    pub fn add(&mut self, other: &HistSnapshot) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum += other.sum;
    }

    /// `(upper bound × scale, count)` pairs for the Prometheus encoder; the
    /// +Inf bucket is last.
    pub fn buckets(&self, scale: f64) -> Vec<(f64, u64)> {
        self.bounds
            .iter()
            .map(|&b| b as f64 * scale)
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.counts.iter().copied())
            .collect()
    }

    /// The `q` quantile, interpolated linearly inside its bucket; `None`
    /// when empty. A value in the +Inf bucket reports the last bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * total as f64).max(1.0);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 && (seen + c) as f64 >= rank {
                let lo = if i == 0 { 0 } else { self.bounds[i - 1] } as f64;
                let Some(&hi) = self.bounds.get(i) else {
                    return Some(lo);
                };
                let within = (rank - seen as f64) / c as f64;
                return Some(lo + (hi as f64 - lo) * within);
            }
            seen += c;
        }
        self.bounds.last().map(|&b| b as f64)
    }
}

/// One command's series.
pub struct CommandMetrics {
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    /// Errors the proxy answered before any node saw the request (arity,
    /// NOAUTH, CROSSSLOT…): INFO's `rejected_calls`.
    pub rejected: AtomicU64,
    /// End to end, nanoseconds: request decoded → reply ready for the client.
    pub latency: Histogram,
    /// Nodes a request touched: 1 for GET, N for an MGET split over N, all for a fan-out.
    pub engaged: Histogram,
}

impl CommandMetrics {
    fn new() -> CommandMetrics {
        CommandMetrics {
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            latency: Histogram::new(LATENCY_BOUNDS_NS),
            engaged: Histogram::new(ENGAGED_BOUNDS),
        }
    }
}

/// One node's series; lives in the node's `Health`, which its upstream
/// actors already share.
pub struct NodeMetrics {
    pub requests: AtomicU64,
    /// Replies that were errors (the node's own, or ours when it failed).
    pub errors: AtomicU64,
    /// Sent → reply read, nanoseconds.
    pub latency: Histogram,
    pub in_flight: AtomicU64,
    /// Connections re-established after a failure.
    pub reconnects: AtomicU64,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        NodeMetrics {
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency: Histogram::new(LATENCY_BOUNDS_NS),
            in_flight: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
        }
    }
}

impl NodeMetrics {
    /// One reply arrived after `ns`; `is_error` when it was an error reply.
    #[inline]
    pub fn observe(&self, ns: u64, is_error: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if is_error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.latency.observe(ns);
    }
}

/// The proxy-wide series.
pub struct Metrics {
    /// Indexed like [`TABLE`]; the last slot counts unknown commands.
    commands: Box<[CommandMetrics]>,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            commands: (0..=TABLE.len()).map(|_| CommandMetrics::new()).collect(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
        }
    }
}

/// Name of the series that counts requests for commands not in the table.
pub const UNKNOWN_COMMAND: &str = "unknown";

/// The index of a command's series: its command id (the policy column is
/// in catalogue order).
pub fn command_index(spec: &CommandSpec) -> usize {
    spec.id as usize
}

impl Metrics {
    /// The series of a command (`None`: an unknown command).
    #[inline]
    pub fn command(&self, spec: Option<&CommandSpec>) -> &CommandMetrics {
        let i = spec.map_or(TABLE.len(), command_index);
        &self.commands[i]
    }

    /// The series by index (see [`command_index`]).
    #[inline]
    pub fn command_at(&self, idx: usize) -> &CommandMetrics {
        &self.commands[idx.min(TABLE.len())]
    }

    /// One request of command `idx` was answered after `ns`; `rejected`:
    /// with an error of the proxy's own, before any node saw it.
    #[inline]
    pub fn record(&self, idx: usize, ns: u64, is_error: bool, rejected: bool) {
        let c = self.command_at(idx);
        c.calls.fetch_add(1, Ordering::Relaxed);
        if is_error {
            c.errors.fetch_add(1, Ordering::Relaxed);
            if rejected {
                c.rejected.fetch_add(1, Ordering::Relaxed);
            }
        }
        c.latency.observe(ns);
    }

    /// `(name, series)` of every command in the table, in table order
    /// (without the unknown commands' series).
    pub fn table_commands(&self) -> impl Iterator<Item = (&'static str, &CommandMetrics)> {
        TABLE.iter().map(|s| s.name).zip(self.commands.iter())
    }

    /// A request of `spec` was sent to `nodes` nodes.
    #[inline]
    pub fn engaged(&self, spec: &CommandSpec, nodes: usize) {
        self.command(Some(spec)).engaged.observe(nodes as u64);
    }

    /// `(name, series)` for every command that has been called or engaged a node.
    pub fn used_commands(&self) -> impl Iterator<Item = (&'static str, &CommandMetrics)> {
        TABLE
            .iter()
            .map(|s| s.name)
            .chain(std::iter::once(UNKNOWN_COMMAND))
            .zip(self.commands.iter())
            .filter(|(_, c)| {
                c.calls.load(Ordering::Relaxed) > 0 || c.engaged.snapshot().count() > 0
            })
    }

    /// Requests answered so far and their summed latency (ns), over the
    /// commands routed by key (keyed and split), which the migration's
    /// pacer watches: blocking, fan-out and local commands say little about
    /// how busy the nodes are.
    pub fn keyed_totals(&self) -> (u64, u64) {
        TABLE
            .iter()
            .zip(self.commands.iter())
            .filter(|(s, _)| matches!(s.kind, Kind::Keyed | Kind::Split(_)))
            .fold((0, 0), |(n, sum), (_, c)| {
                let (cn, cs) = c.latency.totals();
                (n + cn, sum + cs)
            })
    }

    /// Latency of every command together.
    pub fn all_latency(&self) -> HistSnapshot {
        let mut all = HistSnapshot::empty(LATENCY_BOUNDS_NS);
        for c in self.commands.iter() {
            if c.calls.load(Ordering::Relaxed) > 0 {
                all.add(&c.latency.snapshot());
            }
        }
        all
    }
}

/// Which command a request was and which nodes it went to: set by routing
/// in the client's state, read by the session when the reply is complete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Index of the command's series (see [`command_index`]).
    pub command: u16,
    /// Nodes the request was sent to; 0 when the proxy answered it.
    pub nodes: u16,
    /// The node's index in the routing snapshot, when `nodes` is 1.
    pub node: u32,
}

impl Served {
    /// A request of `spec` (`None`: an unknown command), not sent anywhere yet.
    #[inline]
    pub fn of(spec: Option<&CommandSpec>) -> Served {
        Served {
            command: spec.map_or(TABLE.len(), command_index) as u16,
            nodes: 0,
            node: 0,
        }
    }

    fn pack(self) -> u64 {
        self.command as u64 | (self.nodes as u64) << 16 | (self.node as u64) << 32
    }

    fn unpack(w: u64) -> Served {
        Served {
            command: w as u16,
            nodes: (w >> 16) as u16,
            node: (w >> 32) as u32,
        }
    }
}

/// A [`Served`] in one atomic word, so routing records it through the
/// shared `&ClientState` its handlers get (one relaxed store each).
#[derive(Debug, Default)]
pub struct ServedCell(AtomicU64);

impl ServedCell {
    #[inline]
    pub fn get(&self) -> Served {
        Served::unpack(self.0.load(Ordering::Relaxed))
    }

    #[inline]
    pub fn set(&self, s: Served) {
        self.0.store(s.pack(), Ordering::Relaxed);
    }

    /// Sent to the one node at `idx`.
    #[inline]
    pub fn on(&self, idx: usize) {
        self.set(Served {
            nodes: 1,
            node: idx as u32,
            ..self.get()
        });
    }

    /// Sent to `n` nodes (split or fanned out).
    #[inline]
    pub fn on_many(&self, n: usize) {
        self.set(Served {
            nodes: n.min(u16::MAX as usize) as u16,
            ..self.get()
        });
    }
}

/// One request in flight through a session: what it was, when it was
/// decoded, its bytes (for the slow log, a reference count, not a copy).
pub struct Timing {
    pub started: std::time::Instant,
    pub raw: bytes::Bytes,
    pub served: Served,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::policy::lookup;

    #[test]
    fn histogram_buckets_follow_le() {
        let h = Histogram::new(&[10, 20]);
        for v in [1, 10, 11, 20, 21, 1000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.counts, vec![2, 2, 2]);
        assert_eq!(s.sum, 1063);
        assert_eq!(s.buckets(1.0)[2], (f64::INFINITY, 2));
    }

    #[test]
    fn quantiles_interpolate_within_a_bucket() {
        let h = Histogram::new(&[100, 200]);
        for _ in 0..50 {
            h.observe(50);
        }
        for _ in 0..50 {
            h.observe(150);
        }
        let s = h.snapshot();
        assert_eq!(s.quantile(0.5), Some(100.0));
        assert_eq!(s.quantile(1.0), Some(200.0));
        assert_eq!(HistSnapshot::empty(&[1]).quantile(0.5), None);
    }

    #[test]
    fn served_round_trips_through_its_cell() {
        let c = ServedCell::default();
        c.set(Served::of(lookup(b"MGET")));
        c.on_many(3);
        assert_eq!(c.get().nodes, 3);
        assert_eq!(
            c.get().command as usize,
            command_index(lookup(b"MGET").unwrap())
        );
        c.on(70_000);
        assert_eq!((c.get().nodes, c.get().node), (1, 70_000));
    }

    #[test]
    fn every_command_has_its_own_series() {
        for (i, spec) in TABLE.iter().enumerate() {
            assert_eq!(command_index(lookup(spec.name.as_bytes()).unwrap()), i);
            assert_eq!(command_index(spec), i, "{}", spec.name);
        }
        let m = Metrics::default();
        m.record(command_index(lookup(b"GET").unwrap()), 1_000, false, false);
        m.record(TABLE.len() + 7, 1_000, true, true);
        let used: Vec<&str> = m.used_commands().map(|(n, _)| n).collect();
        assert_eq!(used, vec!["get", UNKNOWN_COMMAND]);
    }
}
