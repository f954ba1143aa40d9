//! The node's blocked clients (BLPOP and the other blocking pops): who
//! waits on which key, in the order they blocked, and serving them when a
//! write makes one of their keys a non-empty list or sorted set — Redis
//! 7.0's `blockForKeys` / `signalKeyAsReady` / `handleClientsBlockedOnKeys`.
//!
//! ```text
//!  BLPOP finds nothing ──► Blocking::serve_or_wait registers a Waiter ──► its
//!                          connection awaits the reply (or timeout / EOF / shutdown)
//!  LPUSH creates the key ─► Store::insert_absent ─► ReadyKeys::signal (only
//!                          if anyone waits: one atomic load otherwise)
//!  after that command ───► Blocking::serve_ready: each waiter of each ready
//!                          key, first blocked first served, popped from the
//!                          store and sent its reply, before the pushing
//!                          connection runs its next command
//! ```
//!
//! Serving runs in the connection whose command made the key ready, so a
//! pushed element goes to the longest waiter before any other command can
//! take it, and a BLMOVE served that way makes its destination ready in
//! turn (chains). Owned by [`crate::backend::Node`]; called by the server
//! loop and `commands/blocking.rs`, which pops for it (the registry only
//! keeps who waits for what, and never names a command or the node).
//! Lock order: registry → store shard →
//! ready keys; none is held across an `.await`. There is at most one
//! waiter per connection (its loop is suspended while it waits), so the
//! registry is bounded by the number of connections.

use super::error::CmdError;
use super::keyspace::ready::ReadyKeys;
use super::keyspace::store::Store;
use super::value::Kind;
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::oneshot;

/// What a client blocked on a key gets when the key has data.
pub(crate) enum Op {
    /// BLPOP / BRPOP: `[key, element]`.
    Pop { head: bool },
    /// BLMPOP: `[key, [elements…]]`, up to `count`.
    MPop { head: bool, count: usize },
    /// BLMOVE / BRPOPLPUSH: the element, pushed onto `dst`.
    Move {
        dst: Box<[u8]>,
        from_head: bool,
        to_head: bool,
    },
    /// BZPOPMIN / BZPOPMAX: `[key, member, score]`.
    ZPop { max: bool },
    /// BZMPOP: `[key, [[member, score]…]]`, up to `count`.
    ZMPop { max: bool, count: usize },
    /// XREAD / XREADGROUP: entries after an ID, read or delivered.
    XRead(Box<super::value::stream::XReadOp>),
}

impl Op {
    /// The type of key it pops.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Op::Pop { .. } | Op::MPop { .. } | Op::Move { .. } => Kind::List,
            Op::ZPop { .. } | Op::ZMPop { .. } => Kind::ZSet,
            Op::XRead(_) => Kind::Stream,
        }
    }
}

/// A connection that must wait before its reply.
pub(crate) struct Block {
    /// The registration a push answers; `None` for WAIT.
    pub(crate) ticket: Option<Ticket>,
    /// How long to wait, in ms; 0 = until served.
    pub(crate) timeout_ms: u64,
    /// The reply when the time is up.
    pub(crate) on_timeout: &'static [u8],
    /// WAIT: the acknowledgements it waits for (it keeps its own time).
    pub(crate) wait: Option<crate::backend::replication::state::WaitFor>,
}

/// A panic while holding one of these locks leaves the maps consistent
/// (every change is a single insert or removal), so poisoning is ignored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Pops for a served waiter: its op, the ready key, its protocol, the
/// reply buffer; false if the key is empty.
pub(crate) type Serve<'a> =
    &'a mut dyn FnMut(&Op, &[u8], u8, &mut BytesMut) -> Result<bool, CmdError>;

/// One blocked client.
struct Waiter {
    keys: Vec<Box<[u8]>>,
    op: Op,
    proto: u8,
    reply: oneshot::Sender<Bytes>,
}

#[derive(Default)]
struct Registry {
    /// Waiter ids per key, in the order they blocked.
    by_key: HashMap<Box<[u8]>, VecDeque<u64>>,
    /// By client id.
    waiters: HashMap<u64, Waiter>,
}

/// The node's blocked clients.
#[derive(Default)]
pub(crate) struct Blocking {
    /// `std::sync::Mutex`: serving is short (a pop per waiter) and never
    /// awaits; one lock makes "first blocked, first served" and
    /// "each element to exactly one client" simple to keep.
    registry: Mutex<Registry>,
}

/// What [`Blocking::serve_or_wait`] did.
pub(crate) enum Attempt {
    /// A key had data: the reply is written.
    Served,
    /// Nothing to pop and the client may not block (inside MULTI).
    Empty,
    /// Registered; the connection waits with this (see [`Waiting`]).
    Wait(Ticket),
}

/// A registered client's claim on its reply: the caller wraps it in a
/// [`Waiting`] at once (a ticket dropped unwrapped leaves a registration
/// that only the next push to its keys discards).
pub(crate) struct Ticket {
    id: u64,
    rx: oneshot::Receiver<Bytes>,
}

/// A registered waiter, held by its connection while it waits. Dropping
/// it unregisters the client, so a connection that ends while blocked
/// (closed, shut down, aborted) pops nothing.
pub(crate) struct Waiting<'a> {
    blocking: &'a Blocking,
    ready: &'a ReadyKeys,
    ticket: Ticket,
    done: bool,
}

impl<'a> Waiting<'a> {
    /// Takes charge of a ticket `blocking` gave (`ready`: its store's).
    pub(crate) fn new(blocking: &'a Blocking, ready: &'a ReadyKeys, ticket: Ticket) -> Waiting<'a> {
        Waiting {
            blocking,
            ready,
            ticket,
            done: false,
        }
    }

    /// The reply, once a push served this client.
    pub(crate) async fn served(&mut self) -> Bytes {
        let r = (&mut self.ticket.rx).await;
        self.done = true;
        // The registry drops a sender unsent only after `cancel`.
        r.unwrap_or_else(|_| Bytes::from_static(b"-ERR blocked client lost its reply\r\n"))
    }

    /// Unregisters the client: `None` if it was still waiting, else the
    /// reply it was served just before (a timeout racing a push).
    pub(crate) fn cancel(&mut self) -> Option<Bytes> {
        self.done = true;
        match self.blocking.remove(self.ready, self.ticket.id) {
            Some(_) => None,
            None => self.ticket.rx.try_recv().ok(),
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.blocking.remove(self.ready, self.ticket.id);
        }
    }
}

impl Blocking {
    /// Serves `op` from the first of `keys` with data (WRONGTYPE if a key
    /// before it holds another type), else registers client `id` to wait
    /// on all of them, unless `may_block` is false. `serve` pops for `op`
    /// from one key and writes the reply, false if the key is empty.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn serve_or_wait(
        &self,
        ready: &ReadyKeys,
        id: u64,
        proto: u8,
        keys: &[&[u8]],
        op: Op,
        may_block: bool,
        mut serve: impl FnMut(&Op, &[u8]) -> Result<bool, CmdError>,
    ) -> Result<Attempt, CmdError> {
        let mut reg = lock(&self.registry);
        // Counted before looking, so a push right after the look is recorded.
        ready.waiting.fetch_add(1, SeqCst);
        let mut found = Ok(false);
        for key in keys {
            found = serve(&op, key);
            if !matches!(found, Ok(false)) {
                break;
            }
        }
        if !matches!(found, Ok(false)) || !may_block {
            ready.waiting.fetch_sub(1, SeqCst);
            return found.map(|served| {
                if served {
                    Attempt::Served
                } else {
                    Attempt::Empty
                }
            });
        }
        let (tx, rx) = oneshot::channel();
        let keys: Vec<Box<[u8]>> = keys.iter().map(|&k| k.into()).collect();
        for k in &keys {
            reg.by_key.entry(k.clone()).or_default().push_back(id);
        }
        let waiter = Waiter {
            keys,
            op,
            proto,
            reply: tx,
        };
        if let Some(old) = reg.waiters.insert(id, waiter) {
            // One waiter per connection; a second would be a server-loop bug.
            debug_assert!(false, "client {id} blocked twice");
            reg.unlink(id, &old.keys);
            ready.waiting.fetch_sub(1, SeqCst);
        }
        Ok(Attempt::Wait(Ticket { id, rx }))
    }

    /// Serves the waiters of every ready key, in FIFO order per key, until
    /// no key is ready (a served BLMOVE may make its destination ready).
    /// `serve` pops for one waiter from one key and writes its reply for
    /// its protocol. The caller holds the node's gate shared: pops change
    /// the store, so they never land inside another client's EXEC (lock
    /// order: gate → registry → shard).
    pub(crate) fn serve_ready(&self, store: &Store, now: u64, mut serve: Serve<'_>) {
        let mut reg = lock(&self.registry);
        loop {
            let keys = store.ready.take();
            if keys.is_empty() {
                return;
            }
            for key in keys {
                reg.serve_key(store, &key, now, &mut serve);
            }
        }
    }

    fn remove(&self, ready: &ReadyKeys, id: u64) -> Option<Waiter> {
        lock(&self.registry).remove(ready, id)
    }

    /// CLIENT UNBLOCK: ends client `id`'s wait, as if it timed out (the
    /// empty reply, which its connection turns into its timeout reply) or
    /// with Redis's `-UNBLOCKED` error; false if it does not wait on keys.
    pub(crate) fn unblock(&self, ready: &ReadyKeys, id: u64, error: bool) -> bool {
        let Some(w) = self.remove(ready, id) else {
            return false;
        };
        let reply: &'static [u8] = if error {
            b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
        } else {
            TIMED_OUT
        };
        let _ = w.reply.send(Bytes::from_static(reply));
        true
    }
}

/// What [`Blocking::unblock`] sends for "as if timed out": no reply is
/// empty, so the waiting connection knows to send its own timeout reply.
pub(crate) const TIMED_OUT: &[u8] = b"";

impl Registry {
    fn remove(&mut self, ready: &ReadyKeys, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        self.unlink(id, &w.keys);
        ready.waiting.fetch_sub(1, SeqCst);
        Some(w)
    }

    /// Takes `id` off the queues of `keys`, dropping queues left empty.
    fn unlink(&mut self, id: u64, keys: &[Box<[u8]>]) {
        for k in keys {
            let Some(q) = self.by_key.get_mut(k) else {
                continue;
            };
            if let Some(at) = q.iter().position(|&x| x == id) {
                q.remove(at);
            }
            if q.is_empty() {
                self.by_key.remove(k);
            }
        }
    }

    /// Clients blocked in XREADGROUP on `key`, which is no longer a
    /// stream, get Redis's error (plain XREAD readers stay blocked).
    fn unblock_group_readers(&mut self, store: &Store, ids: &[u64]) {
        for &id in ids {
            let grouped = self
                .waiters
                .get(&id)
                .is_some_and(|w| matches!(&w.op, Op::XRead(x) if x.in_group()));
            if grouped {
                if let Some(w) = self.remove(&store.ready, id) {
                    let msg = b"-UNBLOCKED the stream key no longer exists\r\n";
                    let _ = w.reply.send(Bytes::from_static(msg));
                }
            }
        }
    }

    /// Redis's `serveClientsBlockedOnListKey` / `…SortedSetKey`: each
    /// waiter of `key` whose command pops this key's type, in the order
    /// they blocked, gets what is there until the key is gone. A key of
    /// another type serves nobody (they stay blocked). A BLMOVE whose
    /// destination holds another type is answered WRONGTYPE and pops nothing.
    fn serve_key(&mut self, store: &Store, key: &[u8], now: u64, serve: &mut Serve<'_>) {
        let Some(queue) = self.by_key.get(key) else {
            return;
        };
        let kind = {
            let h = store.hash(key);
            store.lock(h, now).kind_of(h, key)
        };
        let ids: Vec<u64> = queue.iter().copied().collect();
        if kind != Some(Kind::Stream) {
            self.unblock_group_readers(store, &ids);
        }
        let Some(kind @ (Kind::List | Kind::ZSet | Kind::Stream)) = kind else {
            return;
        };
        for id in ids {
            let Some(w) = self.waiters.get(&id) else {
                continue;
            };
            if w.op.kind() != kind {
                continue;
            }
            if w.reply.is_closed() {
                // Its connection is gone: serve nobody who cannot receive.
                self.remove(&store.ready, id);
                continue;
            }
            let mut out = BytesMut::new();
            match serve(&w.op, key, w.proto, &mut out) {
                Ok(true) => {
                    // A pop (and a move's push) changes keys in place: a
                    // WATCH on them must see it, as for any write command.
                    store.touch(key, now);
                    if let Op::Move { dst, .. } = &w.op {
                        store.touch(dst, now);
                    }
                }
                // A stream reader waiting past what was added stays.
                Ok(false) if kind == Kind::Stream => continue,
                Ok(false) => return,
                Err(e) => e.write(&mut out),
            }
            if let Some(w) = self.remove(&store.ready, id) {
                let _ = w.reply.send(out.freeze());
            }
        }
    }
}
