//! The proxy-wide budget for reply bytes owed to all clients together (as
//! Redis 7's `maxmemory-clients`): replies that arrived from the nodes and
//! were not yet written to their clients' sockets. Over the limit, the
//! client owing the most is chosen and its session closes it without a
//! reply (it is not reading, so none would arrive), as Redis does; the
//! others go on.
//!
//! Every [`ReplyBudget`] made by `ClientState::register` counts here: its
//! charges and releases move the total, and its close settles what it was
//! still owed. Never blocks and never does I/O: a client is chosen by
//! waking its session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::budget::{Exceeded, ReplyBudget};

/// Reply bytes owed to every client, and the limit on them.
pub(crate) struct ReplyTotal {
    limit: usize,
    /// Signed: a close settles what its client was owed while a charge of
    /// that client may still be on its way here, so the sum may dip below
    /// zero for a moment.
    total: AtomicI64,
    /// Every live client's budget, so the one owing the most can be found
    /// when the total is over. A std mutex: taken when a client connects
    /// or leaves and while the total is over the limit, never across
    /// `.await`. Weak: the budget's own `Arc`s decide when it goes.
    clients: Mutex<HashMap<u64, Weak<ReplyBudget>>>,
}

impl ReplyTotal {
    pub(crate) fn new(limit: usize) -> Arc<ReplyTotal> {
        Arc::new(ReplyTotal {
            limit,
            total: AtomicI64::new(0),
            clients: Mutex::new(HashMap::new()),
        })
    }

    /// Reply bytes owed to all clients now.
    pub(crate) fn total(&self) -> usize {
        self.total.load(Ordering::Acquire).max(0) as usize
    }

    pub(super) fn register(&self, id: u64, budget: &Arc<ReplyBudget>) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.insert(id, Arc::downgrade(budget));
    }

    pub(super) fn unregister(&self, id: u64) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.remove(&id);
    }

    /// `n` more bytes are owed; over the limit, the client owing the most
    /// is chosen (possibly the one this charge was for).
    pub(super) fn charge(&self, n: usize) {
        let after = self.total.fetch_add(n as i64, Ordering::AcqRel) + n as i64;
        if after > self.limit as i64 {
            self.evict_largest();
        }
    }

    pub(super) fn release(&self, n: usize) {
        self.total.fetch_sub(n as i64, Ordering::AcqRel);
    }

    /// Chooses the clients owing the most until what the others owe is
    /// within the limit. What clients already chosen owe is about to be
    /// given back: it does not count, or one eviction would cascade to the
    /// next client while the first one's session is still closing.
    fn evict_largest(&self) {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let mut leaving = 0;
            let mut largest: Option<(usize, Arc<ReplyBudget>)> = None;
            for b in clients.values().filter_map(Weak::upgrade) {
                let owed = b.owed();
                if b.is_evicted() {
                    leaving += owed;
                } else if largest.as_ref().is_none_or(|(most, _)| owed > *most) {
                    largest = Some((owed, b));
                }
            }
            if self.total().saturating_sub(leaving) <= self.limit {
                return;
            }
            match largest {
                Some((_, b)) => {
                    b.evict(Exceeded::ReplyTotal);
                }
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::conn::budget::OutputLimits;

    fn unlimited() -> OutputLimits {
        OutputLimits {
            hard_bytes: 0,
            soft_bytes: 0,
            soft_time: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn over_the_total_the_client_owing_the_most_is_chosen_and_only_it() {
        let t = ReplyTotal::new(1_000);
        let a = ReplyBudget::counted(unlimited(), &t, 1);
        let b = ReplyBudget::counted(unlimited(), &t, 2);
        let c = ReplyBudget::counted(unlimited(), &t, 3);
        a.charge(600);
        b.charge(300);
        assert_eq!(t.total(), 900);
        assert!(!a.is_evicted());
        // A small client's reply takes the total over: the largest goes.
        c.charge(200);
        assert_eq!(a.evicted(), Some(Exceeded::ReplyTotal));
        assert!(!b.is_evicted() && !c.is_evicted());
        // While it closes, more bytes for the others choose nobody else.
        b.charge(100);
        assert!(!b.is_evicted() && !c.is_evicted());
        // Its close gives back all it was owed; a reply still arriving for
        // it afterwards moves nothing.
        a.close();
        assert_eq!(t.total(), 600);
        a.charge(1_000);
        a.release(1_000);
        assert_eq!(t.total(), 600);
        b.release(400);
        c.release(200);
        assert_eq!(t.total(), 0);
        assert_eq!(b.owed(), 0);
        b.close();
        b.close();
        assert_eq!(t.total(), 0);
    }

    #[test]
    fn several_clients_are_chosen_when_one_is_not_enough() {
        let t = ReplyTotal::new(1_000);
        let budgets: Vec<_> = (0..4)
            .map(|i| ReplyBudget::counted(unlimited(), &t, i))
            .collect();
        for b in &budgets[..3] {
            b.charge(400);
        }
        // 1 200 owed: choosing one of the three is enough.
        assert_eq!(budgets.iter().filter(|b| b.is_evicted()).count(), 1);
        // Over by far more than any one client owes: the largest ones go
        // until the rest fit.
        budgets[3].charge(1_500);
        assert!(budgets[3].is_evicted());
        assert_eq!(budgets.iter().filter(|b| b.is_evicted()).count(), 2);
    }
}
