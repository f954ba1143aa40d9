//! Brute-force guard: failed AUTH attempts per client address, as a token
//! bucket (`auth_failures_per_sec` tokens, refilled at that rate). While an
//! address has no token left, its attempts are refused without looking at
//! the password, so guessing runs at most that fast from one address.
//!
//! Touched only by AUTH and HELLO … AUTH, never on the data path; the map
//! is bounded (full buckets are forgotten first), so a scan from many
//! addresses cannot grow it without limit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Addresses remembered at most.
const MAX_ADDRESSES: usize = 16_384;

/// The failed-attempt budget of every client address, and the counters
/// INFO stats prints.
#[derive(Debug)]
pub(crate) struct Guard {
    per_sec: f64,
    /// A std mutex: held for a map lookup, never across an await.
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
    /// Wrong username-password pairs answered `-WRONGPASS`
    /// (`acl_access_denied_auth`).
    pub(crate) failures: AtomicU64,
    /// Attempts refused unchecked because their address ran out of tokens.
    pub(crate) limited: AtomicU64,
    /// Requests refused for their command, key or channel.
    pub(crate) denied_cmd: AtomicU64,
    pub(crate) denied_key: AtomicU64,
    pub(crate) denied_channel: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Guard {
    pub(crate) fn new(per_sec: u32) -> Guard {
        Guard {
            per_sec: per_sec.max(1) as f64,
            buckets: Mutex::new(HashMap::new()),
            failures: AtomicU64::new(0),
            limited: AtomicU64::new(0),
            denied_cmd: AtomicU64::new(0),
            denied_key: AtomicU64::new(0),
            denied_channel: AtomicU64::new(0),
        }
    }

    /// True when `ip` may try a password now (counts it when not).
    pub(crate) fn may_try(&self, ip: Option<IpAddr>, now: Instant) -> bool {
        let Some(ip) = ip else { return true };
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let ok = match b.get_mut(&ip) {
            Some(bucket) => self.refill(bucket, now) >= 1.0,
            None => true,
        };
        if !ok {
            self.limited.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Takes a token from `ip` for a failed attempt.
    pub(crate) fn failed(&self, ip: Option<IpAddr>, now: Instant) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let Some(ip) = ip else { return };
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if b.len() >= MAX_ADDRESSES && !b.contains_key(&ip) {
            let per_sec = self.per_sec;
            b.retain(|_, k| k.tokens + now.duration_since(k.at).as_secs_f64() * per_sec < per_sec);
            if b.len() >= MAX_ADDRESSES {
                // Every remembered address is mid-attack: forget one.
                if let Some(&any) = b.keys().next() {
                    b.remove(&any);
                }
            }
        }
        let per_sec = self.per_sec;
        let bucket = b.entry(ip).or_insert(Bucket {
            tokens: per_sec,
            at: now,
        });
        self.refill(bucket, now);
        bucket.tokens = (bucket.tokens - 1.0).max(0.0);
    }

    fn refill(&self, b: &mut Bucket, now: Instant) -> f64 {
        let add = now.saturating_duration_since(b.at).as_secs_f64() * self.per_sec;
        b.tokens = (b.tokens + add).min(self.per_sec);
        b.at = now;
        b.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_address_gets_its_burst_then_its_rate() {
        let g = Guard::new(5);
        let ip: Option<IpAddr> = Some("10.1.2.3".parse().unwrap());
        let other: Option<IpAddr> = Some("10.1.2.4".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..5 {
            assert!(g.may_try(ip, t0));
            g.failed(ip, t0);
        }
        assert!(!g.may_try(ip, t0));
        assert!(g.may_try(other, t0), "another address is untouched");
        // A fifth of a second later one more attempt is allowed.
        let t1 = t0 + Duration::from_millis(210);
        assert!(g.may_try(ip, t1));
        g.failed(ip, t1);
        assert!(!g.may_try(ip, t1));
        assert_eq!(g.failures.load(Ordering::Relaxed), 6);
        assert_eq!(g.limited.load(Ordering::Relaxed), 2);
        assert!(g.may_try(None, t1), "no address, no bucket");
    }

    #[test]
    fn the_map_of_addresses_stays_bounded() {
        let g = Guard::new(1);
        let t = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 100) {
            g.failed(Some(IpAddr::from(i.to_be_bytes())), t);
        }
        assert!(g.buckets.lock().unwrap().len() <= MAX_ADDRESSES);
    }
}
