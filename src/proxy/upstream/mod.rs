//! Upstream connections: the proxy's pipelined, shared connections to one node.
//!
//! An [`Upstream`] is a handle (a bounded channel) to an actor that owns one
//! TCP connection. Many clients' requests are written back to back; replies
//! are matched first-in first-out, never send-then-wait (twemproxy's server
//! out-queue). One task does all of it, so a request costs no hop between a
//! writer and a reader task and no timer of its own.
//!
//! ```text
//!  sessions ──UpRequest──► [bounded mpsc] ──► connection task ──raw bytes──► node
//!                                              │  in-flight FIFO (slot pushed with its bytes)
//!                                              ▼
//!                            replies ──► reply_len(), split ──► oneshot per request
//! ```
//!
//! Failure: a connect error, a timeout, a malformed or stray reply poisons the
//! connection — every request in flight on it gets an `-ERR` naming the node —
//! and the actor reconnects with capped exponential backoff. While the node
//! is down, requests fail at once instead of queueing.

mod connect;
pub(crate) mod credentials;
pub(crate) mod dirty;
mod error;
mod health;
pub(crate) mod lane;
pub(crate) mod pinned;
mod request;
pub(crate) mod shard;
pub(crate) mod spare;
mod timeouts;
pub(crate) mod topology;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
pub(crate) use connect::{answers, connect};
pub(crate) use error::{error_reply, UpstreamError};
pub(crate) use health::Health;
pub(crate) use request::{UpRequest, Waiter};
pub(crate) use timeouts::Timeouts;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::client::Stream;
use crate::proxy::conn::budget::ReplyBudget;
use crate::resp::reply::{self, ReplyFramer};

/// Requests queued for one upstream before senders wait.
const QUEUE_DEPTH: usize = 4_096;
/// Requests written but not yet answered on one connection.
const MAX_IN_FLIGHT: usize = 16_384;
/// Largest batch of requests gathered into one write.
const MAX_BATCH_BYTES: usize = 256 * 1024;
/// Watchdog ticks per request timeout.
const TICKS_PER_TIMEOUT: u32 = 4;
const MIN_BACKOFF_MS: u64 = 50;
const MAX_BACKOFF_MS: u64 = 2_000;

/// Settings of an upstream connection.
#[derive(Clone, Debug)]
pub(crate) struct UpstreamOptions {
    /// `name (addr)`, used in every error a client sees.
    pub(crate) label: String,
    pub(crate) addr: String,
    /// 2 or 3: a RESP3 connection sends `HELLO 3` first.
    pub(crate) proto: u8,
    /// The connect and request timeouts, read live (a reload changes them).
    pub(crate) timeouts: Arc<Timeouts>,
    /// A dedicated connection one client owns (see `pinned.rs`): a reply may
    /// take as long as a blocking command blocks, so no request timeout; and
    /// when its handle is dropped the connection closes at once, failing what
    /// is in flight, so a node never hands an element to a client that left.
    pub(crate) pinned: bool,
    /// A node's script connection (`lane.rs`): a reply may take as long as
    /// a script runs, so no request timeout; it publishes here how many
    /// requests it has in flight.
    pub(crate) script_lane: Option<Arc<std::sync::atomic::AtomicUsize>>,
    /// Largest bulk accepted in a reply (`proto-max-bulk-len`); a longer one
    /// poisons the connection before anything is buffered for it.
    pub(crate) max_bulk_len: usize,
    /// Sent first on every connection when the node wants a password.
    pub(crate) credentials: Option<Arc<credentials::Credentials>>,
    /// `SELECT db` (a twemproxy pool's `redis_db`), sent next on every
    /// connection when the database is not 0; a refusal fails the connect.
    pub(crate) select: Option<Bytes>,
    /// TLS towards this node (`[backend_tls]`, `[[nodes]] tls`), if any.
    pub(crate) tls: Option<Arc<crate::client::TlsTo>>,
}

/// Handle to one pipelined connection actor. Cloning shares the connection.
#[derive(Clone)]
pub(crate) struct Upstream {
    tx: mpsc::Sender<UpRequest>,
    label: Arc<str>,
}

impl Upstream {
    /// Starts the actor; it connects on the first request.
    pub(crate) fn spawn(opts: UpstreamOptions, health: Arc<Health>) -> Upstream {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let label: Arc<str> = opts.label.clone().into();
        tokio::spawn(run(opts, rx, health));
        Upstream { tx, label }
    }

    /// Queues `raw` and returns where its reply will arrive. The reply is
    /// always a complete RESP value: the node's own, or an `-ERR` of ours.
    pub(crate) async fn send(&self, raw: Bytes) -> oneshot::Receiver<Bytes> {
        self.send_for(raw, None).await
    }

    /// [`Upstream::send`], the reply charged to a client's budget on arrival.
    pub(crate) async fn send_for(
        &self,
        raw: Bytes,
        budget: Option<Arc<ReplyBudget>>,
    ) -> oneshot::Receiver<Bytes> {
        self.enqueue(raw, budget, false).await
    }

    /// The proxy's own `WAIT` after a write: the connection may send one for
    /// a run of them ([`request::PendingWait`]).
    pub(crate) async fn send_wait(&self, raw: Bytes) -> oneshot::Receiver<Bytes> {
        self.enqueue(raw, None, true).await
    }

    async fn enqueue(
        &self,
        raw: Bytes,
        budget: Option<Arc<ReplyBudget>>,
        merge_wait: bool,
    ) -> oneshot::Receiver<Bytes> {
        let (tx, rx) = oneshot::channel();
        let reply = Waiter {
            tx,
            budget,
            also: Vec::new(),
        };
        let req = UpRequest {
            raw,
            reply,
            merge_wait,
        };
        // try_send first: when the queue has room (nearly always) it skips the
        // semaphore future of an awaited send.
        let req = match self.tx.try_send(req) {
            Ok(()) => return rx,
            Err(mpsc::error::TrySendError::Full(req)) => req,
            Err(mpsc::error::TrySendError::Closed(req)) => {
                req.reply
                    .answer(error_reply(&self.label, &UpstreamError::ShuttingDown));
                return rx;
            }
        };
        if let Err(mpsc::error::SendError(req)) = self.tx.send(req).await {
            req.reply
                .answer(error_reply(&self.label, &UpstreamError::ShuttingDown));
        }
        rx
    }

    /// Sends and waits for the reply.
    pub(crate) async fn call(&self, raw: Bytes) -> Bytes {
        let rx = self.send(raw).await;
        rx.await
            .unwrap_or_else(|_| error_reply(&self.label, &UpstreamError::RequestDropped))
    }
}

async fn run(opts: UpstreamOptions, mut rx: mpsc::Receiver<UpRequest>, health: Arc<Health>) {
    let mut backoff = MIN_BACKOFF_MS;
    let mut failed_before = false;
    loop {
        // Connect lazily: an idle node costs nothing and a dead one is retried
        // only when somebody needs it.
        let Some(first) = rx.recv().await else { return };
        match connect(&opts).await {
            Ok(sock) => {
                health.set_up();
                if failed_before {
                    health.metrics.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                failed_before = true;
                backoff = MIN_BACKOFF_MS;
                health.wire.connections.fetch_add(1, Ordering::Relaxed);
                health.wire.opened.fetch_add(1, Ordering::Relaxed);
                let why = match sock {
                    // Plain TCP keeps its borrowed halves (no lock between them).
                    Stream::Plain(mut s) => {
                        let (rd, wr) = s.split();
                        serve((rd, wr, false), first, &mut rx, &opts, &health).await
                    }
                    tls => {
                        let (rd, wr) = tokio::io::split(tls);
                        serve((rd, wr, true), first, &mut rx, &opts, &health).await
                    }
                };
                health.wire.connections.fetch_sub(1, Ordering::Relaxed);
                match why {
                    None => return,
                    Some(e) => {
                        tracing::debug!(node = %opts.label, error = %e, "upstream connection lost");
                        health.set_down(&e);
                        if opts.pinned {
                            return fail_rest(&opts, rx, &e).await;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::debug!(node = %opts.label, error = %e, "upstream connect failed");
                health.set_down(&e);
                failed_before = true;
                health.metrics.observe(0, true);
                health.wire.forward_errors.fetch_add(1, Ordering::Relaxed);
                first.reply.answer(error_reply(&opts.label, &e));
                if opts.pinned {
                    return fail_rest(&opts, rx, &e).await;
                }
                // Until the backoff ends, everything for this node fails at once.
                let until = Instant::now() + Duration::from_millis(backoff);
                loop {
                    tokio::select! {
                        r = rx.recv() => match r {
                            Some(req) => {
                                health.metrics.observe(0, true);
                                health.wire.forward_errors.fetch_add(1, Ordering::Relaxed);
                                req.reply.answer(error_reply(&opts.label, &e));
                            }
                            None => return,
                        },
                        _ = tokio::time::sleep_until(until) => break,
                    }
                }
                backoff = (backoff * 2).min(MAX_BACKOFF_MS);
            }
        }
    }
}

/// A dedicated connection that failed is not re-opened: what it carried (a
/// WATCH, a blocked pop, subscriptions) is gone, so every later request on
/// it fails, naming the node, until its owner drops it.
async fn fail_rest(opts: &UpstreamOptions, mut rx: mpsc::Receiver<UpRequest>, e: &UpstreamError) {
    while let Some(req) = rx.recv().await {
        req.reply.answer(error_reply(&opts.label, e));
    }
}

/// What woke a connection's task.
enum Event {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    Flushed(std::io::Result<()>),
    Request(Option<UpRequest>),
    Tick,
}

/// Writes some of `out`, or flushes once it is all written.
async fn write_or_flush(wr: &mut (impl AsyncWrite + Unpin), out: &[u8]) -> Event {
    if out.is_empty() {
        Event::Flushed(wr.flush().await)
    } else {
        Event::Wrote(wr.write(out).await)
    }
}

/// Runs one connection until it fails (`Some(reason)`) or the handle is
/// dropped and everything in flight is answered (`None`). Every request taken
/// off `rx` gets exactly one reply.
///
/// One task reads, writes and keeps the in-flight FIFO: no channel between a
/// writer and a reader, and no timer per request. A watchdog ticks four times
/// per `request_timeout`; each in-flight request remembers the tick it was
/// sent in, and when the oldest has waited five ticks (between 1 and 1.25
/// times the timeout) with no reply arriving meanwhile, the connection is
/// poisoned. A node that keeps answering is alive: a request queued behind a
/// long pipeline (ten thousand scripts, say) waits its turn without failing.
///
/// `flushes`: the stream may keep written bytes back until flushed (TLS
/// keeps a record when the socket is full), so each write is followed by a
/// flush once nothing is left to write; plain TCP sends what it took.
async fn serve(
    (mut rd, mut wr, flushes): (impl AsyncRead + Unpin, impl AsyncWrite + Unpin, bool),
    first: UpRequest,
    rx: &mut mpsc::Receiver<UpRequest>,
    opts: &UpstreamOptions,
    health: &Health,
) -> Option<UpstreamError> {
    let (metrics, wire) = (&health.metrics, &health.wire);
    // Each request's reply slot, the watchdog tick it was sent in, and when.
    let mut inflight: VecDeque<(Waiter, u32, std::time::Instant)> = VecDeque::new();
    let mut framer = ReplyFramer::new(opts.max_bulk_len);
    let mut out = BytesMut::with_capacity(64 * 1024);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let tick = |timeout: Duration| (timeout / TICKS_PER_TIMEOUT).max(Duration::from_millis(1));
    let mut period = tick(opts.timeouts.request());
    let mut watchdog = tokio::time::interval_at(Instant::now() + period, period);
    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut now: u32 = 0;
    // The tick of the last read that brought a reply.
    let mut answered: u32 = 0;
    let mut handle_dropped = false;
    let mut unflushed = false;
    let mut waits = request::PendingWait::default();
    if let Some(first) = waits.take(first) {
        out.extend_from_slice(&first.raw);
        wire.sent(1, first.raw.len() as u64);
        inflight.push_back((first.reply, now, std::time::Instant::now()));
    }

    let why = loop {
        // Gather what is already queued into one write. A slot goes into the
        // FIFO with its bytes, so a reply can never arrive ahead of its slot.
        // One clock read stamps the whole batch (for the latency metrics).
        let mut stamp = None;
        let gathered = out.len();
        let taken = inflight.len();
        while !handle_dropped && out.len() < MAX_BATCH_BYTES && inflight.len() < MAX_IN_FLIGHT {
            match rx.try_recv() {
                Ok(req) => {
                    let Some(req) = waits.take(req) else { continue };
                    out.extend_from_slice(&req.raw);
                    let at = *stamp.get_or_insert_with(std::time::Instant::now);
                    inflight.push_back((req.reply, now, at));
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => handle_dropped = true,
            }
        }
        // The WAITs taken meanwhile go out once, after every write taken
        // with them.
        if let Some((raw, waiter)) = waits.drain() {
            out.extend_from_slice(&raw);
            let at = *stamp.get_or_insert_with(std::time::Instant::now);
            inflight.push_back((waiter, now, at));
        }
        wire.sent(
            (inflight.len() - taken) as u64,
            (out.len() - gathered) as u64,
        );
        if handle_dropped && (inflight.is_empty() || opts.pinned) {
            break None;
        }
        metrics
            .in_flight
            .store(inflight.len() as u64, Ordering::Relaxed);
        if let Some(n) = &opts.script_lane {
            n.store(inflight.len(), Ordering::Relaxed);
        }
        // Room for the next read: a large value's whole body at once (so
        // its reply holds an allocation of its own size, not a doubled
        // one), else another 64 KB when nearly full.
        let body = framer.needed().saturating_sub(buf.len());
        if body > 64 * 1024 && buf.capacity() - buf.len() < body {
            buf.reserve(body);
        } else if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
        }
        let can_take =
            !handle_dropped && out.len() < MAX_BATCH_BYTES && inflight.len() < MAX_IN_FLIGHT;
        let event = tokio::select! {
            biased;
            r = rd.read_buf(&mut buf) => Event::Read(r),
            e = write_or_flush(&mut wr, &out), if !out.is_empty() || unflushed => e,
            r = rx.recv(), if can_take => Event::Request(r),
            _ = watchdog.tick() => Event::Tick,
        };
        match event {
            Event::Read(Ok(0)) => break Some(UpstreamError::ClosedByNode),
            Event::Read(Err(e)) => break Some(UpstreamError::Io(e.to_string())),
            Event::Read(Ok(_)) => {
                // One clock read for every reply this read brought.
                let read_at = std::time::Instant::now();
                let (mut replies, mut reply_bytes) = (0, 0);
                let why = loop {
                    // The framer resumes where the last read left it: a large
                    // reply arriving in many reads is scanned once.
                    match framer.next(&buf) {
                        Ok(Some(n)) => {
                            let reply = buf.split_to(n).freeze();
                            replies += 1;
                            reply_bytes += n as u64;
                            match inflight.pop_front() {
                                Some((waiter, _, sent)) => {
                                    metrics.observe(
                                        read_at.duration_since(sent).as_nanos() as u64,
                                        reply::is_error(&reply),
                                    );
                                    waiter.answer(reply)
                                }
                                None => break Some(UpstreamError::StrayReply),
                            }
                        }
                        Ok(None) if !buf.is_empty() && inflight.is_empty() => {
                            break Some(UpstreamError::StrayReply)
                        }
                        Ok(None) => break None,
                        Err(e) => break Some(UpstreamError::InvalidReply(e)),
                    }
                };
                wire.received(replies, reply_bytes);
                if replies > 0 {
                    answered = now;
                }
                if why.is_some() {
                    break why;
                }
            }
            Event::Wrote(Ok(0)) => break Some(UpstreamError::ClosedByNode),
            Event::Wrote(Ok(n)) => {
                unflushed = flushes;
                if n == out.len() {
                    out.clear();
                } else {
                    out.advance(n);
                }
            }
            Event::Wrote(Err(e)) => break Some(UpstreamError::Io(e.to_string())),
            Event::Flushed(Ok(())) => unflushed = false,
            Event::Flushed(Err(e)) => break Some(UpstreamError::Io(e.to_string())),
            Event::Request(Some(req)) => {
                if let Some(req) = waits.take(req) {
                    out.extend_from_slice(&req.raw);
                    wire.sent(1, req.raw.len() as u64);
                    inflight.push_back((req.reply, now, std::time::Instant::now()));
                }
            }
            Event::Request(None) => handle_dropped = true,
            Event::Tick if opts.pinned || opts.script_lane.is_some() => {}
            Event::Tick => {
                now = now.wrapping_add(1);
                if let Some((_, sent, _)) = inflight.front() {
                    let waited = now.wrapping_sub(*sent).min(now.wrapping_sub(answered));
                    if waited > TICKS_PER_TIMEOUT {
                        break Some(UpstreamError::NoReply(opts.timeouts.request()));
                    }
                }
                // A reloaded timeout: the ticks from here on are the new
                // timeout's quarters.
                let live = tick(opts.timeouts.request());
                if live != period {
                    period = live;
                    watchdog = tokio::time::interval_at(Instant::now() + period, period);
                    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                }
            }
        }
    };
    // Poisoned or closing: everything still in flight fails now, with an
    // error naming the node.
    let msg = why.clone().unwrap_or(UpstreamError::Closed);
    for (waiter, _, sent) in inflight {
        metrics.observe(sent.elapsed().as_nanos() as u64, true);
        if why.is_some() {
            wire.forward_errors.fetch_add(1, Ordering::Relaxed);
        }
        waiter.answer(error_reply(&opts.label, &msg));
    }
    metrics.in_flight.store(0, Ordering::Relaxed);
    if let Some(n) = &opts.script_lane {
        n.store(0, Ordering::Relaxed);
    }
    why
}
