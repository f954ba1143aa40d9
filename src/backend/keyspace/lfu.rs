//! LFU access counters (kept in an entry's `lru` field under an LFU
//! policy) and the node's cheap random numbers, which they, eviction's
//! sampling and the random-member commands draw from.

use super::clock::now_ms;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

thread_local! {
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(now_ms());
    h.finish() | 1
}

/// A fast non-cryptographic random number (xorshift64*).
pub(crate) fn random() -> u64 {
    RNG.with(|c| {
        let mut x = c.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// Under an LFU policy an entry's `lru` field holds Redis's LFU data
/// instead of a clock: access time in minutes (16 bits) then a logarithmic
/// access counter (8 bits), so no entry grows.
#[derive(Debug)]
pub(crate) struct Lfu {
    /// An LFU policy is selected.
    pub(crate) enabled: AtomicBool,
    /// `lfu-log-factor`.
    pub(crate) log_factor: AtomicU32,
    /// `lfu-decay-time`, minutes.
    pub(crate) decay_time: AtomicU32,
}

impl Default for Lfu {
    fn default() -> Self {
        Lfu {
            enabled: AtomicBool::new(false),
            log_factor: AtomicU32::new(10),
            decay_time: AtomicU32::new(1),
        }
    }
}

/// Counter given to new keys, so they are not evicted at once (Redis
/// `LFU_INIT_VAL`).
const LFU_INIT_VAL: u32 = 5;

fn lfu_minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xffff) as u32
}

impl Lfu {
    /// Whether accesses update LFU data rather than the LRU clock.
    pub(crate) fn is_on(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    /// The `lru` field of a new entry.
    pub(crate) fn initial(&self, now_ms: u64) -> u32 {
        (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL
    }

    /// The counter after decay (OBJECT FREQ; Redis `LFUDecrAndReturn`).
    pub(crate) fn decayed(&self, lru: u32, now_ms: u64) -> u32 {
        // Masked to Redis's 24 bits: after a switch from an LRU policy the
        // field still holds a clock, read as (arbitrary) LFU data.
        let (ldt, counter) = ((lru >> 8) & 0xffff, lru & 255);
        let now = lfu_minutes(now_ms);
        let elapsed = if now >= ldt {
            now - ldt
        } else {
            65535 - ldt + now
        };
        let decay = self.decay_time.load(Relaxed);
        let periods = elapsed.checked_div(decay).unwrap_or(0);
        counter.saturating_sub(periods)
    }

    /// The `lru` field after one access: decay, then a logarithmic
    /// increment (Redis `updateLFU`).
    pub(crate) fn touched(&self, lru: u32, now_ms: u64) -> u32 {
        let mut counter = self.decayed(lru, now_ms);
        if counter < 255 {
            let r = (random() >> 11) as f64 / (1u64 << 53) as f64;
            let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
            let p = 1.0 / (base * self.log_factor.load(Relaxed) as f64 + 1.0);
            if r < p {
                counter += 1;
            }
        }
        (lfu_minutes(now_ms) << 8) | counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::keyspace::clock::lru_clock;

    #[test]
    fn lfu_data_decays_and_survives_a_switch_from_lru() {
        let lfu = Lfu::default();
        let now = 10 * 60_000;
        assert_eq!(lfu.decayed(lfu.initial(now), now), LFU_INIT_VAL);
        // Three minutes later, one decrement per minute.
        assert_eq!(lfu.decayed(lfu.initial(now), now + 3 * 60_000), 2);
        // An LRU clock value left in the field must not overflow anything.
        for lru in [u32::MAX, lru_clock(now), 0] {
            assert!(lfu.decayed(lru, now) <= 255);
            let t = lfu.touched(lru, now);
            assert_eq!(t >> 8, lfu_minutes(now), "the access time is refreshed");
        }
    }
}
