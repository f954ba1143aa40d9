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
/// mid-reply). A subscribe family's confirmations (`confirms`) are sent
/// whatever CLIENT REPLY says, as Redis sends them.
#[inline]
pub(crate) fn after_request(
    proxy: &Arc<Proxy>,
    s: &mut ClientState,
    p: Pending,
    (raw, confirms): (&Bytes, bool),
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
    if silent && !confirms {
        silence(p, &s.budget, s.proto == 3)
    } else {
        p
    }
}

/// The same request, its reply awaited and thrown away; in RESP3 a push
/// (a SUBSCRIBE's confirmations) is still sent, as Redis sends pushes
/// whatever CLIENT REPLY says.
fn silence(p: Pending, budget: &Arc<ReplyBudget>, pushes: bool) -> Pending {
    let kept = move |b: Bytes| {
        if pushes && b.first() == Some(&b'>') {
            b
        } else {
            Bytes::new()
        }
    };
    match p {
        Pending::Ready(b) => Pending::Ready(kept(b)),
        Pending::One(rx) => {
            Pending::Later(Box::pin(
                async move { rx.await.map(kept).unwrap_or_default() },
            ))
        }
        Pending::Charged(rx) => {
            let budget = budget.clone();
            Pending::Later(Box::pin(async move {
                // Charged on arrival; the session charges what it writes
                // again, so it is given back here either way.
                let Ok(b) = rx.await else {
                    return Bytes::new();
                };
                budget.release(b.len());
                kept(b)
            }))
        }
        // Messages are charged on arrival (and never come from dispatch).
        Pending::Pushed(b) => {
            budget.release(b.len());
            Pending::Ready(Bytes::new())
        }
        Pending::Later(f) => Pending::Later(Box::pin(async move { kept(f.await) })),
        Pending::Close(_) => Pending::Close(Bytes::new()),
    }
}
