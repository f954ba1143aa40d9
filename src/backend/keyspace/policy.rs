//! `maxmemory-policy`: which keys eviction may take, and how it picks them.
//!
//! Set through CONFIG (`config/`), read by eviction (`evict.rs`).

/// What to evict under `maxmemory`, in Redis's order (its error text lists
/// them in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Policy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    NoEviction,
}

/// Policy names, indexed by `Policy as u8`.
pub(crate) const POLICY_NAMES: [&str; 8] = [
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

impl Policy {
    pub(crate) const ALL: [Policy; 8] = [
        Policy::VolatileLru,
        Policy::VolatileLfu,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
        Policy::AllkeysLru,
        Policy::AllkeysLfu,
        Policy::AllkeysRandom,
        Policy::NoEviction,
    ];

    /// Redis's name for the policy.
    pub(crate) fn name(self) -> &'static str {
        POLICY_NAMES[self as usize]
    }

    /// Whether access frequency (not recency) is tracked.
    pub(crate) fn is_lfu(self) -> bool {
        matches!(self, Policy::VolatileLfu | Policy::AllkeysLfu)
    }

    /// Whether the victim is any candidate rather than the best of a sample.
    pub(crate) fn is_random(self) -> bool {
        matches!(self, Policy::VolatileRandom | Policy::AllkeysRandom)
    }

    /// Whether only keys with a TTL may be evicted.
    pub(crate) fn is_volatile(self) -> bool {
        (self as u8) <= Policy::VolatileTtl as u8
    }
}
