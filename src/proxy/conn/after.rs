//! What happens to a dispatched request before its reply is queued: the
//! client's registry entry is brought up to date, the monitors are fed, and
//! CLIENT REPLY may silence the reply. Called by the session only.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::proxy::commands::clients::ReplyMode;
use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ops::metrics::Served;
use crate::proxy::Proxy;

/// Called by the session after each request was dispatched: publishes what
/// CLIENT LIST shows, feeds the monitors, and drops the reply when CLIENT
/// REPLY says so (the request still runs; its reply is read and discarded,
/// in order, so nothing behind it waits and no pinned connection is left
/// mid-reply).
#[inline]
pub(crate) fn after_request(
    proxy: &Arc<Proxy>,
    s: &mut ClientState,
    p: Pending,
    raw: &Bytes,
    served: Served,
    at: Instant,
) -> Pending {
    let e = &s.entry;
    e.last_ms.store(
        at.saturating_duration_since(e.connected).as_millis() as u64,
        Relaxed,
    );
    e.cmd.store(served.command as u32, Relaxed);
    e.multi
        .store(s.tx.queued().map_or(-1, |n| n as i64), Relaxed);
    proxy.monitors.feed(proxy, raw, served, s);
    let silent = match s.reply {
        ReplyMode::On => false,
        ReplyMode::Off => true,
        ReplyMode::SkipNext => {
            s.reply = ReplyMode::Skip;
            false
        }
        ReplyMode::Skip => {
            s.reply = ReplyMode::On;
            true
        }
    };
    if silent {
        silence(p, &s.budget)
    } else {
        p
    }
}

/// The same request, its reply awaited and thrown away.
fn silence(p: Pending, budget: &Arc<ReplyBudget>) -> Pending {
    match p {
        Pending::Ready(_) => Pending::Ready(Bytes::new()),
        Pending::One(rx) => Pending::Later(Box::pin(async move {
            let _ = rx.await;
            Bytes::new()
        })),
        Pending::Charged(rx) => {
            let budget = budget.clone();
            Pending::Later(Box::pin(async move {
                // Charged on arrival; never written, so given back here.
                if let Ok(b) = rx.await {
                    budget.release(b.len());
                }
                Bytes::new()
            }))
        }
        // Messages are charged on arrival (and never come from dispatch).
        Pending::Pushed(b) => {
            budget.release(b.len());
            Pending::Ready(Bytes::new())
        }
        Pending::Later(f) => Pending::Later(Box::pin(async move {
            let _ = f.await;
            Bytes::new()
        })),
        Pending::Close(_) => Pending::Close(Bytes::new()),
    }
}
