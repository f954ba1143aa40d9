//! MONITOR: every command any client sends through this proxy, one line
//! each, to every client in monitor mode, in redis-server 7's format with
//! the node that served it appended:
//!
//! ```text
//! +1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v" -> 127.0.0.1:7001
//! ```
//!
//! The node follows the last quoted argument, unquoted, so parsers that
//! collect the quoted arguments (redis-py's `Monitor.next_command`) read
//! the command unchanged, and redis-cli prints the line as it is.
//!
//! [`Monitors::feed`] is on every request's path: with no monitor attached
//! it costs one relaxed atomic load. Each monitor has its own queue of lines,
//! charged to its byte budget; a monitor that does not read is closed at
//! its output limit (at most [`MAX_OWED_BYTES`]), and feeding never waits on
//! it. [`serve`] is the monitor's own loop, entered by its session after
//! MONITOR's `+OK` is written: it writes the lines and still answers the
//! commands Redis lets a monitor run, until RESET hands the client back to
//! the session, or QUIT, a kill, a limit or the drain ends it.
//!
//! Called by `clients::after_request` (feed) and `session` (serve). Must
//! never block a feeding client, nor hold a lock across `.await`.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

use crate::proxy::conn::budget::{ReplyBudget, SoftClock};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::error::lost;
use crate::proxy::conn::error::ProxyError;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ops::metrics::Served;
use crate::proxy::ops::served_by;
use crate::proxy::policy::{lookup, Kind};
use crate::proxy::Proxy;
use crate::resp::{decode_request, eq_ignore_case, Request, RequestDecoder};

mod line;
use line::is_hidden;
pub(crate) use line::line;

/// Bytes a monitor may be owed at most, whatever the output limits say
/// (Redis sets no limit for monitors; an unbounded queue is not an option).
pub const MAX_OWED_BYTES: usize = 32 << 20;

/// The monitors attached to one proxy.
#[derive(Default)]
pub struct Monitors {
    /// How many are attached: the request path reads only this.
    count: AtomicUsize,
    /// Read by every feeding request while monitors are attached, changed
    /// only when one attaches or leaves: a snapshot swap, no lock to read.
    taps: ArcSwap<Vec<Arc<Tap>>>,
}

/// One monitor's queue of lines not yet taken by its loop.
struct Tap {
    id: u64,
    /// A std mutex: held only to append a line or take them all.
    queue: Mutex<BytesMut>,
    budget: Arc<ReplyBudget>,
    /// Lines are queued (one permit kept, so none is missed).
    ready: Notify,
    /// Set when a line would have taken it over [`MAX_OWED_BYTES`].
    overflow: AtomicBool,
}

impl Tap {
    fn push(&self, line: &[u8]) {
        let cap = match self.budget.limits().hard_bytes {
            0 => MAX_OWED_BYTES,
            hard => hard.min(MAX_OWED_BYTES),
        };
        if self.budget.owed() + line.len() > cap {
            self.overflow.store(true, Relaxed);
            self.budget.wake();
            return;
        }
        self.budget.charge(line.len());
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(line);
        self.ready.notify_one();
    }

    fn take(&self) -> BytesMut {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Monitors {
    /// Sends the request in `raw`, from `s`, served as `served`, to every
    /// monitor. One relaxed load when none is attached.
    #[inline]
    pub(crate) fn feed(&self, proxy: &Proxy, raw: &Bytes, served: Served, s: &ClientState) {
        if !self.is_attached() {
            return;
        }
        self.feed_all(proxy, raw, served, &s.peer);
    }

    /// True while at least one monitor is attached: all the request path
    /// asks when none is.
    #[inline]
    pub fn is_attached(&self) -> bool {
        self.count.load(Relaxed) > 0
    }

    #[cold]
    fn feed_all(&self, proxy: &Proxy, raw: &Bytes, served: Served, peer: &str) {
        let mut buf = BytesMut::from(&raw[..]);
        let Ok(Some(req)) = decode_request(&mut buf, &proxy.config().limits) else {
            return;
        };
        // Unknown commands and bad arities never run, so Redis shows none.
        match lookup(req.name()) {
            Some(spec) if spec.is_arity_ok(req.args.len()) && !is_hidden(&req.args) => {}
            _ => return,
        }
        let line = line(
            SystemTime::now(),
            peer,
            &req.args,
            &served_by(proxy, served),
        );
        for tap in self.taps.load().iter() {
            tap.push(&line);
        }
    }

    fn attach(&self, tap: Arc<Tap>) {
        self.taps.rcu(|v| {
            let mut v = Vec::clone(v);
            v.push(tap.clone());
            v
        });
        self.count.fetch_add(1, SeqCst);
    }

    fn detach(&self, id: u64) {
        self.taps
            .rcu(|v| v.iter().filter(|t| t.id != id).cloned().collect::<Vec<_>>());
        self.count.fetch_sub(1, SeqCst);
    }
}

/// A monitor's place among the attached ones, left when dropped — also when
/// its session's task is cancelled mid-loop, so no queue outlives its reader.
struct Attached<'a>(&'a Monitors, u64);

impl<'a> Attached<'a> {
    fn new(monitors: &'a Monitors, tap: Arc<Tap>) -> Attached<'a> {
        let id = tap.id;
        monitors.attach(tap);
        Attached(monitors, id)
    }
}

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        self.0.detach(self.1);
    }
}

/// How a monitor's loop ended.
enum Ended {
    /// RESET: a normal client again; these bytes (charged to its budget)
    /// are written before anything else; then the RESET is shown.
    Reset(BytesMut, Bytes, Served),
    /// QUIT: answered; the QUIT is shown to the other monitors.
    Quit(Bytes, Served),
    /// The connection is done.
    Close,
}

/// Serves a client in monitor mode (see the module doc). `Some(bytes)`:
/// RESET made it a normal client again, and `bytes` (charged to its budget)
/// are to be written before anything else; `None`: the connection is done.
pub(crate) async fn serve<R, W>(
    proxy: &Arc<Proxy>,
    s: &mut ClientState,
    decoder: &mut RequestDecoder,
    buf: &mut BytesMut,
    rd: &mut R,
    wr: &mut W,
) -> Option<BytesMut>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let tap = Arc::new(Tap {
        id: s.id,
        queue: Mutex::new(BytesMut::new()),
        budget: s.budget.clone(),
        ready: Notify::new(),
        overflow: AtomicBool::new(false),
    });
    let attached = Attached::new(&proxy.monitors, tap.clone());
    s.entry.set_monitor(true);
    let ended = run(proxy, s, decoder, buf, rd, wr, &tap).await;
    drop(attached);
    s.entry.set_monitor(false);
    s.monitor = false;
    match ended {
        Ended::Reset(rest, raw, served) => {
            proxy.monitors.feed(proxy, &raw, served, s);
            Some(rest)
        }
        Ended::Quit(raw, served) => {
            proxy.monitors.feed(proxy, &raw, served, s);
            None
        }
        Ended::Close => None,
    }
}

async fn run<R, W>(
    proxy: &Arc<Proxy>,
    s: &mut ClientState,
    decoder: &mut RequestDecoder,
    buf: &mut BytesMut,
    rd: &mut R,
    wr: &mut W,
    tap: &Tap,
) -> Ended
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let budget = s.budget.clone();
    let mut soft = SoftClock::default();
    // Bytes taken from the queue, being written.
    let mut out = BytesMut::new();
    let mut woken = std::pin::pin!(budget.woken());
    loop {
        if s.entry.is_killed() || proxy.draining.load(SeqCst) {
            return Ended::Close;
        }
        let over = tap.overflow.load(Relaxed);
        let soft_deadline = match soft.check(&budget, tokio::time::Instant::now) {
            Ok(_) if over => Err(crate::proxy::conn::budget::Exceeded::OutputHard),
            r => r,
        };
        let soft_deadline = match soft_deadline {
            Ok(d) => d,
            Err(why) => {
                proxy.stats.output_limit_closes.fetch_add(1, Relaxed);
                tracing::info!(client = s.id, peer = %s.peer, owed_bytes = budget.owed(), limit = ?why, "closing a monitor over its byte budget");
                return Ended::Close;
            }
        };
        // The commands Redis lets a monitor run, answered in order with
        // the lines.
        loop {
            match decoder.decode(buf) {
                Ok(Some(req)) => {
                    if let Some(ended) = request(proxy, s, req, tap).await {
                        let mut rest = out;
                        rest.extend_from_slice(&tap.take());
                        return match ended {
                            Step::Reset(raw, served) => Ended::Reset(rest, raw, served),
                            Step::Quit(raw, served) => {
                                let grace =
                                    Duration::from_millis(proxy.config().request_timeout_ms);
                                let _ = tokio::time::timeout(grace, wr.write_all(&rest)).await;
                                Ended::Quit(raw, served)
                            }
                        };
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let mut rest = out;
                    rest.extend_from_slice(&tap.take());
                    rest.extend_from_slice(&ProxyError::Protocol(e).reply());
                    let grace = Duration::from_millis(proxy.config().request_timeout_ms);
                    let _ = tokio::time::timeout(grace, wr.write_all(&rest)).await;
                    return Ended::Close;
                }
            }
        }
        if out.is_empty() {
            out = tap.take();
        }
        tokio::select! {
            biased;
            _ = &mut woken => woken.set(budget.woken()),
            _ = sleep_until_some(soft_deadline), if soft_deadline.is_some() => {}
            r = wr.write(&out), if !out.is_empty() => match r {
                Ok(n) if n > 0 => {
                    budget.release(n);
                    let _ = out.split_to(n);
                }
                _ => return Ended::Close,
            },
            _ = tap.ready.notified(), if out.is_empty() => {}
            r = rd.read_buf(buf) => match r {
                Ok(n) if n > 0 => {}
                _ => return Ended::Close,
            },
        }
    }
}

/// What a monitor's request asks of its loop, beyond a reply.
enum Step {
    /// RESET, to be shown once the monitor is detached.
    Reset(Bytes, Served),
    /// QUIT, likewise.
    Quit(Bytes, Served),
}

/// One request from a monitor: shown to the monitors, then answered as
/// Redis answers a monitor (keyspace commands refused, MONITOR ignored).
async fn request(proxy: &Arc<Proxy>, s: &mut ClientState, req: Request, tap: &Tap) -> Option<Step> {
    proxy.stats.commands.fetch_add(1, Relaxed);
    let spec = lookup(req.name());
    let raw = req.raw.clone();
    if eq_ignore_case(req.name(), b"monitor") {
        return None; // Redis ignores it without a reply
    }
    let keyspace = spec.is_some_and(|sp| {
        matches!(
            sp.kind,
            Kind::Keyed | Kind::Split(_) | Kind::FanOut(_) | Kind::Pinned(_)
        )
    });
    if keyspace {
        tap.push(b"-ERR Replica can't interact with the keyspace\r\n");
        return None;
    }
    let mut quit = eq_ignore_case(req.name(), b"quit");
    let reset = eq_ignore_case(req.name(), b"reset");
    let p = AssertUnwindSafe(crate::proxy::dispatch::dispatch(proxy, s, req))
        .catch_unwind()
        .await;
    let reply = match p {
        Ok(Pending::Ready(b)) => b,
        // A reply that ends the connection (CLIENT KILL … SKIPME no).
        Ok(Pending::Close(b)) => {
            quit = true;
            b
        }
        Ok(Pending::One(rx)) => rx.await.unwrap_or_else(|_| lost()),
        Ok(Pending::Charged(rx)) => match rx.await {
            Ok(b) => {
                // Charged on arrival; charged again as it joins the queue.
                s.budget.release(b.len());
                b
            }
            Err(_) => lost(),
        },
        // Messages are queued by the session, never returned by dispatch;
        // handled as charged bytes all the same.
        Ok(Pending::Pushed(b)) => {
            s.budget.release(b.len());
            b.freeze()
        }
        Ok(Pending::Later(f)) => AssertUnwindSafe(f)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| internal()),
        Err(_) => internal(),
    };
    tap.push(&reply);
    // Shown once this client is no longer a monitor, as in Redis.
    if reset {
        return Some(Step::Reset(raw, s.served.get()));
    }
    if quit {
        return Some(Step::Quit(raw, s.served.get()));
    }
    // Redis shows a command once it ran: after its reply.
    proxy.monitors.feed(proxy, &raw, s.served.get(), s);
    None
}

fn internal() -> Bytes {
    Bytes::from_static(b"-ERR internal error\r\n")
}

async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
