//! The node's clocks: wall-clock milliseconds (expiry, INFO) and the
//! coarser LRU clock kept per entry.

use std::time::{SystemTime, UNIX_EPOCH};

/// LRU ticks are 10 ms; a `u32` of them wraps after ~490 days, and ages are
/// computed with wrapping subtraction.
pub(crate) fn lru_clock(now_ms: u64) -> u32 {
    (now_ms / 10) as u32
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
