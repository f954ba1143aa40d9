//! Where the load goes: the hot-key sketch (`CLUSTER HOTKEYS`) and the
//! hot-shard tripwire (`hot_shard:` in `CLUSTER RINGINFO`, a metric, a warning).
//!
//! Routing offers every keyed request's key to [`HotKeys::sample`], which
//! keeps 1 request in [`SAMPLE_EVERY`] (a per-thread counter: no shared write
//! on the other 15) and counts the sampled key in a space-saving top-K sketch
//! (Metwally et al.): at most `capacity` keys of at most
//! [`KEY_SAMPLE_BYTES`] bytes each, so its memory is bounded whatever the
//! keyspace. Counts decay by 10 % a second, so they follow the request rate
//! over roughly the last ten seconds rather than all time.
//!
//! The tripwire reads each node's request counter once a second and keeps ten
//! 1-second buckets; a node whose share of the window's requests exceeds
//! `shard_alarm_ratio` × its expected share (its share of the ring, which is
//! the mean share 1/N when weights are equal) is hot.
//!
//! Never called with a lock held; the sketch's mutex is taken only on
//! sampled requests and by the once-a-second ticker.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::proxy::Proxy;

/// One request in this many is sampled into the sketch.
pub const SAMPLE_EVERY: u32 = 16;
/// Sampled keys are cut to this length (keys sharing these bytes share a slot).
pub const KEY_SAMPLE_BYTES: usize = 64;
/// Sampled requests (about this many × [`SAMPLE_EVERY`] real ones in the
/// last seconds) that make a key hot for the GET cache.
pub const HOT_MIN_SAMPLES: u64 = 2;
/// Seconds in the tripwire's sliding window (one bucket per second).
pub const WINDOW_SECS: usize = 10;
/// Below this many requests in the window, no node is called hot.
pub const MIN_WINDOW_REQUESTS: u64 = 100;
/// A hot node is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

thread_local! {
    static TICKS: Cell<u32> = const { Cell::new(0) };
}

struct Slot {
    key: Bytes,
    /// Sampled hits, decayed; may overestimate by at most `error`.
    count: u64,
    error: u64,
}

/// Space-saving top-K: a key not tracked replaces the least counted one and
/// inherits its count (so counts are upper bounds, off by at most `error`).
struct SpaceSaving {
    slots: Vec<Slot>,
    index: HashMap<Bytes, usize>,
    capacity: usize,
}

impl SpaceSaving {
    fn offer(&mut self, key: &[u8]) {
        let key = &key[..key.len().min(KEY_SAMPLE_BYTES)];
        if let Some(&i) = self.index.get(key) {
            self.slots[i].count += 1;
            return;
        }
        let key = Bytes::copy_from_slice(key);
        if self.slots.len() < self.capacity {
            self.index.insert(key.clone(), self.slots.len());
            self.slots.push(Slot {
                key,
                count: 1,
                error: 0,
            });
            return;
        }
        let Some((i, min)) = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.count))
            .min_by_key(|&(_, c)| c)
        else {
            return;
        };
        self.index.remove(&self.slots[i].key);
        self.index.insert(key.clone(), i);
        self.slots[i] = Slot {
            key,
            count: min + 1,
            error: min,
        };
    }

    /// Forgets 10 % of every count; keys that reach 0 leave.
    fn decay(&mut self) {
        for s in &mut self.slots {
            s.count -= s.count.div_ceil(10);
            s.error -= s.error.div_ceil(10);
        }
        if self.slots.iter().any(|s| s.count == 0) {
            self.slots.retain(|s| s.count > 0);
            self.index = self
                .slots
                .iter()
                .enumerate()
                .map(|(i, s)| (s.key.clone(), i))
                .collect();
        }
    }
}

/// The hot-key sketch.
pub struct HotKeys {
    sketch: Mutex<SpaceSaving>,
}

impl HotKeys {
    pub fn new(capacity: usize) -> HotKeys {
        HotKeys {
            sketch: Mutex::new(SpaceSaving {
                slots: Vec::with_capacity(capacity),
                index: HashMap::with_capacity(capacity),
                capacity: capacity.max(1),
            }),
        }
    }

    /// Called for every keyed request; keeps one in [`SAMPLE_EVERY`].
    #[inline]
    pub fn sample(&self, key: &[u8]) {
        let hit = TICKS.with(|t| {
            let n = t.get().wrapping_add(1);
            t.set(n);
            n % SAMPLE_EVERY == 0
        });
        if hit {
            self.offer(key);
        }
    }

    /// Counts one sampled request for `key`.
    pub fn offer(&self, key: &[u8]) {
        if let Ok(mut s) = self.sketch.lock() {
            s.offer(key);
        }
    }

    /// Whether `key` is among the tracked keys with at least
    /// [`HOT_MIN_SAMPLES`] sampled requests beyond the sketch's possible
    /// overcount (a key that merely took the least counted slot is not hot).
    pub fn is_hot(&self, key: &[u8]) -> bool {
        let key = &key[..key.len().min(KEY_SAMPLE_BYTES)];
        let Ok(s) = self.sketch.lock() else {
            return false;
        };
        s.index
            .get(key)
            .is_some_and(|&i| s.slots[i].count - s.slots[i].error >= HOT_MIN_SAMPLES)
    }

    pub fn decay(&self) {
        if let Ok(mut s) = self.sketch.lock() {
            s.decay();
        }
    }

    /// The `n` hottest keys with their estimated recent request counts
    /// (sampled hits × [`SAMPLE_EVERY`]), hottest first.
    pub fn top(&self, n: usize) -> Vec<(Bytes, u64)> {
        let Ok(s) = self.sketch.lock() else {
            return Vec::new();
        };
        let mut v: Vec<(Bytes, u64)> = s
            .slots
            .iter()
            .map(|s| (s.key.clone(), s.count * SAMPLE_EVERY as u64))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

/// One node's load over the tripwire's window.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeLoad {
    pub name: String,
    pub requests_per_sec: f64,
    /// Its share of all nodes' requests in the window.
    pub share: f64,
    /// Its share of the ring.
    pub expected: f64,
    pub hot: bool,
}

/// One tick of the tripwire: when, the proxy's cumulative requests, each
/// node's cumulative requests.
type Tick = (Instant, u64, Vec<(String, u64)>);

#[derive(Default)]
struct TripState {
    /// Per tick: when, the proxy's cumulative request count, and each
    /// node's cumulative request count.
    history: VecDeque<Tick>,
    loads: Vec<NodeLoad>,
    /// Client requests per second over the window.
    requests_per_sec: f64,
    warned: HashMap<String, Instant>,
}

/// The hot-shard tripwire.
pub struct Tripwire {
    ratio: f64,
    state: Mutex<TripState>,
}

impl Tripwire {
    pub fn new(ratio: f64) -> Tripwire {
        Tripwire {
            ratio,
            state: Mutex::new(TripState::default()),
        }
    }

    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// Records one tick: the proxy's cumulative client requests, and each
    /// node's name, cumulative requests and ring share.
    pub fn tick(&self, now: Instant, requests: u64, nodes: &[(String, u64, f64)]) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let counts = nodes.iter().map(|(n, c, _)| (n.clone(), *c)).collect();
        st.history.push_back((now, requests, counts));
        while st.history.len() > WINDOW_SECS + 1 {
            st.history.pop_front();
        }
        let (then, old_requests, old) =
            st.history
                .front()
                .cloned()
                .unwrap_or((now, requests, Vec::new()));
        let secs = now.duration_since(then).as_secs_f64().max(1e-3);
        st.requests_per_sec = if now == then {
            0.0
        } else {
            requests.saturating_sub(old_requests) as f64 / secs
        };
        let deltas: Vec<u64> = nodes
            .iter()
            .map(|(name, c, _)| {
                let before = old.iter().find(|(n, _)| n == name).map_or(0, |(_, c)| *c);
                c.saturating_sub(before)
            })
            .collect();
        let total: u64 = deltas.iter().sum();
        let judged = total >= MIN_WINDOW_REQUESTS && nodes.len() > 1;
        let loads: Vec<NodeLoad> = nodes
            .iter()
            .zip(&deltas)
            .map(|((name, _, expected), &d)| {
                let share = if total == 0 {
                    0.0
                } else {
                    d as f64 / total as f64
                };
                NodeLoad {
                    name: name.clone(),
                    requests_per_sec: d as f64 / secs,
                    share,
                    expected: *expected,
                    hot: judged && share > self.ratio * expected,
                }
            })
            .collect();
        for l in loads.iter().filter(|l| l.hot) {
            let due = st
                .warned
                .get(&l.name)
                .is_none_or(|t| now.duration_since(*t) >= WARN_EVERY);
            if due {
                tracing::warn!(
                    node = %l.name,
                    share = format!("{:.1}%", l.share * 100.0),
                    expected = format!("{:.1}%", l.expected * 100.0),
                    ratio = self.ratio,
                    "hot shard: node serves more than {}x its share of requests over the last {WINDOW_SECS} s",
                    self.ratio
                );
                st.warned.insert(l.name.clone(), now);
            }
        }
        st.loads = loads;
    }

    /// Client requests per second over the window, at the last tick.
    pub fn requests_per_sec(&self) -> f64 {
        self.state.lock().map_or(0.0, |s| s.requests_per_sec)
    }

    /// Every node's load at the last tick.
    pub fn loads(&self) -> Vec<NodeLoad> {
        self.state
            .lock()
            .map(|s| s.loads.clone())
            .unwrap_or_default()
    }

    /// The `CLUSTER RINGINFO` value: `none`, or the hot nodes with their shares.
    pub fn summary(&self) -> String {
        let hot: Vec<String> = self
            .loads()
            .iter()
            .filter(|l| l.hot)
            .map(|l| {
                format!(
                    "{}(share={:.3},expected={:.3})",
                    l.name, l.share, l.expected
                )
            })
            .collect();
        if hot.is_empty() {
            "none".into()
        } else {
            hot.join(",")
        }
    }
}

/// Once a second until the proxy is dropped: decay the sketch and feed the tripwire.
pub(crate) async fn run_ticker(proxy: Weak<Proxy>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        let Some(p) = proxy.upgrade() else { return };
        p.ops.hot_keys.decay();
        let routing = p.routing.load();
        let nodes: Vec<(String, u64, f64)> = routing
            .primaries()
            .enumerate()
            .map(|(i, n)| {
                (
                    n.spec.name.clone(),
                    n.health.metrics.requests.load(Ordering::Relaxed),
                    routing.ring.share_of(i),
                )
            })
            .collect();
        let requests = p.stats.commands.load(Ordering::Relaxed);
        p.ops.tripwire.tick(Instant::now(), requests, &nodes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketch_finds_the_heavy_keys_in_bounded_space() {
        let hk = HotKeys::new(32);
        for i in 0..10_000u32 {
            hk.offer(format!("cold:{i}").as_bytes());
            if i % 4 == 0 {
                hk.offer(b"hot:a");
            }
            if i % 10 == 0 {
                hk.offer(b"hot:b");
            }
        }
        let top = hk.top(2);
        assert_eq!(&top[0].0[..], b"hot:a");
        assert_eq!(&top[1].0[..], b"hot:b");
        assert!(top[0].1 >= 2_500 * SAMPLE_EVERY as u64);
        assert!(hk.sketch.lock().unwrap().slots.len() <= 32);
    }

    #[test]
    fn a_key_is_hot_after_enough_sampled_requests_and_cools_down() {
        let hk = HotKeys::new(4);
        hk.offer(b"k");
        assert!(!hk.is_hot(b"k"));
        hk.offer(b"k");
        assert!(hk.is_hot(b"k"));
        assert!(!hk.is_hot(b"other"));
        hk.decay();
        assert!(!hk.is_hot(b"k"));
    }

    #[test]
    fn one_request_in_sample_every_reaches_the_sketch() {
        let hk = std::sync::Arc::new(HotKeys::new(4));
        let h = hk.clone();
        // A fresh thread: its sampling counter starts at zero.
        std::thread::spawn(move || {
            for _ in 0..SAMPLE_EVERY * 10 + 5 {
                h.sample(b"k");
            }
        })
        .join()
        .unwrap();
        assert_eq!(hk.top(1)[0].1, 10 * SAMPLE_EVERY as u64);
    }

    #[test]
    fn long_keys_are_cut_and_counts_decay() {
        let hk = HotKeys::new(4);
        let long = vec![b'x'; 1000];
        for _ in 0..10 {
            hk.offer(&long);
        }
        let top = hk.top(5);
        assert_eq!(top[0].0.len(), KEY_SAMPLE_BYTES);
        assert_eq!(top[0].1, 10 * SAMPLE_EVERY as u64);
        hk.decay();
        assert_eq!(hk.top(1)[0].1, 9 * SAMPLE_EVERY as u64);
        for _ in 0..20 {
            hk.decay();
        }
        assert!(hk.top(1).is_empty());
    }

    #[test]
    fn tripwire_flags_a_node_over_ratio_times_its_share() {
        let t = Tripwire::new(3.0);
        let t0 = Instant::now();
        let names = ["a", "b", "c", "d", "e"];
        let at = |secs: u64, counts: [u64; 5]| -> Vec<(String, u64, f64)> {
            let _ = secs;
            names
                .iter()
                .zip(counts)
                .map(|(n, c)| (n.to_string(), c, 0.2))
                .collect()
        };
        t.tick(t0, 0, &at(0, [0; 5]));
        t.tick(t0 + Duration::from_secs(1), 0, &at(1, [50, 50, 50, 50, 50]));
        assert_eq!(t.summary(), "none");
        // a gets 700 of the next 800 requests: share ≈ 0.78 > 3 × 0.2.
        t.tick(
            t0 + Duration::from_secs(2),
            0,
            &at(2, [750, 75, 75, 75, 75]),
        );
        let loads = t.loads();
        assert!(loads[0].hot && !loads[1].hot, "{loads:?}");
        assert!(t.summary().starts_with("a(share=0.7"), "{}", t.summary());
        // Too few requests: nobody is judged.
        let quiet = Tripwire::new(3.0);
        quiet.tick(t0, 0, &at(0, [0; 5]));
        quiet.tick(t0 + Duration::from_secs(1), 0, &at(1, [50, 0, 0, 0, 0]));
        assert_eq!(quiet.summary(), "none");
    }
}
