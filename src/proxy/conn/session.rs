//! One client connection: decode requests, dispatch them, return replies in
//! request order.
//!
//! ```text
//!  socket ─read─► BytesMut ─RequestDecoder─► Request ─dispatch─► Pending ──┐
//!                                                                          │ owed (FIFO,
//!  socket ◄─write (batched)─ out ◄── each Pending, in order, once complete ◄┘  ≤ pipeline depth)
//! ```
//!
//! One task does both halves: it reads while the client owes fewer than
//! `pipeline_depth` replies, gathers every reply that is complete at the front
//! of the FIFO into one write, and flushes before it waits on one that is not,
//! so earlier replies never wait for later ones. A reply from a node wakes
//! this task directly; there is no writer task between them. When the FIFO is
//! full the session stops reading. What the client makes the proxy hold is
//! bounded in bytes too (see `budget`): replies are charged to it as they
//! arrive and released as they are written, and over its output limit the
//! client is closed; its query buffer counts towards the proxy-wide total.
//! A protocol error is answered, then that client alone is closed; a bad
//! argument is answered and the session goes on; a panicking handler costs
//! one `-ERR internal error` reply. Handlers get the client's [`ClientState`],
//! never the session: the socket and the FIFO are this task's alone.
//!
//! Must never: wait on a client while holding anything another client needs,
//! or let a reply overtake an earlier one.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::proxy::conn::after::after_request;
use crate::proxy::conn::budget::{Exceeded, ReplyBudget, SoftClock};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::error::ProxyError;
use crate::proxy::conn::pending::{lost_reply, Pending};
use crate::proxy::ops::metrics::{ServedCell, Timing};
use crate::proxy::Proxy;
use crate::resp::{ProtocolError, Request, RequestDecoder};

/// Replies gathered before they are written, at most (one reply may exceed it).
const MAX_OUT_BYTES: usize = 256 * 1024;

/// One client connection: its socket, its state and the replies it is owed.
pub struct ClientSession {
    proxy: Arc<Proxy>,
    state: ClientState,
    /// Replies owed, oldest first. Owned by this task alone: nothing else
    /// reaches it, so it needs no lock (and `Pending` need not be `Sync`).
    owed: VecDeque<Pending>,
    /// Aligned with `owed`: each request's timing (`None` for a protocol
    /// error), recorded by the operator plane when its reply is complete.
    timings: VecDeque<Option<Timing>>,
    /// A `Close` is queued: read no further request.
    closing: bool,
    /// This client's share of the proxy-wide query buffer total.
    query: QueryCharge,
}

/// A session's query buffer bytes as counted in the proxy-wide total; the
/// count is given back, and the session leaves the proxy's registry, when
/// the session ends, however it ends.
struct QueryCharge {
    proxy: Arc<Proxy>,
    id: u64,
    budget: Arc<ReplyBudget>,
    bytes: usize,
    entry: Arc<crate::proxy::commands::clients::ClientEntry>,
}

impl QueryCharge {
    fn resize(&mut self, bytes: usize) {
        self.entry.qbuf.store(bytes, Ordering::Relaxed);
        let q = &self.proxy.query_buffers;
        q.resize(self.id, &self.budget, self.bytes, bytes);
        self.bytes = bytes;
    }
}

impl Drop for QueryCharge {
    fn drop(&mut self) {
        self.resize(0);
        let mut sessions = self
            .proxy
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        sessions.remove(&self.id);
    }
}

/// What woke a session.
enum Event {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    /// The front reply, and whether it was charged on arrival.
    Reply(Bytes, bool),
    /// The soft limit's time is up.
    Budget,
    /// A byte limit may have been crossed, or the proxy began to drain.
    Woken,
    /// A pub/sub message (or the end of the subscriber).
    Push(Option<crate::proxy::commands::pubsub::Push>),
}

impl ClientSession {
    /// Serves one client until it disconnects, errs, exceeds a byte budget,
    /// or the proxy drains.
    pub async fn run(proxy: Arc<Proxy>, mut sock: TcpStream) {
        let _ = sock.set_nodelay(true);
        let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let local = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&sock) as i64;
        let (mut rd, mut wr) = sock.split();
        let depth = proxy.config.pipeline_depth.max(1);
        let mut decoder = RequestDecoder::new(proxy.config.limits);
        let id = proxy.next_client_id.fetch_add(1, Ordering::Relaxed);
        let budget = ReplyBudget::new(proxy.config.output_limits);
        let entry = Arc::new(crate::proxy::commands::clients::ClientEntry::new(
            id,
            peer.clone(),
            local.clone(),
            fd,
            budget.clone(),
        ));
        // Registered before the first look at `draining`, so a drain that
        // starts after that look wakes this session.
        proxy
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, entry.clone());
        let mut session = ClientSession {
            state: ClientState {
                id,
                proto: 2,
                name: None,
                peer,
                local,
                tx: Default::default(),
                pubsub: Default::default(),
                blocked: entry.blocked.clone(),
                budget: budget.clone(),
                served: ServedCell::default(),
                entry: entry.clone(),
                reply: Default::default(),
                monitor: false,
            },
            owed: VecDeque::new(),
            timings: VecDeque::new(),
            closing: false,
            query: QueryCharge {
                proxy: proxy.clone(),
                id,
                budget: budget.clone(),
                bytes: 0,
                entry,
            },
            proxy,
        };
        let mut buf = BytesMut::with_capacity(16 * 1024);
        let mut out = BytesMut::with_capacity(16 * 1024);
        // The client sent EOF (or its socket failed), or the proxy drains:
        // answer what is owed, then close.
        let mut eof = false;
        // `buf` holds no complete request until more bytes arrive.
        let mut need_bytes = true;
        let mut soft = SoftClock::default();
        // Kept armed across iterations: registering a waiter afresh on every
        // pass would cost two lock round trips per batch of requests.
        let mut woken = std::pin::pin!(budget.woken());
        loop {
            // CLIENT KILL chose this client: it goes now, with what it pins.
            if session.state.entry.is_killed() {
                return;
            }
            // The proxy drains: read no further request; answer what is owed.
            if session.proxy.draining.load(Ordering::SeqCst) {
                // A blocked command may never be answered: the client is
                // closed with what is complete, as Redis closes blocked
                // clients when it shuts down.
                if session.state.blocked.load(Ordering::SeqCst) > 0 {
                    session.collect(&mut out, &budget);
                    break;
                }
                eof = true;
            }
            // Dispatch what is buffered, up to the pipeline depth. One clock
            // read stamps every request that arrived together.
            let mut arrived = None;
            while !need_bytes
                && !session.closing
                && !session.state.monitor
                && session.owed.len() < depth
            {
                match decoder.decode(&mut buf) {
                    Ok(Some(req)) => {
                        session.proxy.stats.commands.fetch_add(1, Ordering::Relaxed);
                        let started = *arrived.get_or_insert_with(std::time::Instant::now);
                        let raw = req.raw.clone();
                        let p = dispatch(&session.proxy, &mut session.state, req).await;
                        let served = session.state.served.get();
                        let (proxy, state) = (&session.proxy, &mut session.state);
                        let p = after_request(proxy, state, p, &raw, served, started);
                        session.push(p);
                        session.timings.push_back(Some(Timing {
                            started,
                            raw,
                            served,
                        }));
                    }
                    Ok(None) => need_bytes = true,
                    Err(e) => {
                        if e == ProtocolError::QueryBufferFull {
                            let stats = &session.proxy.stats;
                            stats.query_limit_closes.fetch_add(1, Ordering::Relaxed);
                        }
                        session.push(Pending::Close(ProxyError::Protocol(e).reply()));
                        session.timings.push_back(None);
                    }
                }
            }
            session.query.resize(buf.len());
            // Gather every reply that is complete at the front.
            let closed = session.collect(&mut out, &budget);
            if closed || (eof && session.owed.is_empty()) {
                break;
            }
            if session.state.monitor && session.owed.is_empty() && out.is_empty() {
                let (p, s) = (&session.proxy, &mut session.state);
                match crate::proxy::commands::monitor::serve(
                    p,
                    s,
                    &mut decoder,
                    &mut buf,
                    &mut rd,
                    &mut wr,
                )
                .await
                {
                    Some(rest) => (out, need_bytes) = (rest, false),
                    None => return,
                }
                continue;
            }
            let soft_deadline = match soft.check(&budget, Instant::now) {
                Ok(d) => d,
                Err(why) => return session.exceeded(why),
            };
            if budget.is_evicted() && !session.closing {
                // The proxy-wide query buffer limit chose this client: its
                // buffer goes now; what it is owed is answered, then it closes.
                session.exceeded(Exceeded::QueryTotal);
                buf = BytesMut::new();
                session.query.resize(0);
                session.push(Pending::Close(ProxyError::QueryBufferTotal.reply()));
                session.timings.push_back(None);
                continue;
            }
            if need_bytes && buf.capacity() - buf.len() < 4096 {
                if buf.is_empty() {
                    buf = BytesMut::with_capacity(16 * 1024);
                } else {
                    buf.reserve(16 * 1024);
                }
            }
            let want_read = need_bytes && !eof && !session.closing && session.owed.len() < depth;
            let want_reply = !session.owed.is_empty() && out.len() < MAX_OUT_BYTES;
            let owed = &mut session.owed;
            let pubsub = &mut session.state.pubsub;
            let listening = pubsub.is_listening();
            let event = tokio::select! {
                biased;
                // A limit crossed, or a drain began: re-checked at the top.
                _ = &mut woken => Event::Woken,
                _ = sleep_until_some(soft_deadline), if soft_deadline.is_some() => Event::Budget,
                r = wr.write(&out), if !out.is_empty() => Event::Wrote(r),
                (r, charged) = front_reply(owed), if want_reply => Event::Reply(r, charged),
                p = pubsub.next(), if listening => Event::Push(p),
                r = rd.read_buf(&mut buf), if want_read => Event::Read(r),
                // Not reached: with nothing owed and nothing to write, the
                // session either reads or has ended above. Ending beats a panic.
                else => break,
            };
            match event {
                // A client that leaves while blocked is gone, as Redis treats
                // it: dropping what it is owed closes the pinned connections,
                // so no node pops an element for it.
                Event::Read(Ok(0)) | Event::Read(Err(_))
                    if session.state.blocked.load(Ordering::SeqCst) > 0 =>
                {
                    return
                }
                Event::Read(Ok(0)) | Event::Read(Err(_)) => eof = true,
                Event::Read(Ok(n)) => {
                    need_bytes = false;
                    let m = &session.proxy.ops.metrics;
                    m.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                    session.query.resize(buf.len());
                }
                Event::Wrote(Ok(n)) if n > 0 => {
                    budget.release(n);
                    let m = &session.proxy.ops.metrics;
                    m.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
                    if n == out.len() {
                        out.clear();
                    } else {
                        out.advance(n);
                    }
                }
                // The client is gone: nobody reads what is owed.
                Event::Wrote(_) => return,
                Event::Reply(r, charged) => {
                    session.owed.pop_front();
                    session.answered(&r, std::time::Instant::now());
                    if !charged {
                        budget.charge(r.len());
                    }
                    out.extend_from_slice(&r);
                }
                Event::Budget => {}
                Event::Woken => woken.set(budget.woken()),
                Event::Push(p) => {
                    // Take every message already waiting in one pass.
                    let mut next = p;
                    while let Some(p) = next {
                        if !session.pushed(p) {
                            return;
                        }
                        next = session.state.pubsub.try_next();
                    }
                }
            }
        }
        // The last replies (after QUIT or a protocol error), bounded in time:
        // a client that does not read them must not keep its slot.
        if !out.is_empty() {
            let grace = Duration::from_millis(session.proxy.config.request_timeout_ms);
            let _ = tokio::time::timeout(grace, wr.write_all(&out)).await;
        }
        let _ = wr.shutdown().await;
    }

    /// Counts and logs a client over its budget. For output limits the
    /// caller then drops the session: the socket closes without a reply (as
    /// Redis does: the client is not reading, so no reply would arrive).
    fn exceeded(&self, why: Exceeded) {
        let stats = &self.proxy.stats;
        let counter = match why {
            Exceeded::OutputHard | Exceeded::OutputSoft => &stats.output_limit_closes,
            Exceeded::QueryTotal => &stats.query_limit_closes,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            client = self.state.id,
            peer = %self.state.peer,
            owed_bytes = self.state.budget.owed(),
            query_bytes = self.query.bytes,
            limit = ?why,
            "closing client over its byte budget"
        );
    }

    /// Moves the complete replies at the front of the FIFO into `out`,
    /// charging to `budget` those not charged on arrival; true when it
    /// reached a `Close` (whose reply is then in `out` too).
    fn collect(&mut self, out: &mut BytesMut, budget: &ReplyBudget) -> bool {
        // One clock read for every reply gathered now.
        let mut now = None;
        while out.len() < MAX_OUT_BYTES {
            let (bytes, charged) = match self.owed.front_mut() {
                None => return false,
                Some(Pending::Ready(b)) => (std::mem::take(b), false),
                Some(Pending::One(rx)) => match rx.try_recv() {
                    Ok(b) => (b, false),
                    Err(oneshot::error::TryRecvError::Closed) => (lost_reply(), false),
                    Err(oneshot::error::TryRecvError::Empty) => return false,
                },
                Some(Pending::Charged(rx)) => match rx.try_recv() {
                    Ok(b) => (b, true),
                    Err(oneshot::error::TryRecvError::Closed) => (lost_reply(), false),
                    Err(oneshot::error::TryRecvError::Empty) => return false,
                },
                Some(Pending::Later(_)) => return false,
                Some(Pending::Pushed(b)) => (std::mem::take(b).freeze(), true),
                Some(Pending::Close(b)) => {
                    budget.charge(b.len());
                    out.extend_from_slice(b);
                    let b = b.clone();
                    self.answered(&b, *now.get_or_insert_with(std::time::Instant::now));
                    return true;
                }
            };
            if !charged {
                budget.charge(bytes.len());
            }
            out.extend_from_slice(&bytes);
            self.answered(&bytes, *now.get_or_insert_with(std::time::Instant::now));
            self.owed.pop_front();
        }
        false
    }

    /// The reply at the front is complete: hands its request's timing to the
    /// operator plane (metrics, slow log).
    fn answered(&mut self, reply: &[u8], now: std::time::Instant) {
        if let Some(Some(t)) = self.timings.pop_front() {
            self.proxy
                .ops
                .answered(&self.proxy, t, now, reply, &self.state);
        }
    }

    /// Queues a pub/sub message behind every reply owed now (never inside
    /// one); consecutive messages share one slot.
    /// False when the subscriber must be closed.
    fn pushed(&mut self, p: crate::proxy::commands::pubsub::Push) -> bool {
        let m = match p {
            crate::proxy::commands::pubsub::Push::Message(m) => m,
            crate::proxy::commands::pubsub::Push::OverLimit => {
                self.exceeded(Exceeded::OutputHard);
                return false;
            }
            crate::proxy::commands::pubsub::Push::ClosedByNode => return false,
            crate::proxy::commands::pubsub::Push::Lost => {
                tracing::warn!(
                    client = self.state.id,
                    "closing a subscriber whose subscriptions no node could take"
                );
                return false;
            }
        };
        if let Some(Pending::Pushed(b)) = self.owed.back_mut() {
            b.extend_from_slice(&m);
            return true;
        }
        self.owed.push_back(Pending::Pushed(BytesMut::from(&m[..])));
        self.timings.push_back(None);
        true
    }

    /// Queues a reply slot. Never waits: the session reads no further
    /// request while `pipeline_depth` replies are owed.
    fn push(&mut self, p: Pending) {
        if matches!(p, Pending::Close(_)) {
            self.closing = true;
        }
        self.owed.push_back(p);
    }
}

/// Routes one request with its panics contained: a handler that panics
/// (while dispatching, or later while building the reply) costs the client
/// that one reply, answered `-ERR internal error …`, and the session goes on.
/// The panic itself is logged by the process's panic hook.
async fn dispatch(proxy: &Arc<Proxy>, state: &mut ClientState, req: Request) -> Pending {
    // A reference, not a copy: the name is only spelled out after a panic.
    let name = req.args[0].clone();
    let id = state.id;
    let routed = AssertUnwindSafe(async {
        fault_panic(&name);
        crate::proxy::route::dispatch(proxy, state, req).await
    })
    .catch_unwind()
    .await;
    match routed {
        Ok(Pending::Later(f)) => {
            let proxy = proxy.clone();
            Pending::Later(Box::pin(
                AssertUnwindSafe(f)
                    .catch_unwind()
                    .map(move |r| r.unwrap_or_else(|_| internal_error(&proxy, id, &name))),
            ))
        }
        Ok(p) => p,
        Err(_) => Pending::Ready(internal_error(proxy, id, &name)),
    }
}

/// The reply for a request whose handler panicked; counts it.
fn internal_error(proxy: &Proxy, client: u64, command: &[u8]) -> Bytes {
    let command = String::from_utf8_lossy(command).to_ascii_lowercase();
    let command = command.as_str();
    proxy.stats.internal_errors.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        client,
        command,
        "request handler panicked; answered -ERR internal error"
    );
    ProxyError::Internal {
        command: command.to_string(),
    }
    .reply()
}

/// Fault injection for tests: with `SHARDIS_FAULT_PANIC_ON=<command>` the
/// proxy panics while dispatching that command, to prove a panic costs one
/// reply and nothing else. Read once.
fn fault_panic(command: &[u8]) {
    static ON: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let on = ON.get_or_init(|| std::env::var("SHARDIS_FAULT_PANIC_ON").ok());
    if let Some(on) = on {
        if on.as_bytes().eq_ignore_ascii_case(command) {
            panic!("fault injected by SHARDIS_FAULT_PANIC_ON={on}");
        }
    }
}

/// Waits for the reply at the front of the FIFO (never a `Close`: `collect`
/// has taken it).
fn front_reply(owed: &mut VecDeque<Pending>) -> impl Future<Output = (Bytes, bool)> + '_ {
    poll_fn(move |cx| match owed.front_mut() {
        Some(Pending::One(rx)) => Pin::new(rx)
            .poll(cx)
            .map(|r| (r.unwrap_or_else(|_| lost_reply()), false)),
        Some(Pending::Charged(rx)) => Pin::new(rx).poll(cx).map(|r| match r {
            Ok(b) => (b, true),
            Err(_) => (lost_reply(), false),
        }),
        Some(Pending::Later(f)) => f.as_mut().poll(cx).map(|b| (b, false)),
        Some(Pending::Ready(b)) => Poll::Ready((b.clone(), false)),
        Some(Pending::Pushed(b)) => Poll::Ready((std::mem::take(b).freeze(), true)),
        _ => Poll::Pending,
    })
}

/// Sleeps until `deadline`; never resolves without one.
async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
