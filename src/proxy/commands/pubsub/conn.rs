//! One subscriber's connection to one node: an actor that owns the socket,
//! writes the client's (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING, and sorts
//! what the node sends back — confirmations and replies go to the request
//! they answer, messages to the client's push channel (charged to its byte
//! budget the moment they arrive).
//!
//! ```text
//!  session ─SubRequest─► queue (Mutex) ─► actor ──raw──► node
//!                                          │ frames
//!             oneshot per request ◄────────┤ confirmations / replies (in order)
//!             push channel (unbounded, ◄───┘ message / pmessage / smessage
//!              bounded by the budget)
//! ```
//!
//! The actor keeps the client's channels, patterns and shard channels as the
//! node confirmed them, so it knows how many confirmations a no-argument
//! UNSUBSCRIBE gets, releases the connection (and its place under
//! `max_pinned_per_node`) when the count reaches 0, and can subscribe to all
//! of them again on another node when its node leaves the routing (or is
//! about to: a migration whose next ring drops it) or dies. A move
//! subscribes on the new node first and closes the old connection once the
//! new node confirmed everything. Owned by `pubsub::Subscriber`; must never
//! wait on the client (only the budget bounds what it holds for it).

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::proxy::commands::clients::entry::ClientEntry;
use crate::proxy::commands::pubsub::frame::{classify, Family, FrameKind};
use crate::proxy::commands::pubsub::keyfeed::{self, may_carry, Listener};
use crate::proxy::commands::pubsub::link::{
    is_alive, is_staying, read_some, resubscribe, take_slot, write_some, Link,
};
use crate::proxy::commands::pubsub::message::{Expect, Push, SubRequest};
use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::upstream::pinned::Slot;
use crate::proxy::upstream::topology::Node;
use crate::proxy::upstream::{error_reply, UpstreamError};
use crate::proxy::Proxy;
use crate::resp::reply::is_error;

/// How often a subscriber checks that its node is still in the routing.
const ROUTING_CHECK_MS: u64 = 50;
/// Messages held for a client whose configured hard output limit is 0 (no
/// limit) are still bounded: Redis's default for its pubsub client class.
pub(crate) const PUBSUB_HARD_BYTES: usize = 32 << 20;

#[derive(Default)]
pub(super) struct Queue {
    pub(super) reqs: VecDeque<SubRequest>,
    /// The actor has ended: a new connection is needed.
    pub(super) closed: bool,
    /// Requests taken but not fully answered.
    pub(super) in_flight: usize,
}

#[derive(Default)]
pub(super) struct Shared {
    // A std Mutex: held for a push or a drain of the queue, never across .await.
    pub(super) q: Mutex<Queue>,
    /// Wakes the actor: a request was queued.
    pub(super) wake: Notify,
    /// Wakes waiters of `settled`: nothing is queued or in flight.
    pub(super) settled: Notify,
}

impl Shared {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the queue: every queued request fails with `reply`, and the
    /// waiters of `settled` are woken.
    fn close(&self, reply: Bytes) {
        let mut q = self.lock();
        q.closed = true;
        for r in q.reqs.drain(..) {
            let _ = r.reply.send(reply.clone());
        }
        drop(q);
        self.settled.notify_waiters();
    }
}

/// A request written to the node, and what its reply has gathered.
struct InFlight {
    expect: Expect,
    /// Frames still due; known once its first frame arrives.
    left: Option<usize>,
    got: BytesMut,
    reply: oneshot::Sender<Bytes>,
}

pub(super) struct Actor {
    proxy: Arc<Proxy>,
    shared: Arc<Shared>,
    proto: u8,
    push: mpsc::UnboundedSender<Push>,
    budget: Arc<ReplyBudget>,
    link: Option<Link>,
    /// The previous node's connection during a move: its messages are still
    /// relayed until the new node confirmed every subscription.
    old: Option<Link>,
    /// Confirmations of the re-subscription still due on `link`.
    swallow: usize,
    /// The node left (or is leaving) the routing, or died: move when idle.
    moving: bool,
    /// Nodes a move must not pick (the one left, ones that failed to connect).
    avoid: Vec<Arc<Node>>,
    inflight: VecDeque<InFlight>,
    /// Channels, patterns, shard channels, as the node confirmed them.
    subs: [HashSet<Bytes>; 3],
    client: u64,
    /// The client's CLIENT LIST line: its sub/psub/ssub counts.
    entry: Arc<ClientEntry>,
    /// Its place in the keyspace feed, while it holds a channel or pattern
    /// that can carry key events.
    keys: Option<Arc<Listener>>,
}

enum Wake {
    Read(Result<Vec<Bytes>, UpstreamError>),
    OldRead(Result<Vec<Bytes>, UpstreamError>),
    Wrote(std::io::Result<()>),
    Queued,
    Tick,
    Gone,
}

impl Actor {
    /// An actor for one client's subscriber connection (connected by `run`).
    pub(super) fn new(
        proxy: &Arc<Proxy>,
        shared: Arc<Shared>,
        proto: u8,
        push: mpsc::UnboundedSender<Push>,
        budget: &Arc<ReplyBudget>,
        client: u64,
        entry: &Arc<ClientEntry>,
    ) -> Actor {
        Actor {
            proxy: proxy.clone(),
            shared,
            proto,
            push,
            budget: budget.clone(),
            link: None,
            old: None,
            swallow: 0,
            moving: false,
            avoid: Vec::new(),
            inflight: VecDeque::new(),
            subs: Default::default(),
            client,
            entry: entry.clone(),
            keys: None,
        }
    }

    pub(super) async fn run(
        mut self,
        node: Arc<Node>,
        slot: Slot,
        mut gone: oneshot::Receiver<()>,
    ) {
        match Link::open(node.clone(), slot, self.proto).await {
            Ok(l) => self.link = Some(l),
            Err(e) => {
                let reply = error_reply(node.options().label.as_str(), &e);
                self.shared.close(reply);
                return;
            }
        }
        let period = Duration::from_millis(ROUTING_CHECK_MS);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            self.take_queued();
            if self.is_done() {
                return;
            }
            if self.moving && self.inflight.is_empty() && self.swallow == 0 && !self.relink().await
            {
                return;
            }
            let wake = {
                let (rd, wr) = match &mut self.link {
                    Some(Link { reader, writer, .. }) => (Some(reader), Some(writer)),
                    None => (None, None),
                };
                let wants_write = wr
                    .as_ref()
                    .is_some_and(|w| !w.out.is_empty() || w.unflushed);
                let old = self.old.as_mut().map(|l| &mut l.reader);
                tokio::select! {
                    biased;
                    _ = &mut gone => Wake::Gone,
                    r = read_some(rd) => Wake::Read(r),
                    r = read_some(old) => Wake::OldRead(r),
                    r = write_some(wr), if wants_write => Wake::Wrote(r),
                    _ = self.shared.wake.notified(), if !self.moving => Wake::Queued,
                    _ = tick.tick() => Wake::Tick,
                }
            };
            match wake {
                Wake::Gone => return,
                Wake::Read(Ok(frames)) => {
                    // Consecutive messages go to the session as one push.
                    let mut batch = BytesMut::new();
                    for f in frames {
                        let kind = classify(&f);
                        if kind == FrameKind::Message {
                            batch.extend_from_slice(&f);
                            continue;
                        }
                        if !batch.is_empty() && !self.relay(batch.split().freeze()) {
                            return;
                        }
                        if !self.on_frame(f, kind) {
                            return;
                        }
                    }
                    if !batch.is_empty() && !self.relay(batch.freeze()) {
                        return;
                    }
                }
                Wake::Read(Err(e)) => {
                    let node = self.link.as_ref().map(|l| l.node.clone());
                    let closed = matches!(e, UpstreamError::ClosedByNode);
                    self.lost(e);
                    if let (true, Some(node)) = (closed, node) {
                        if is_alive(&node).await {
                            tracing::warn!(client = self.client, node = %node.options().label, "the node closed a subscriber connection and still answers (its pubsub output buffer limit, or CLIENT KILL); closing the client");
                            let reply =
                                error_reply(&node.options().label, &UpstreamError::ClosedByNode);
                            self.end(Push::ClosedByNode, reply);
                            return;
                        }
                    }
                }
                Wake::OldRead(Ok(frames)) => {
                    let mut drained = false;
                    let mut batch = BytesMut::new();
                    for f in frames {
                        if classify(&f) == FrameKind::Message {
                            batch.extend_from_slice(&f);
                        } else {
                            // The PING of `retire_old`: nothing more is due.
                            drained = true;
                        }
                    }
                    if !batch.is_empty() && !self.relay(batch.freeze()) {
                        return;
                    }
                    if drained {
                        self.old = None;
                    }
                }
                Wake::OldRead(Err(_)) => self.old = None,
                Wake::Wrote(Ok(())) => {}
                Wake::Wrote(Err(_)) => self.lost(UpstreamError::ClosedByNode),
                Wake::Queued => {}
                Wake::Tick => {
                    let routing = self.proxy.routing.load();
                    match &self.link {
                        Some(l) if !is_staying(&routing, &l.node) => self.moving = true,
                        _ => {}
                    }
                }
            }
        }
    }

    /// Moves queued requests to the connection (not while a move waits).
    fn take_queued(&mut self) {
        if self.moving {
            return;
        }
        let Some(link) = &mut self.link else { return };
        let mut q = self.shared.lock();
        while let Some(r) = q.reqs.pop_front() {
            link.writer.out.extend_from_slice(&r.raw);
            q.in_flight += 1;
            self.inflight.push_back(InFlight {
                expect: r.expect,
                left: None,
                got: BytesMut::new(),
                reply: r.reply,
            });
        }
    }

    /// With no subscription left and nothing to answer, the connection is
    /// released (under the queue's lock, so no request slips in meanwhile).
    fn is_done(&mut self) -> bool {
        if !self.inflight.is_empty() || self.swallow > 0 {
            return false;
        }
        let mut q = self.shared.lock();
        let idle = q.reqs.is_empty();
        if idle && self.subs.iter().all(|s| s.is_empty()) {
            q.closed = true;
        }
        let closed = q.closed;
        drop(q);
        if idle {
            self.shared.settled.notify_waiters();
        }
        closed
    }

    /// Handles one frame (not a message) of the current connection; false
    /// ends the actor.
    fn on_frame(&mut self, frame: Bytes, kind: FrameKind) -> bool {
        if self.swallow > 0 && matches!(kind, FrameKind::Confirm(..)) {
            self.swallow -= 1;
            if self.swallow == 0 {
                self.retire_old();
            }
            return true;
        }
        let Some(front) = self.inflight.front_mut() else {
            tracing::debug!(
                client = self.client,
                "stray frame on a subscriber connection"
            );
            return true;
        };
        let left = front.left.get_or_insert_with(|| match front.expect {
            Expect::Args(n) => n.max(1),
            Expect::All(f) => self.subs[f.index()].len().max(1),
            Expect::One => 1,
        });
        let mut key_event = None;
        if let FrameKind::Confirm(family, on, Some(channel)) = kind {
            let held = match family {
                Family::Channel => Some(&self.proxy.subscriptions.channels),
                Family::Pattern => Some(&self.proxy.subscriptions.patterns),
                Family::Shard => None,
            };
            let set = &mut self.subs[family.index()];
            if may_carry(family, &channel) {
                key_event = Some((family, channel.clone(), on));
            }
            if on {
                if let (Some(h), false) = (held, set.contains(&channel)) {
                    h.add(&channel);
                }
                set.insert(channel);
            } else if let (true, Some(h)) = (set.remove(&channel), held) {
                h.remove(&channel);
            }

            self.entry.subscriptions[family.index()].store(set.len(), Ordering::Relaxed);
        }
        front.got.extend_from_slice(&frame);
        *left -= 1;
        let answered = *left == 0 || is_error(&frame);
        // In the feed before the client hears of it.
        if let Some((family, name, on)) = key_event {
            self.key_events(family, &name, on);
        }
        if answered {
            if let Some(done) = self.inflight.pop_front() {
                let _ = done.reply.send(done.got.freeze());
            }
            self.shared.lock().in_flight -= 1;
        }
        true
    }

    /// Keeps the client's place in the keyspace feed in step.
    fn key_events(&mut self, family: Family, name: &Bytes, on: bool) {
        let (p, c) = (&self.proxy, self.client);
        let make = || Listener::new(c, self.proto, self.push.clone(), self.budget.clone());
        let at = self.link.as_ref().map(|l| l.node.spec.addr.as_str());
        keyfeed::follow_subscription(&p.keyfeed, &mut self.keys, make, at, (family, name, on));
    }

    /// The new node confirmed every subscription: the old connection goes
    /// once it delivered what its node sent before now. A PING marks that
    /// point (nothing else is in flight on it), so a message the old node
    /// sent just before the new subscription took effect — which the new
    /// node therefore did not send — is still relayed, not lost in the
    /// socket's buffer.
    fn retire_old(&mut self) {
        let ping = b"*1\r\n$4\r\nPING\r\n";
        let sent = self
            .old
            .as_mut()
            .is_some_and(|o| o.writer.try_write_all(ping));
        if !sent {
            self.old = None;
        }
    }

    /// Hands a message to the session, charged to the client's budget;
    /// false when the client is gone or must be closed.
    fn relay(&mut self, frame: Bytes) -> bool {
        let n = frame.len();
        if self.budget.limits().hard_bytes == 0 && self.budget.owed() + n > PUBSUB_HARD_BYTES {
            let _ = self.push.send(Push::OverLimit);
            return false;
        }
        self.budget.charge(n);
        if self.push.send(Push::Message(frame)).is_err() {
            self.budget.release(n);
            return false;
        }
        true
    }

    /// The connection failed: what it was asked fails, naming the node, and
    /// the subscriptions move to another node.
    fn lost(&mut self, e: UpstreamError) {
        if let Some(l) = self.link.take() {
            tracing::info!(client = self.client, node = %l.label, error = %e, "subscriber connection lost");
            let reply = error_reply(&l.label, &e);
            let n = self.inflight.len();
            for f in self.inflight.drain(..) {
                let _ = f.reply.send(reply.clone());
            }
            self.shared.lock().in_flight -= n;
            self.swallow = 0;
            self.moving = true;
            self.avoid.push(l.node.clone());
        }
    }

    /// Subscribes to everything again on another node, then lets the old
    /// connection go once the new node confirmed it all. False (and the
    /// client is closed) when no node can take the subscriptions.
    async fn relink(&mut self) -> bool {
        self.moving = false;
        let routing = self.proxy.routing.load_full();
        if let Some(l) = &self.link {
            self.avoid.push(l.node.clone());
        }
        let (resub, n) = resubscribe(&self.subs);
        loop {
            let (slot, node) = match take_slot(&routing, &self.avoid, self.client) {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(client = self.client, error = %e, "subscriptions could not be moved; closing the client");
                    let reply =
                        Bytes::from_static(b"-ERR subscriptions lost: no node can take them\r\n");
                    return self.end(Push::Lost, reply);
                }
            };
            match Link::open(node.clone(), slot, self.proto).await {
                Ok(mut l) => {
                    tracing::info!(client = self.client, node = %l.label, subscriptions = n, "subscriptions moved");
                    l.writer.out = resub;
                    self.keys.iter().for_each(|k| k.place(&l.node.spec.addr));
                    self.old = self.link.take();
                    self.link = Some(l);
                    self.swallow = n;
                    if n == 0 {
                        self.old = None;
                    }
                    self.avoid.clear();
                    return true;
                }
                Err(_) => self.avoid.push(node),
            }
        }
    }

    /// Ends the subscriber: queued requests fail with `reply` and the client
    /// is closed (`why`).
    fn end(&mut self, why: Push, reply: Bytes) -> bool {
        let _ = self.push.send(why);
        self.shared.close(reply);
        false
    }
}

impl Drop for Actor {
    /// However the actor ends, its channels and patterns no longer count.
    fn drop(&mut self) {
        for n in &self.entry.subscriptions {
            n.store(0, Ordering::Relaxed);
        }
        self.proxy.keyfeed.remove(self.client);
        let held = &self.proxy.subscriptions;
        for c in &self.subs[Family::Channel.index()] {
            held.channels.remove(c);
        }
        for p in &self.subs[Family::Pattern.index()] {
            held.patterns.remove(p);
        }
    }
}
