//! Byte budgets: what one client may make the proxy hold, and what all
//! clients together may hold in query buffers and in owed replies.
//!
//! * [`ReplyBudget`] — per client: bytes of replies that arrived for it and
//!   were not yet written to its socket (Redis's `client-output-buffer-limit`,
//!   normal class: a hard limit, and a soft limit that may be exceeded for at
//!   most so many seconds). Charged by the upstream actor the moment a reply
//!   arrives (the actor never waits for the client), released by the session
//!   as bytes leave on the socket. Each charge also counts towards the
//!   proxy-wide [`ReplyTotal`] (`owed.rs`).
//! * [`QueryBuffers`] — proxy-wide: bytes sitting in client query buffers.
//!   Over the limit, the client holding the largest buffer is evicted (as
//!   Redis's `maxmemory-clients` does), so small clients are never the victims
//!   of one that buffers a huge incomplete request.
//!
//! Used by `session` (both), `upstream` (charging replies) and `route`
//! (releasing fragments once merged). Never blocks and never does I/O: a
//! limit is reported by waking the session, which closes its client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

pub(crate) use super::owed::ReplyTotal;

/// Set in `ReplyBudget::owed` once its session ended: later charges and
/// releases (replies still arriving for a client that is gone) no longer
/// move the proxy-wide total, which the close already settled.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// Buffers smaller than this are only counted in the total; larger ones are
/// also registered so the largest can be found (the common small request
/// costs one atomic add, no lock).
const REGISTER_QUERY_BYTES: usize = 64 * 1024;

/// The output limits of one client class (the proxy has one: normal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    /// Owed bytes that close the client at once; 0 = no limit.
    pub hard_bytes: usize,
    /// Owed bytes that close the client when exceeded for `soft_time`; 0 = no limit.
    pub soft_bytes: usize,
    pub soft_time: Duration,
}

/// Why a client was closed for holding too much.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exceeded {
    OutputHard,
    OutputSoft,
    QueryTotal,
    /// The proxy-wide total of owed replies chose this client.
    ReplyTotal,
}

/// `ReplyBudget::evicted`: nobody, or which proxy-wide total chose it.
const NOT_EVICTED: u8 = 0;
const EVICTED_QUERY: u8 = 1;
const EVICTED_REPLY: u8 = 2;

/// One client's owed reply bytes, and the flag that evicts it.
pub(crate) struct ReplyBudget {
    /// Owed bytes, and [`CLOSED`] once the session ended.
    owed: AtomicUsize,
    limits: OutputLimits,
    /// Set when a proxy-wide limit picked this client (`EVICTED_*`).
    evicted: AtomicU8,
    /// Wakes the session when a limit may have been crossed. `Notify` keeps
    /// one permit, so a wake-up sent while the session was busy is not lost.
    wake: Notify,
    /// The proxy-wide total this client's replies count towards, and this
    /// client's id in it.
    total: Option<(Arc<ReplyTotal>, u64)>,
}

impl ReplyBudget {
    /// A budget counted on its own.
    #[cfg(test)]
    pub(crate) fn new(limits: OutputLimits) -> Arc<ReplyBudget> {
        Arc::new(ReplyBudget::with_total(limits, None))
    }

    /// A budget for client `id` counted towards `total` too (registered
    /// there; [`ReplyBudget::close`] takes it out again).
    pub(crate) fn counted(
        limits: OutputLimits,
        total: &Arc<ReplyTotal>,
        id: u64,
    ) -> Arc<ReplyBudget> {
        let b = Arc::new(ReplyBudget::with_total(limits, Some((total.clone(), id))));
        total.register(id, &b);
        b
    }

    fn with_total(limits: OutputLimits, total: Option<(Arc<ReplyTotal>, u64)>) -> ReplyBudget {
        ReplyBudget {
            owed: AtomicUsize::new(0),
            limits,
            evicted: AtomicU8::new(NOT_EVICTED),
            wake: Notify::new(),
            total,
        }
    }

    /// Counts `n` bytes of reply held for this client; wakes the session when
    /// this crosses a limit, and may evict the client owing the most when
    /// it takes the proxy-wide total over.
    pub(crate) fn charge(&self, n: usize) {
        let before = self.owed.fetch_add(n, Ordering::AcqRel);
        if before & CLOSED != 0 {
            return;
        }
        let after = before + n;
        let crossed = |limit: usize| limit > 0 && before <= limit && after > limit;
        if crossed(self.limits.soft_bytes) || crossed(self.limits.hard_bytes) {
            self.wake.notify_one();
        }
        if let Some((total, _)) = &self.total {
            total.charge(n);
        }
    }

    /// `n` charged bytes left the proxy (written, or dropped after a merge).
    pub(crate) fn release(&self, n: usize) {
        let before = self.owed.fetch_sub(n, Ordering::AcqRel);
        if before & CLOSED != 0 {
            return;
        }
        if let Some((total, _)) = &self.total {
            total.release(n);
        }
    }

    /// The session ended: what it was still owed leaves the proxy-wide
    /// total (the replies are dropped with it), and the client leaves the
    /// total's registry. Idempotent.
    pub(crate) fn close(&self) {
        let before = self.owed.fetch_or(CLOSED, Ordering::AcqRel);
        if before & CLOSED != 0 {
            return;
        }
        if let Some((total, id)) = &self.total {
            total.release(before);
            total.unregister(*id);
        }
    }

    /// Bytes held for this client now.
    pub(crate) fn owed(&self) -> usize {
        self.owed.load(Ordering::Acquire) & !CLOSED
    }

    pub(crate) fn limits(&self) -> OutputLimits {
        self.limits
    }

    /// Resolves when a limit may have been crossed or the proxy began to
    /// drain (the caller re-checks both).
    pub(crate) fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        self.wake.notified()
    }

    /// Wakes the session (the proxy began to drain).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// True once a proxy-wide limit chose this client.
    pub(crate) fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire) != NOT_EVICTED
    }

    /// Which proxy-wide limit chose this client, if one did.
    pub(crate) fn evicted(&self) -> Option<Exceeded> {
        match self.evicted.load(Ordering::Acquire) {
            EVICTED_QUERY => Some(Exceeded::QueryTotal),
            EVICTED_REPLY => Some(Exceeded::ReplyTotal),
            _ => None,
        }
    }

    /// Chooses this client for closing (the first limit to choose it wins).
    pub(super) fn evict(&self, why: Exceeded) {
        let code = match why {
            Exceeded::ReplyTotal => EVICTED_REPLY,
            _ => EVICTED_QUERY,
        };
        let _ =
            self.evicted
                .compare_exchange(NOT_EVICTED, code, Ordering::AcqRel, Ordering::Acquire);
        self.wake.notify_one();
    }
}

/// Tracks the soft limit's clock for one client: when owed bytes went over
/// it, and whether they stayed over too long.
#[derive(Default)]
pub(crate) struct SoftClock {
    since: Option<tokio::time::Instant>,
}

impl SoftClock {
    /// Checks `budget`'s output limits at `now`: `Err` when the client must
    /// be closed, else
    /// when the soft limit must be checked again (if its clock runs).
    pub(crate) fn check(
        &mut self,
        budget: &ReplyBudget,
        now: impl FnOnce() -> tokio::time::Instant,
    ) -> Result<Option<tokio::time::Instant>, Exceeded> {
        let l = budget.limits();
        let owed = budget.owed();
        if l.hard_bytes > 0 && owed > l.hard_bytes {
            return Err(Exceeded::OutputHard);
        }
        if l.soft_bytes == 0 || owed <= l.soft_bytes {
            self.since = None;
            return Ok(None);
        }
        let now = now();
        let since = *self.since.get_or_insert(now);
        let deadline = since + l.soft_time;
        if now >= deadline {
            return Err(Exceeded::OutputSoft);
        }
        Ok(Some(deadline))
    }
}

/// Every client's query buffer bytes, and the proxy-wide limit on them.
pub(crate) struct QueryBuffers {
    limit: usize,
    total: AtomicUsize,
    /// Clients with buffers of `REGISTER_QUERY_BYTES` or more. A std mutex:
    /// taken only when such a buffer changes size, never across `.await`.
    big: Mutex<HashMap<u64, (usize, Arc<ReplyBudget>)>>,
}

impl QueryBuffers {
    pub(crate) fn new(limit: usize) -> QueryBuffers {
        QueryBuffers {
            limit,
            total: AtomicUsize::new(0),
            big: Mutex::new(HashMap::new()),
        }
    }

    /// Bytes in all query buffers now.
    pub(crate) fn total(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    /// Client `id`'s buffer went from `old` to `new` bytes. Over the limit,
    /// evicts the client with the largest registered buffer (possibly this one).
    pub(crate) fn resize(&self, id: u64, budget: &Arc<ReplyBudget>, old: usize, new: usize) {
        if old == new {
            return;
        }
        let total = if new > old {
            self.total.fetch_add(new - old, Ordering::AcqRel) + (new - old)
        } else {
            self.total.fetch_sub(old - new, Ordering::AcqRel) - (old - new)
        };
        if old < REGISTER_QUERY_BYTES && new < REGISTER_QUERY_BYTES {
            return;
        }
        let mut big = self.big.lock().unwrap_or_else(|e| e.into_inner());
        if new >= REGISTER_QUERY_BYTES {
            big.insert(id, (new, budget.clone()));
        } else {
            big.remove(&id);
        }
        // Buffers of clients already evicted are about to be given back:
        // they do not count, or one eviction would cascade to the next client.
        let leaving: usize = big
            .values()
            .filter(|(_, b)| b.is_evicted())
            .map(|(n, _)| *n)
            .sum();
        if total.saturating_sub(leaving) > self.limit {
            if let Some((_, (_, victim))) = big
                .iter()
                .filter(|(_, (_, b))| !b.is_evicted())
                .max_by_key(|(_, (n, _))| *n)
            {
                victim.evict(Exceeded::QueryTotal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(hard: usize, soft: usize, secs: u64) -> OutputLimits {
        OutputLimits {
            hard_bytes: hard,
            soft_bytes: soft,
            soft_time: Duration::from_secs(secs),
        }
    }

    #[test]
    fn hard_limit_closes_at_once_and_soft_limit_after_its_time() {
        let t0 = tokio::time::Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let b = ReplyBudget::new(limits(100, 50, 10));
        let mut clock = SoftClock::default();
        b.charge(40);
        assert_eq!(clock.check(&b, || at(0)), Ok(None));
        b.charge(20);
        assert_eq!(clock.check(&b, || at(0)), Ok(Some(at(10))));
        assert_eq!(clock.check(&b, || at(9)), Ok(Some(at(10))));
        // Back under the soft limit: the clock stops and starts afresh.
        b.release(30);
        assert_eq!(clock.check(&b, || at(9)), Ok(None));
        b.charge(30);
        assert_eq!(clock.check(&b, || at(12)), Ok(Some(at(22))));
        assert_eq!(clock.check(&b, || at(21)), Ok(Some(at(22))));
        assert_eq!(clock.check(&b, || at(22)), Err(Exceeded::OutputSoft));
        let b = ReplyBudget::new(limits(100, 50, 10));
        b.charge(101);
        assert_eq!(
            SoftClock::default().check(&b, || at(0)),
            Err(Exceeded::OutputHard)
        );
        let unlimited = ReplyBudget::new(limits(0, 0, 0));
        unlimited.charge(usize::MAX / 2);
        assert_eq!(SoftClock::default().check(&unlimited, || at(0)), Ok(None));
    }

    #[test]
    fn the_largest_query_buffer_is_evicted_when_the_total_is_over() {
        let q = QueryBuffers::new(1_000_000);
        let small = ReplyBudget::new(limits(0, 0, 0));
        let big = ReplyBudget::new(limits(0, 0, 0));
        let mid = ReplyBudget::new(limits(0, 0, 0));
        q.resize(1, &big, 0, 700_000);
        q.resize(2, &mid, 0, 200_000);
        assert!(!big.is_evicted());
        // A small client's read takes the total over: the big one goes.
        q.resize(3, &small, 0, 200_000);
        assert!(big.is_evicted());
        assert!(!mid.is_evicted() && !small.is_evicted());
        // Until the evicted client gives its buffer back, more bytes from
        // the others evict nobody else.
        q.resize(3, &small, 200_000, 250_000);
        assert!(!mid.is_evicted() && !small.is_evicted());
        q.resize(1, &big, 700_000, 0);
        assert_eq!(q.total(), 450_000);
    }
}
