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
//! turn (chains). Owned by [`super::server::Node`]; called by the server
//! loop and `commands/blocking.rs`. Lock order: registry → store shard →
//! ready keys; none is held across an `.await`. There is at most one
//! waiter per connection (its loop is suspended while it waits), so the
//! registry is bounded by the number of connections.

use super::commands::blocking::Op;
use super::error::CmdError;
use super::server::Node;
use super::value::Kind;
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::oneshot;

/// Keys that became a list or sorted set while some client waited.
/// Written under a store shard lock, so it is a leaf lock of its own.
#[derive(Default)]
pub struct ReadyKeys {
    /// Clients registered or about to register. SeqCst pairs with the
    /// registering client: it counts itself before its last look at its
    /// keys, so a write after that look sees the count and records the key.
    waiting: AtomicUsize,
    /// Whether `keys` may be non-empty: the one load per command when
    /// nobody blocks.
    pending: AtomicBool,
    /// `std::sync::Mutex`: held for a push or a swap, never across `.await`.
    keys: Mutex<Vec<Box<[u8]>>>,
}

impl ReadyKeys {
    /// Called by the store when `key` was created as a list or sorted set.
    #[inline]
    pub fn signal(&self, key: &[u8]) {
        if self.waiting.load(SeqCst) != 0 {
            self.record(key);
        }
    }

    #[cold]
    fn record(&self, key: &[u8]) {
        lock(&self.keys).push(key.into());
        self.pending.store(true, SeqCst);
    }

    /// Whether some key may be ready: check after every command.
    #[inline]
    pub fn is_pending(&self) -> bool {
        self.pending.load(SeqCst)
    }

    fn take(&self) -> Vec<Box<[u8]>> {
        let mut keys = lock(&self.keys);
        self.pending.store(false, SeqCst);
        std::mem::take(&mut *keys)
    }
}

/// A panic while holding one of these locks leaves the maps consistent
/// (every change is a single insert or removal), so poisoning is ignored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

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
pub struct Blocking {
    /// `std::sync::Mutex`: serving is short (a pop per waiter) and never
    /// awaits; one lock makes "first blocked, first served" and
    /// "each element to exactly one client" simple to keep.
    registry: Mutex<Registry>,
}

/// What [`Blocking::serve_or_wait`] did.
pub enum Attempt {
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
pub struct Ticket {
    id: u64,
    rx: oneshot::Receiver<Bytes>,
}

/// A registered waiter, held by its connection while it waits. Dropping
/// it unregisters the client, so a connection that ends while blocked
/// (closed, shut down, aborted) pops nothing.
pub struct Waiting<'a> {
    node: &'a Node,
    ticket: Ticket,
    done: bool,
}

impl<'a> Waiting<'a> {
    /// Takes charge of a ticket `node` gave.
    pub fn new(node: &'a Node, ticket: Ticket) -> Waiting<'a> {
        Waiting {
            node,
            ticket,
            done: false,
        }
    }

    /// The reply, once a push served this client.
    pub async fn served(&mut self) -> Bytes {
        let r = (&mut self.ticket.rx).await;
        self.done = true;
        // The registry drops a sender unsent only after `cancel`.
        r.unwrap_or_else(|_| Bytes::from_static(b"-ERR blocked client lost its reply\r\n"))
    }

    /// Unregisters the client: `None` if it was still waiting, else the
    /// reply it was served just before (a timeout racing a push).
    pub fn cancel(&mut self) -> Option<Bytes> {
        self.done = true;
        match self.node.blocking.remove(self.node, self.ticket.id) {
            Some(_) => None,
            None => self.ticket.rx.try_recv().ok(),
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.node.blocking.remove(self.node, self.ticket.id);
        }
    }
}

impl Blocking {
    /// Serves `op` from the first of `keys` with data (WRONGTYPE if a key
    /// before it holds another type), else registers client `id` to wait
    /// on all of them, unless `may_block` is false.
    #[allow(clippy::too_many_arguments)]
    pub fn serve_or_wait(
        &self,
        node: &Node,
        id: u64,
        proto: u8,
        keys: &[&[u8]],
        op: Op,
        may_block: bool,
        now: u64,
        out: &mut BytesMut,
    ) -> Result<Attempt, CmdError> {
        let ready = &node.store.ready;
        let mut reg = lock(&self.registry);
        // Counted before looking, so a push right after the look is recorded.
        ready.waiting.fetch_add(1, SeqCst);
        let mut found = Ok(false);
        for key in keys {
            found = op.serve(node, key, proto, now, out);
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
    pub fn serve_ready(&self, node: &Node, now: u64) {
        // Pops change the store: held shared like any command, so they never
        // land inside another client's EXEC. Lock order: gate → registry → shard.
        let _shared = node.shared();
        let mut reg = lock(&self.registry);
        loop {
            let keys = node.store.ready.take();
            if keys.is_empty() {
                return;
            }
            for key in keys {
                reg.serve_key(node, &key, now);
            }
        }
    }

    fn remove(&self, node: &Node, id: u64) -> Option<Waiter> {
        lock(&self.registry).remove(node, id)
    }
}

impl Registry {
    fn remove(&mut self, node: &Node, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        self.unlink(id, &w.keys);
        node.store.ready.waiting.fetch_sub(1, SeqCst);
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

    /// Redis's `serveClientsBlockedOnListKey` / `…SortedSetKey`: each
    /// waiter of `key` whose command pops this key's type, in the order
    /// they blocked, gets what is there until the key is gone. A key of
    /// another type serves nobody (they stay blocked). A BLMOVE whose
    /// destination holds another type is answered WRONGTYPE and pops nothing.
    fn serve_key(&mut self, node: &Node, key: &[u8], now: u64) {
        let Some(queue) = self.by_key.get(key) else {
            return;
        };
        let kind = {
            let store = &node.store;
            let h = store.hash(key);
            store.lock(h, now).kind_of(h, key)
        };
        let Some(kind @ (Kind::List | Kind::ZSet)) = kind else {
            return;
        };
        let ids: Vec<u64> = queue.iter().copied().collect();
        for id in ids {
            let Some(w) = self.waiters.get(&id) else {
                continue;
            };
            if w.op.kind() != kind {
                continue;
            }
            if w.reply.is_closed() {
                // Its connection is gone: serve nobody who cannot receive.
                self.remove(node, id);
                continue;
            }
            let mut out = BytesMut::new();
            match w.op.serve(node, key, w.proto, now, &mut out) {
                Ok(true) => {
                    // A pop (and a move's push) changes keys in place: a
                    // WATCH on them must see it, as for any write command.
                    node.store.touch(key, now);
                    if let Op::Move { dst, .. } = &w.op {
                        node.store.touch(dst, now);
                    }
                }
                Ok(false) => return,
                Err(e) => e.write(&mut out),
            }
            if let Some(w) = self.remove(node, id) {
                let _ = w.reply.send(out.freeze());
            }
        }
    }
}
