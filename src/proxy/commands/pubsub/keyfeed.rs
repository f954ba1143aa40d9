//! Keyspace notifications through the proxy. A node publishes the events
//! of its own keys (`__keyspace@<db>__:<key>`, `__keyevent@<db>__:<event>`)
//! to its own subscribers only, and a subscriber of the proxy listens on
//! one node: alone, it would hear the events of a tenth of the keys.
//!
//! So while some subscriber holds a channel or pattern that can match those
//! channels (a [`Listener`]), the feed keeps one connection to every
//! primary of the routing, `PSUBSCRIBE`d to both namespaces, and hands each
//! event to every listener placed on another node, framed as its node would
//! frame it (`message` per matching channel, `pmessage` per matching
//! pattern, RESP2 or RESP3), charged to the listener's byte budget. The
//! listener's own node delivers the events of its keys itself, so each
//! event reaches each listener once.
//!
//! ```text
//!  node1 ──pmessage──► feed link 1 ─┐
//!  node2 ──pmessage──► feed link 2 ─┼─► dispatch ─► listeners not on that node
//!  …                                ┘               (their push channels)
//! ```
//!
//! A subscription that can match is confirmed to the client only once the
//! feed is subscribed on every primary (`ensure`), so an event of a write
//! sent after the confirmation is never missed. The links follow the
//! routing (a node added or promoted is subscribed within
//! [`FOLLOW_MS`]) and close once no listener is left. Events of different
//! nodes (different keys) have no order between them, as in Redis Cluster.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use crate::proxy::commands::pubsub::conn::PUBSUB_HARD_BYTES;
use crate::proxy::commands::pubsub::frame::{text, Family};
use crate::proxy::commands::pubsub::message::Push;
use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::upstream::{connect, UpstreamOptions};
use crate::proxy::Proxy;
use crate::resp::encode;
use crate::resp::reply::{elements, ReplyFramer};

/// How often the links are matched against the routing.
const FOLLOW_MS: u64 = 100;
/// Pause before a failed link connects again.
const RETRY_MS: u64 = 200;
/// How long the links stay after `ensure` without a listener (the
/// subscription it prepared is about to be confirmed).
const GRACE_MS: u64 = 3_000;
/// The two namespaces.
const SPACES: [&[u8]; 2] = [b"__keyspace@", b"__keyevent@"];
/// What a link subscribes to.
const PATTERNS: [&[u8]; 2] = [b"__keyspace@*__:*", b"__keyevent@*__:*"];

/// Whether a channel (or any channel a pattern matches) may be in one of
/// the two namespaces. For a pattern this looks at its literal prefix
/// only, so it may say yes for a pattern that can never match: such a
/// subscriber is offered events its patterns then reject.
pub(crate) fn may_carry(family: Family, name: &[u8]) -> bool {
    match family {
        Family::Channel => SPACES.iter().any(|s| name.starts_with(s)),
        Family::Pattern => {
            let lit = name
                .iter()
                .position(|c| b"*?[\\".contains(c))
                .map_or(name, |i| &name[..i]);
            SPACES
                .iter()
                .any(|s| s.starts_with(lit) || lit.starts_with(s))
        }
        Family::Shard => false,
    }
}

/// Whether the feed hears what is published to `channel` (its patterns
/// match it).
pub(crate) fn is_fed(channel: &[u8]) -> bool {
    PATTERNS.iter().any(|p| crate::glob::matches(p, channel))
}

/// One subscriber's side of the feed: where it listens and what it holds
/// that can match.
pub(crate) struct Listener {
    client: u64,
    proto: u8,
    push: mpsc::UnboundedSender<Push>,
    budget: Arc<ReplyBudget>,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// The node that delivers this subscriber's own events.
    placed: String,
    channels: HashSet<Bytes>,
    patterns: HashSet<Bytes>,
}

impl Listener {
    pub(crate) fn new(
        client: u64,
        proto: u8,
        push: mpsc::UnboundedSender<Push>,
        budget: Arc<ReplyBudget>,
    ) -> Listener {
        Listener {
            client,
            proto,
            push,
            budget,
            held: Mutex::default(),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node its subscriber connection is on now.
    pub(crate) fn place(&self, addr: &str) {
        addr.clone_into(&mut self.held().placed);
    }

    /// A confirmed (un)subscription; true while it holds anything.
    pub(crate) fn update(&self, family: Family, name: &Bytes, on: bool) -> bool {
        let mut h = self.held();
        let set = match family {
            Family::Channel => &mut h.channels,
            Family::Pattern => &mut h.patterns,
            Family::Shard => return !(h.channels.is_empty() && h.patterns.is_empty()),
        };
        if on {
            set.insert(name.clone());
        } else {
            set.remove(name);
        }
        !(h.channels.is_empty() && h.patterns.is_empty())
    }

    /// The frames `channel`'s event from `from` owes this subscriber
    /// (none when its own node delivers it).
    fn frames(&self, from: &str, channel: &[u8], payload: &[u8]) -> Option<Bytes> {
        let h = self.held();
        if h.placed == from {
            return None;
        }
        let mut out = BytesMut::new();
        let head: &[u8] = if self.proto >= 3 { b">" } else { b"*" };
        if h.channels.contains(channel) {
            out.extend_from_slice(head);
            out.extend_from_slice(b"3\r\n");
            encode::bulk(&mut out, b"message");
            encode::bulk(&mut out, channel);
            encode::bulk(&mut out, payload);
        }
        for p in h.patterns.iter() {
            if crate::glob::matches(p, channel) {
                out.extend_from_slice(head);
                out.extend_from_slice(b"4\r\n");
                encode::bulk(&mut out, b"pmessage");
                encode::bulk(&mut out, p);
                encode::bulk(&mut out, channel);
                encode::bulk(&mut out, payload);
            }
        }
        (!out.is_empty()).then(|| out.freeze())
    }

    /// How many receivers `channel`'s message from `from` counts here (a
    /// channel and each matching pattern, as Redis counts them).
    fn receivers(&self, from: &str, channel: &[u8]) -> usize {
        let h = self.held();
        if h.placed == from {
            return 0;
        }
        let patterns = h
            .patterns
            .iter()
            .filter(|p| crate::glob::matches(p, channel));
        usize::from(h.channels.contains(channel)) + patterns.count()
    }

    /// Hands frames to the session, charged to the budget, as the
    /// subscriber's own connection does.
    fn deliver(&self, frames: Bytes) {
        let n = frames.len();
        if self.budget.limits().hard_bytes == 0 && self.budget.owed() + n > PUBSUB_HARD_BYTES {
            let _ = self.push.send(Push::OverLimit);
            return;
        }
        self.budget.charge(n);
        if self.push.send(Push::Message(frames)).is_err() {
            self.budget.release(n);
        }
    }
}

/// Keeps a subscriber's place in the feed (`slot`) in step with one
/// confirmed (un)subscription that can carry key events: it joins on its
/// first, leaves after its last; `at` is the node it listens on.
pub(super) fn follow_subscription(
    feed: &KeyFeed,
    slot: &mut Option<Arc<Listener>>,
    make: impl FnOnce() -> Listener,
    at: Option<&str>,
    (family, name, on): (Family, &Bytes, bool),
) {
    let l = slot.get_or_insert_with(|| {
        let l = Arc::new(make());
        feed.add(&l);
        l
    });
    if let Some(at) = at {
        l.place(at);
    }
    if !l.update(family, name, on) {
        feed.remove(l.client);
        *slot = None;
    }
}

/// The proxy's feed: its listeners and one link per primary.
#[derive(Default)]
pub(crate) struct KeyFeed {
    listeners: Mutex<HashMap<u64, Arc<Listener>>>,
    links: Mutex<HashMap<String, Link>>,
    /// Links are kept at least until then.
    wanted_until: Mutex<Option<Instant>>,
    started: std::sync::atomic::AtomicBool,
}

/// One node's link: its task, and whether its PSUBSCRIBE was confirmed.
struct Link {
    task: tokio::task::JoinHandle<()>,
    ready: watch::Receiver<bool>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KeyFeed {
    fn listeners(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Listener>>> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<String, Link>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn add(&self, l: &Arc<Listener>) {
        self.listeners().insert(l.client, l.clone());
    }

    pub(crate) fn remove(&self, client: u64) {
        self.listeners().remove(&client);
    }

    /// Subscribes the feed on every primary (if it is not already) and
    /// waits, at most `within`, until each confirmed. Called before a
    /// subscription that can match goes to its node.
    pub(crate) async fn ensure(proxy: &Arc<Proxy>, within: Duration) {
        let feed = &proxy.keyfeed;
        *feed.wanted_until.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Instant::now() + Duration::from_millis(GRACE_MS));
        if !feed
            .started
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tokio::spawn(follow(Arc::downgrade(proxy)));
        }
        sync(proxy);
        let waits: Vec<watch::Receiver<bool>> =
            feed.links().values().map(|l| l.ready.clone()).collect();
        let all = async {
            for mut r in waits {
                let _ = r.wait_for(|ready| *ready).await;
            }
        };
        if tokio::time::timeout(within, all).await.is_err() {
            tracing::warn!("keyspace notifications: a node's feed is not subscribed yet; its events reach other nodes' subscribers once it is");
        }
    }

    /// For a PUBLISH to `channel` on node `at`: whether the feed's own
    /// subscription there counted as a receiver (0 or 1), and how many
    /// receivers the feed hands the message to on the other nodes.
    pub(crate) fn receivers(&self, at: &str, channel: &[u8]) -> (usize, usize) {
        let ours = self.links().get(at).is_some_and(|l| *l.ready.borrow());
        let ls: Vec<Arc<Listener>> = self.listeners().values().cloned().collect();
        let others = ls.iter().map(|l| l.receivers(at, channel)).sum();
        (usize::from(ours), others)
    }

    /// Hands one event of node `from` to every listener it is owed to.
    fn dispatch(&self, from: &str, channel: &[u8], payload: &[u8]) {
        let ls: Vec<Arc<Listener>> = self.listeners().values().cloned().collect();
        for l in ls {
            if let Some(f) = l.frames(from, channel, payload) {
                l.deliver(f);
            }
        }
    }
}

/// Matches the links with the routing's primaries, for as long as the
/// proxy lives.
async fn follow(proxy: Weak<Proxy>) {
    loop {
        tokio::time::sleep(Duration::from_millis(FOLLOW_MS)).await;
        let Some(p) = proxy.upgrade() else { return };
        sync(&p);
    }
}

/// One link per primary while wanted, none otherwise.
fn sync(proxy: &Arc<Proxy>) {
    let feed = &proxy.keyfeed;
    let grace = feed
        .wanted_until
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_some_and(|t| Instant::now() < t);
    let wanted = grace || !feed.listeners().is_empty();
    let mut links = feed.links();
    if !wanted {
        links.clear();
        return;
    }
    let routing = proxy.routing.load();
    let nodes: HashMap<String, UpstreamOptions> = routing
        .primaries()
        .map(|n| (n.spec.addr.clone(), n.options().clone()))
        .collect();
    links.retain(|addr, _| nodes.contains_key(addr));
    for (addr, opts) in nodes {
        if links.contains_key(&addr) {
            continue;
        }
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(run(Arc::downgrade(proxy), addr.clone(), opts, tx));
        links.insert(addr, Link { task, ready: rx });
    }
}

/// One node's link: connects, subscribes, dispatches, and connects again
/// when the connection fails.
async fn run(proxy: Weak<Proxy>, addr: String, opts: UpstreamOptions, ready: watch::Sender<bool>) {
    let opts = UpstreamOptions {
        proto: 2,
        pinned: true,
        ..opts
    };
    loop {
        if let Err(e) = listen(&proxy, &addr, &opts, &ready).await {
            tracing::debug!(node = %opts.label, error = %e, "keyspace feed link lost");
        }
        ready.send_replace(false);
        if proxy.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
    }
}

async fn listen(
    proxy: &Weak<Proxy>,
    addr: &str,
    opts: &UpstreamOptions,
    ready: &watch::Sender<bool>,
) -> Result<(), String> {
    let mut sock = connect(opts).await.map_err(|e| e.to_string())?;
    let mut sub = BytesMut::new();
    encode::command(&mut sub, &[b"PSUBSCRIBE", PATTERNS[0], PATTERNS[1]]);
    sock.write_all(&sub).await.map_err(|e| e.to_string())?;
    let mut framer = ReplyFramer::new(opts.max_bulk_len);
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut confirmed = 0;
    loop {
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        match sock.read_buf(&mut buf).await {
            Ok(0) => return Err("closed by the node".into()),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
        let Some(p) = proxy.upgrade() else {
            return Ok(());
        };
        while let Some(n) = framer.next(&buf).map_err(|e| e.to_string())? {
            let frame = buf.split_to(n).freeze();
            let Some(els) = elements(&frame) else {
                return Err("an unexpected reply".into());
            };
            let part = |i: usize| els.get(i).and_then(|r| text(&frame[r.clone()]));
            match part(0) {
                Some(b"psubscribe") => {
                    confirmed += 1;
                    if confirmed == PATTERNS.len() {
                        ready.send_replace(true);
                    }
                }
                Some(b"pmessage") => {
                    if let (Some(ch), Some(msg)) = (part(2), part(3)) {
                        p.keyfeed.dispatch(addr, ch, msg);
                    }
                }
                _ => return Err("an unexpected reply".into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_can_carry_key_events() {
        let yes = [
            (Family::Pattern, "*"),
            (Family::Pattern, "__key*"),
            (Family::Pattern, "__keyspace@0__:*"),
            (Family::Pattern, "_?keyevent*"),
            (Family::Channel, "__keyevent@0__:del"),
            (Family::Channel, "__keyspace@3__:user:1"),
        ];
        let no = [
            (Family::Pattern, "news.*"),
            (Family::Pattern, "__keyx*"),
            (Family::Channel, "__keyspace"),
            (Family::Channel, "news"),
            (Family::Shard, "__keyspace@0__:a"),
        ];
        for (f, n) in yes {
            assert!(may_carry(f, n.as_bytes()), "{n}");
        }
        for (f, n) in no {
            assert!(!may_carry(f, n.as_bytes()), "{n}");
        }
    }
}
