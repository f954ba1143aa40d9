//! One client connection: decode requests, dispatch them, return replies in
//! request order.
//!
//! ```text
//!  socket ─read─► BytesMut ─decode_request─► Request ─dispatch─► Pending ──┐
//!                                                                          │ owed (FIFO,
//!  socket ◄─write (batched)─ out ◄── each Pending, in order, once complete ◄┘  ≤ pipeline depth)
//! ```
//!
//! One task does both halves: it reads while the client owes fewer than
//! `pipeline_depth` replies, gathers every reply that is complete at the front
//! of the FIFO into one write, and flushes before it waits on one that is not,
//! so earlier replies never wait for later ones. A reply from a node wakes
//! this task directly; there is no writer task between them. When the FIFO is
//! full the session stops reading, so a client that pipelines without reading
//! cannot grow the proxy's memory. A protocol error is answered, then that
//! client alone is closed; a bad argument is answered and the session goes on.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::metrics::{ServedCell, Timing};
use super::Proxy;
use crate::resp::{decode_request, encode, Request};

/// Replies gathered before they are written, at most (one reply may exceed it).
const MAX_OUT_BYTES: usize = 256 * 1024;

/// A reply the client is owed, in request order.
pub enum Pending {
    /// Built by the proxy, ready now.
    Ready(Bytes),
    /// Forwarded to one node; the reply arrives on the channel.
    One(oneshot::Receiver<Bytes>),
    /// Anything that needs more work (merges, fan-outs, admin): a future.
    Later(Pin<Box<dyn Future<Output = Bytes> + Send>>),
    /// Write this last reply and what is owed before it, then close (QUIT,
    /// protocol errors).
    Close(Bytes),
}

impl Pending {
    /// A reply the proxy built.
    pub fn ready(out: BytesMut) -> Pending {
        Pending::Ready(out.freeze())
    }

    /// An error reply; `msg` carries its `ERR`/code prefix.
    pub fn error(msg: &str) -> Pending {
        let mut b = BytesMut::new();
        encode::error(&mut b, msg);
        Pending::Ready(b.freeze())
    }
}

/// What the handlers of one client's requests read and change: the
/// connection's identity and the choices it made (HELLO, CLIENT SETNAME).
/// Handlers get this, never the session, so they cannot reach its socket or
/// its FIFO of owed replies.
pub struct ClientState {
    pub id: u64,
    /// Protocol version chosen by HELLO: 2 or 3.
    pub proto: u8,
    pub name: Option<Bytes>,
    pub peer: String,
    /// The request being dispatched: its command and the nodes routing sent it to.
    pub served: ServedCell,
}

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
}

/// What woke a session.
enum Event {
    Read(std::io::Result<usize>),
    Wrote(std::io::Result<usize>),
    Reply(Bytes),
}

impl ClientSession {
    /// Serves one client until it disconnects, errs, or the proxy shuts down.
    pub async fn run(proxy: Arc<Proxy>, mut sock: TcpStream) {
        let _ = sock.set_nodelay(true);
        let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let (mut rd, mut wr) = sock.split();
        let depth = proxy.config.pipeline_depth.max(1);
        let limits = proxy.config.limits;
        let id = proxy.next_client_id.fetch_add(1, Ordering::Relaxed);
        let mut session = ClientSession {
            proxy,
            state: ClientState {
                id,
                proto: 2,
                name: None,
                peer,
                served: ServedCell::default(),
            },
            owed: VecDeque::new(),
            timings: VecDeque::new(),
            closing: false,
        };
        let mut buf = BytesMut::with_capacity(16 * 1024);
        let mut out = BytesMut::with_capacity(16 * 1024);
        // The client sent EOF (or its socket failed): answer what is owed, then close.
        let mut eof = false;
        // `buf` holds no complete request until more bytes arrive.
        let mut need_bytes = true;
        loop {
            // Dispatch what is buffered, up to the pipeline depth. One clock
            // read stamps every request that arrived together.
            let mut arrived = None;
            while !need_bytes && !session.closing && session.owed.len() < depth {
                match decode_request(&mut buf, &limits) {
                    Ok(Some(req)) => {
                        session.proxy.stats.commands.fetch_add(1, Ordering::Relaxed);
                        let started = *arrived.get_or_insert_with(Instant::now);
                        let raw = req.raw.clone();
                        let p = dispatch(&session.proxy, &mut session.state, req).await;
                        session.push(p);
                        let served = session.state.served.get();
                        session.timings.push_back(Some(Timing {
                            started,
                            raw,
                            served,
                        }));
                    }
                    Ok(None) => need_bytes = true,
                    Err(e) => {
                        let mut b = BytesMut::new();
                        encode::error(&mut b, &format!("ERR {e}"));
                        session.push(Pending::Close(b.freeze()));
                        session.timings.push_back(None);
                    }
                }
            }
            // Gather every reply that is complete at the front.
            let closed = session.collect(&mut out);
            if closed || (eof && session.owed.is_empty()) {
                break;
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
            let event = tokio::select! {
                biased;
                r = wr.write(&out), if !out.is_empty() => Event::Wrote(r),
                r = front_reply(owed), if want_reply => Event::Reply(r),
                r = rd.read_buf(&mut buf), if want_read => Event::Read(r),
                // Not reached: with nothing owed and nothing to write, the
                // session either reads or has ended above. Ending beats a panic.
                else => break,
            };
            match event {
                Event::Read(Ok(0)) | Event::Read(Err(_)) => eof = true,
                Event::Read(Ok(n)) => {
                    need_bytes = false;
                    let m = &session.proxy.ops.metrics;
                    m.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                }
                Event::Wrote(Ok(n)) if n > 0 => {
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
                Event::Reply(r) => {
                    session.owed.pop_front();
                    session.answered(&r, Instant::now());
                    out.extend_from_slice(&r);
                }
            }
        }
        if !out.is_empty() && wr.write_all(&out).await.is_ok() {
            let m = &session.proxy.ops.metrics;
            m.bytes_out.fetch_add(out.len() as u64, Ordering::Relaxed);
        }
        let _ = wr.shutdown().await;
    }

    /// Moves the complete replies at the front of the FIFO into `out`; true
    /// when it reached a `Close` (whose reply is then in `out` too).
    fn collect(&mut self, out: &mut BytesMut) -> bool {
        // One clock read for every reply gathered now.
        let mut now = None;
        while out.len() < MAX_OUT_BYTES {
            let reply = match self.owed.front_mut() {
                None => return false,
                Some(Pending::Ready(b)) => b.clone(),
                Some(Pending::One(rx)) => match rx.try_recv() {
                    Ok(b) => b,
                    Err(oneshot::error::TryRecvError::Closed) => lost_reply(),
                    Err(oneshot::error::TryRecvError::Empty) => return false,
                },
                Some(Pending::Later(_)) => return false,
                Some(Pending::Close(b)) => {
                    let b = b.clone();
                    out.extend_from_slice(&b);
                    self.answered(&b, *now.get_or_insert_with(Instant::now));
                    return true;
                }
            };
            out.extend_from_slice(&reply);
            self.answered(&reply, *now.get_or_insert_with(Instant::now));
            self.owed.pop_front();
        }
        false
    }

    /// The reply at the front is complete: hands its request's timing to the
    /// operator plane (metrics, slow log).
    fn answered(&mut self, reply: &[u8], now: Instant) {
        if let Some(Some(t)) = self.timings.pop_front() {
            self.proxy
                .ops
                .answered(&self.proxy, t, now, reply, &self.state);
        }
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
    let name = String::from_utf8_lossy(req.name()).to_ascii_lowercase();
    let id = state.id;
    let routed = AssertUnwindSafe(async {
        fault_panic(&name);
        super::route::dispatch(proxy, state, req).await
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
fn internal_error(proxy: &Proxy, client: u64, command: &str) -> Bytes {
    proxy.stats.internal_errors.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        client,
        command,
        "request handler panicked; answered -ERR internal error"
    );
    let mut b = BytesMut::new();
    encode::error(
        &mut b,
        &format!("ERR internal error while handling '{command}' (logged by the proxy)"),
    );
    b.freeze()
}

/// Fault injection for tests: with `SHARDIS_FAULT_PANIC_ON=<command>` the
/// proxy panics while dispatching that command, to prove a panic costs one
/// reply and nothing else. Read once.
fn fault_panic(command: &str) {
    static ON: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let on = ON.get_or_init(|| {
        std::env::var("SHARDIS_FAULT_PANIC_ON")
            .ok()
            .map(|c| c.to_ascii_lowercase())
    });
    if on.as_deref() == Some(command) {
        panic!("fault injected by SHARDIS_FAULT_PANIC_ON={command}");
    }
}

/// Waits for the reply at the front of the FIFO (never a `Close`: `collect`
/// has taken it).
fn front_reply(owed: &mut VecDeque<Pending>) -> impl Future<Output = Bytes> + '_ {
    poll_fn(move |cx| match owed.front_mut() {
        Some(Pending::One(rx)) => Pin::new(rx)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|_| lost_reply())),
        Some(Pending::Later(f)) => f.as_mut().poll(cx),
        Some(Pending::Ready(b)) => Poll::Ready(b.clone()),
        _ => Poll::Pending,
    })
}

fn lost_reply() -> Bytes {
    Bytes::from_static(b"-ERR upstream connection lost before the reply arrived\r\n")
}
