//! How a client's blocked commands are counted: its own count (its
//! session ends at once when it leaves while any blocks), INFO's
//! `blocked_clients` and `clients_in_timeout_table`, CLIENT LIST's `b`
//! flag. Used by `blocking` (commands blocked at a node) and
//! `blocking_multi` (pops the proxy waits for itself); counts only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::proxy::conn::client::ClientState;
use crate::proxy::Proxy;

/// Counts a client's commands blocked right now; the session ends at once
/// (instead of answering what is owed) when its client leaves while any is.
pub(crate) struct BlockedGuard {
    client: Arc<AtomicUsize>,
    pub(crate) at_node: Arc<AtNode>,
}

impl BlockedGuard {
    /// Counts the command in its client's `count` at once; [`AtNode::arm`]
    /// counts it for INFO once the node has it. `timed`: the command has a
    /// timeout, so it also counts in INFO's `clients_in_timeout_table`.
    pub(crate) fn new(proxy: &Arc<Proxy>, client: &ClientState, timed: bool) -> BlockedGuard {
        client.blocked.fetch_add(1, Ordering::SeqCst);
        BlockedGuard {
            client: client.blocked.clone(),
            at_node: Arc::new(AtNode {
                phase: std::sync::Mutex::new(Phase::Sent),
                client: client.entry.blocked_at_node.clone(),
                proxy: proxy.clone(),
                timed,
            }),
        }
    }
}

impl Drop for BlockedGuard {
    fn drop(&mut self) {
        self.client.fetch_sub(1, Ordering::SeqCst);
        self.at_node.end();
    }
}

/// Where a blocked command is in INFO's count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Sent; the node may not have read it yet.
    Sent,
    /// The node has it: counted.
    Counted,
    /// Answered or dropped: never counted again.
    Ended,
}

/// A blocked command's share of INFO's `blocked_clients` (each client once,
/// however many of its commands block) and `clients_in_timeout_table`,
/// counted from the moment the node has the command: a client that polls
/// INFO until another one is blocked (Redis's own tests, queue dashboards)
/// then knows that a write it sends next reaches the node after the
/// blocked command.
pub(crate) struct AtNode {
    /// A std mutex: taken twice per blocked command, never across `.await`.
    phase: std::sync::Mutex<Phase>,
    client: Arc<AtomicUsize>,
    proxy: Arc<Proxy>,
    timed: bool,
}

impl AtNode {
    pub(crate) fn arm(&self) {
        let mut phase = lock(&self.phase);
        if *phase != Phase::Sent {
            return;
        }
        *phase = Phase::Counted;
        let stats = &self.proxy.stats;
        if self.client.fetch_add(1, Ordering::SeqCst) == 0 {
            stats.blocked_clients.fetch_add(1, Ordering::SeqCst);
        }
        if self.timed {
            stats.timeout_clients.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn end(&self) {
        let mut phase = lock(&self.phase);
        let was = std::mem::replace(&mut *phase, Phase::Ended);
        if was != Phase::Counted {
            return;
        }
        let stats = &self.proxy.stats;
        if self.timed {
            stats.timeout_clients.fetch_sub(1, Ordering::SeqCst);
        }
        if self.client.fetch_sub(1, Ordering::SeqCst) == 1 {
            stats.blocked_clients.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A poisoned lock still holds a consistent value.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
