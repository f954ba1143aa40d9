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
//! one `-ERR internal error` reply. Every request passes the
//! authentication step (`auth`) before dispatch. Handlers get the client's [`ClientState`],
//! never the session: the socket and the FIFO are this task's alone.
//!
//! Must never: wait on a client while holding anything another client needs,
//! or let a reply overtake an earlier one.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::proxy::commands::clients::ReplyMode;
use crate::proxy::commands::monitor::serve as serve_monitor;
use crate::proxy::commands::pubsub::is_subscribe;
use crate::proxy::conn::after::after_request;
use crate::proxy::conn::budget::{Exceeded, ReplyBudget, SoftClock};
use crate::proxy::conn::client::{ClientState, QueryCharge};
use crate::proxy::conn::error::{internal_error, ProxyError};
use crate::proxy::conn::io::Io;
use crate::proxy::conn::pending::{front_reply, sleep_until_some, Pending};
use crate::proxy::ops::metrics::Timing;
use crate::proxy::Proxy;
use crate::resp::{ProtocolError, Request, RequestDecoder};

mod collect;

/// Replies gathered before they are written, at most (one reply may exceed it).
const MAX_OUT_BYTES: usize = 256 * 1024;

/// One client connection: its socket, its state and the replies it is owed.
pub(crate) struct ClientSession {
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
    /// When a client that has not authenticated is closed (`auth_timeout_ms`).
    auth_deadline: Option<Instant>,
}

/// What woke a session.
enum Event {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    /// The front reply, and whether it was charged on arrival.
    Reply(Bytes, bool),
    /// The soft limit's time is up, or the client's time to authenticate.
    Budget,
    /// A byte limit may have been crossed, or the proxy began to drain.
    Woken,
    /// A pub/sub message (or the end of the subscriber).
    Push(Option<crate::proxy::commands::pubsub::Push>),
    /// The writer sent what it buffered (TLS).
    Flushed(std::io::Result<()>),
}

impl ClientSession {
    /// Serves one client until it disconnects, errs, exceeds a byte budget,
    /// or the proxy drains.
    pub(crate) async fn run(proxy: Arc<Proxy>, mut sock: TcpStream) {
        let _ = sock.set_nodelay(true);
        let session = ClientSession::open(proxy, &sock);
        let (rd, wr) = sock.split();
        session.serve(rd, wr, false).await
    }

    /// [`ClientSession::run`] over TLS, once the handshake is done.
    pub(crate) async fn run_tls(
        proxy: Arc<Proxy>,
        tls: tokio_rustls::server::TlsStream<TcpStream>,
    ) {
        let session = ClientSession::open(proxy, tls.get_ref().0);
        let (rd, wr) = tokio::io::split(tls);
        session.serve(rd, wr, true).await
    }

    /// The loop of one session over its socket's halves. `flushes`: the
    /// writer buffers (TLS) and must be flushed once a batch is written,
    /// or its last bytes could wait there for the next batch.
    async fn serve<R, W>(self, mut rd: R, mut wr: W, flushes: bool)
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut session = self;
        let depth = session.proxy.config().pipeline_depth.max(1);
        let mut decoder = RequestDecoder::new(session.proxy.config().limits);
        session.auth_changed(&mut decoder);
        let budget = session.state.budget.clone();
        let mut io = Io {
            buf: BytesMut::with_capacity(16 * 1024),
            out: BytesMut::with_capacity(16 * 1024),
            eof: false,
            need_bytes: true,
        };
        let mut soft = SoftClock::default();
        let mut unflushed = false;
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
                    session.collect(&mut io.out, &budget);
                    break;
                }
                io.eof = true;
            }
            session
                .dispatch_buffered(&mut decoder, &mut io, depth)
                .await;
            session.query.resize(io.buf.len());
            // The client sent a blocking command and EOF in one burst: it is
            // gone, as Redis sees it, and a blocked reply may never come.
            if io.eof && session.state.blocked.load(Ordering::SeqCst) > 0 {
                return;
            }
            // Gather every reply that is complete at the front.
            let closed = session.collect(&mut io.out, &budget);
            if closed || (io.eof && session.owed.is_empty()) {
                break;
            }
            if session.state.monitor && session.owed.is_empty() && io.out.is_empty() {
                let (p, s) = (&session.proxy, &mut session.state);
                let (buf, out) = (&mut io.buf, &mut io.out);
                match serve_monitor(p, s, &mut decoder, buf, &mut rd, &mut wr).await {
                    Some(rest) => (*out, io.need_bytes) = (rest, false),
                    None => return,
                }
                continue;
            }
            let soft_deadline = match soft.check(&budget, Instant::now) {
                Ok(d) => d,
                Err(why) => return session.exceeded(why),
            };
            if session.auth_deadline.is_some_and(|d| d <= Instant::now()) {
                tracing::debug!(client = session.state.id, peer = %session.state.peer, "closing a client that did not authenticate in time");
                return;
            }
            let soft_deadline = match (soft_deadline, session.auth_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // The proxy-wide total of owed replies chose this client: it
            // goes now, without a reply (it is not reading).
            if budget.evicted() == Some(Exceeded::ReplyTotal) {
                return session.exceeded(Exceeded::ReplyTotal);
            }
            if budget.is_evicted() && !session.closing {
                // The proxy-wide query buffer limit chose this client: its
                // buffer goes now; what it is owed is answered, then it closes.
                session.exceeded(Exceeded::QueryTotal);
                io.buf = BytesMut::new();
                session.query.resize(0);
                session.push(Pending::Close(ProxyError::QueryBufferTotal.reply()));
                session.timings.push_back(None);
                continue;
            }
            io.make_room();
            let want_read =
                io.need_bytes && !io.eof && !session.closing && session.owed.len() < depth;
            let want_reply = !session.owed.is_empty() && io.out.len() < MAX_OUT_BYTES;
            let owed = &mut session.owed;
            let pubsub = &mut session.state.pubsub;
            let listening = pubsub.is_listening();
            let event = tokio::select! {
                biased;
                // A limit crossed, or a drain began: re-checked at the top.
                _ = &mut woken => Event::Woken,
                _ = sleep_until_some(soft_deadline), if soft_deadline.is_some() => Event::Budget,
                e = write_or_flush(&mut wr, &io.out), if !io.out.is_empty() || unflushed => e,
                (r, charged) = front_reply(owed), if want_reply => Event::Reply(r, charged),
                p = pubsub.next(), if listening => Event::Push(p),
                r = rd.read_buf(&mut io.buf), if want_read => Event::Read(r),
                // Not reached: with nothing owed and nothing to write, the
                // session either reads or has ended above. Ending beats a panic.
                else => break,
            };
            match event {
                Event::Woken => woken.set(budget.woken()),
                Event::Flushed(Ok(())) => unflushed = false,
                Event::Flushed(Err(_)) => return,
                Event::Wrote(Ok(n)) if flushes && n > 0 => {
                    unflushed = true;
                    if !session.on_event(Event::Wrote(Ok(n)), &mut io, &budget) {
                        return;
                    }
                }
                event => {
                    if !session.on_event(event, &mut io, &budget) {
                        return;
                    }
                }
            }
        }
        // The last replies (after QUIT or a protocol error), bounded in time:
        // a client that does not read them must not keep its slot.
        if !io.out.is_empty() {
            let grace = Duration::from_millis(session.proxy.config().request_timeout_ms);
            let _ = tokio::time::timeout(grace, wr.write_all(&io.out)).await;
        }
        let _ = wr.shutdown().await;
    }

    /// A new session for `sock`, registered with the proxy (before the
    /// first look at `draining`, so a drain that starts after that look
    /// wakes it).
    fn open(proxy: Arc<Proxy>, sock: &TcpStream) -> ClientSession {
        let (state, query) = ClientState::register(&proxy, sock);
        ClientSession {
            state,
            owed: VecDeque::new(),
            timings: VecDeque::new(),
            closing: false,
            query,
            proxy,
            auth_deadline: None,
        }
    }

    /// After a request that may have changed who the client is: the
    /// decoder's limits and the deadline to authenticate follow.
    fn auth_changed(&mut self, decoder: &mut RequestDecoder) {
        let pending = self.proxy.auth.is_pending(&self.state);
        decoder.set_unauthenticated(pending);
        self.auth_deadline = match (pending, self.auth_deadline) {
            (false, _) => None,
            (true, Some(d)) => Some(d),
            (true, None) => self.proxy.auth.users().map(|u| Instant::now() + u.timeout),
        };
    }

    /// Dispatches what is buffered, up to the pipeline depth, each request
    /// through the authentication step first. One clock read stamps every
    /// request that arrived together.
    async fn dispatch_buffered(&mut self, decoder: &mut RequestDecoder, io: &mut Io, depth: usize) {
        let mut arrived = None;
        // A client a proxy-wide limit chose dispatches nothing more: the
        // loop closes it next (dispatching may wait on a node's queue).
        while !io.need_bytes
            && !self.closing
            && !self.state.monitor
            && self.owed.len() < depth
            && !self.state.budget.is_evicted()
        {
            match decoder.decode(&mut io.buf) {
                Ok(Some(req)) => {
                    self.proxy.stats.commands.fetch_add(1, Ordering::Relaxed);
                    let started = *arrived.get_or_insert_with(std::time::Instant::now);
                    let raw = req.raw.clone();
                    // Confirmations are sent whatever CLIENT REPLY says.
                    let confirms = self.state.reply != ReplyMode::On && is_subscribe(&req);
                    self.state.lane.next_request(self.owed.is_empty());
                    let p = match self.proxy.auth.admit(&mut self.state, &req) {
                        Ok(()) => dispatch(&self.proxy, &mut self.state, req).await,
                        Err(refused) => refused,
                    };
                    self.auth_changed(decoder);
                    let served = self.state.served.get();
                    let p = after_request(
                        &self.proxy,
                        &mut self.state,
                        p,
                        (&raw, confirms),
                        served,
                        started,
                    );
                    self.push(p);
                    self.timings.push_back(Some(Timing {
                        started,
                        raw,
                        served,
                    }));
                }
                Ok(None) => io.need_bytes = true,
                Err(e) => {
                    if e == ProtocolError::QueryBufferFull {
                        let stats = &self.proxy.stats;
                        stats.query_limit_closes.fetch_add(1, Ordering::Relaxed);
                    }
                    self.push(Pending::Close(ProxyError::Protocol(e).reply()));
                    self.timings.push_back(None);
                }
            }
        }
    }

    /// Acts on what woke the loop; false when the session must end now,
    /// without writing what is left.
    fn on_event(&mut self, event: Event, io: &mut Io, budget: &ReplyBudget) -> bool {
        let ended = match &event {
            Event::Read(Ok(0)) => Some(&self.proxy.stats.client_eof),
            Event::Read(Err(_)) | Event::Wrote(Err(_)) => Some(&self.proxy.stats.client_err),
            _ => None,
        };
        if let Some(count) = ended {
            count.fetch_add(1, Ordering::Relaxed);
        }
        match event {
            // A client that leaves while blocked is gone, as Redis treats
            // it: dropping what it is owed closes the pinned connections,
            // so no node pops an element for it.
            Event::Read(Ok(0)) | Event::Read(Err(_))
                if self.state.blocked.load(Ordering::SeqCst) > 0 =>
            {
                return false
            }
            Event::Read(Ok(0)) | Event::Read(Err(_)) => io.eof = true,
            Event::Read(Ok(n)) => {
                io.need_bytes = false;
                let m = &self.proxy.ops.metrics;
                m.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                self.query.resize(io.buf.len());
            }
            Event::Wrote(Ok(n)) if n > 0 => {
                budget.release(n);
                let m = &self.proxy.ops.metrics;
                m.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
                if n == io.out.len() {
                    io.out.clear();
                } else {
                    io.out.advance(n);
                }
            }
            // The client is gone: nobody reads what is owed.
            Event::Wrote(_) => return false,
            Event::Reply(r, charged) => {
                self.owed.pop_front();
                self.answered(&r, std::time::Instant::now());
                if !charged {
                    budget.charge(r.len());
                }
                io.out.extend_from_slice(&r);
            }
            Event::Budget | Event::Woken | Event::Flushed(_) => {}
            Event::Push(p) => {
                // Take every message already waiting in one pass.
                let mut next = p;
                while let Some(p) = next {
                    if !self.pushed(p) {
                        return false;
                    }
                    next = self.state.pubsub.try_next();
                }
            }
        }
        true
    }

    /// Counts and logs a client over its budget. For output limits the
    /// caller then drops the session: the socket closes without a reply (as
    /// Redis does: the client is not reading, so no reply would arrive).
    fn exceeded(&self, why: Exceeded) {
        let stats = &self.proxy.stats;
        let counter = match why {
            Exceeded::OutputHard | Exceeded::OutputSoft => &stats.output_limit_closes,
            Exceeded::QueryTotal => &stats.query_limit_closes,
            // Counted by the total itself (INFO `evicted_clients`).
            Exceeded::ReplyTotal => &stats.reply_total_closes,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            client = self.state.id,
            peer = %self.state.peer,
            owed_bytes = self.state.budget.owed(),
            owed_total = self.proxy.reply_total.total(),
            query_bytes = self.query.bytes,
            limit = ?why,
            "closing client over its byte budget"
        );
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

/// Writes what is gathered, or, with nothing gathered, flushes what the
/// writer buffered.
async fn write_or_flush<W: AsyncWrite + Unpin>(wr: &mut W, out: &[u8]) -> Event {
    if out.is_empty() {
        Event::Flushed(wr.flush().await)
    } else {
        Event::Wrote(wr.write(out).await)
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
        crate::proxy::dispatch::dispatch(proxy, state, req).await
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
