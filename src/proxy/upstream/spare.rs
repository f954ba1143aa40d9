//! One pinned connection kept open ahead of need, per node and protocol, so
//! a blocking command or a transaction is written to its node at once
//! rather than after a connect and a handshake: the client that blocks is
//! blocked at the node before a write another client sends just after it
//! arrives there (as on one Redis, where the first to send is the first
//! served), and a BLPOP loop pays no connect per call.
//!
//! [`Pinned::open`](super::pinned::Pinned::open) takes the spare and starts
//! the next one. A spare is used only if it answered its `PING`, is younger
//! than [`SPARE_MAX_AGE_MS`] and no connection to its node failed since it
//! was made (a pinned connection is never reconnected behind its owner's
//! back, so a stale one would fail the client's command); otherwise it is
//! dropped and a new connection opened, as without a spare. The spare holds
//! no place under `max_pinned_per_node` until it is taken, and no
//! reference to its node, so it closes with the node.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::proxy::upstream::health::Health;
use crate::proxy::upstream::{Upstream, UpstreamOptions};

/// How long an unused spare is trusted.
pub(crate) const SPARE_MAX_AGE_MS: u64 = 30_000;

const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// The spares of one node: RESP2 and RESP3.
#[derive(Default)]
pub(crate) struct Spares {
    /// A std mutex: taken to take or put a spare, never across `.await`.
    by_proto: Mutex<[Option<Spare>; 2]>,
    /// A spare is being opened: a burst of pins opens one, not one each.
    filling: [AtomicBool; 2],
}

struct Spare {
    up: Upstream,
    ready: oneshot::Receiver<Bytes>,
    born: Instant,
    /// The node's failure count when it was made.
    failures: u64,
}

impl Spares {
    /// The spare for `proto`, if it can be trusted.
    pub(crate) fn take(&self, proto: u8, health: &Health) -> Option<Upstream> {
        let mut spare = lock(&self.by_proto)[slot(proto)].take()?;
        let fresh = spare.born.elapsed() < Duration::from_millis(SPARE_MAX_AGE_MS)
            && spare.failures == health.failures.load(Ordering::Relaxed);
        let answered = matches!(spare.ready.try_recv(), Ok(r) if &r[..] == b"+PONG\r\n");
        (fresh && answered).then_some(spare.up)
    }

    /// Opens the next spare for `proto` unless one is there; it connects
    /// now (its `PING`).
    pub(crate) fn refill(self: &Arc<Self>, opts: &UpstreamOptions, health: &Arc<Health>) {
        let at = slot(opts.proto);
        if lock(&self.by_proto)[at].is_some() || self.filling[at].swap(true, Ordering::AcqRel) {
            return;
        }
        let up = Upstream::spawn(opts.clone(), health.clone());
        let failures = health.failures.load(Ordering::Relaxed);
        let spares = Arc::downgrade(self);
        let proto = opts.proto;
        tokio::spawn(async move {
            let ready = up.send(Bytes::from_static(PING)).await;
            let Some(spares) = spares.upgrade() else {
                return;
            };
            let at = slot(proto);
            let mut by_proto = lock(&spares.by_proto);
            if by_proto[at].is_none() {
                by_proto[at] = Some(Spare {
                    up,
                    ready,
                    born: Instant::now(),
                    failures,
                });
            }
            spares.filling[at].store(false, Ordering::Release);
        });
    }
}

fn slot(proto: u8) -> usize {
    usize::from(proto == 3)
}

/// A poisoned lock still holds consistent spares.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
