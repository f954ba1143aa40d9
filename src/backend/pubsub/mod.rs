//! Pub/sub on the node: who listens to what, and delivery.
//!
//! [`Hub`] (one per node) maps channels, patterns and shard channels to the
//! mailboxes of the connections subscribed to them; PUBLISH and SPUBLISH
//! walk it and append the message to each mailbox (`mailbox.rs`), which the
//! subscriber's serve loop writes out between replies. [`Subscriber`] is one
//! connection's side: its subscriptions in order, and on drop (RESET,
//! disconnect, even a panic) it leaves everything it joined.
//!
//! Called by `commands/pubsub.rs` (the commands), `server/` (the serve
//! loop waits on the mailbox) and INFO. Never blocks on a subscriber and
//! never holds a lock across an `.await`.

pub(crate) mod limits;
pub(crate) mod mailbox;

use bytes::Bytes;
use indexmap::{IndexMap, IndexSet};
use mailbox::{Limits, Mailbox, PushKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The three subscription namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// SUBSCRIBE / PUBLISH.
    Channel,
    /// PSUBSCRIBE: glob patterns over the channels PUBLISH names.
    Pattern,
    /// SSUBSCRIBE / SPUBLISH: shard channels, a namespace of their own.
    Shard,
}

/// The connections listening on one name, by CLIENT ID.
type Audience = IndexMap<u64, Arc<Mailbox>>;

#[derive(Default)]
struct Registry {
    channels: HashMap<Bytes, Audience>,
    /// Walked in full by every PUBLISH, so kept compact.
    patterns: IndexMap<Bytes, Audience>,
    shard: HashMap<Bytes, Audience>,
}

/// Every subscription on the node.
#[derive(Default)]
pub(crate) struct Hub {
    /// A std mutex: held for a lookup or a fan-out, never across an
    /// `.await`. The node usually runs on one thread, where it is never
    /// contended.
    reg: Mutex<Registry>,
    /// Channel and pattern subscriptions, so PUBLISH with no subscriber at
    /// all answers 0 without taking the lock.
    global: AtomicUsize,
    /// Shard channel subscriptions, the same for SPUBLISH.
    sharded: AtomicUsize,
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.reg.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn counter(&self, space: Space) -> &AtomicUsize {
        match space {
            Space::Shard => &self.sharded,
            _ => &self.global,
        }
    }

    fn join(&self, space: Space, name: Bytes, mailbox: &Arc<Mailbox>) {
        let mut reg = self.lock();
        let id = mailbox.id;
        let audience = match space {
            Space::Channel => reg.channels.entry(name).or_default(),
            Space::Pattern => reg.patterns.entry(name).or_default(),
            Space::Shard => reg.shard.entry(name).or_default(),
        };
        if audience.insert(id, mailbox.clone()).is_none() {
            self.counter(space).fetch_add(1, Relaxed);
        }
    }

    fn leave(&self, space: Space, names: &[Bytes], id: u64) {
        let mut reg = self.lock();
        for name in names {
            // An emptied name is removed, so PUBSUB CHANNELS and the maps
            // only hold names someone listens to (as Redis frees them).
            let left = match space {
                Space::Channel => leave_map(&mut reg.channels, name, id),
                Space::Shard => leave_map(&mut reg.shard, name, id),
                Space::Pattern => match reg.patterns.get_mut(name) {
                    Some(a) => {
                        let left = a.swap_remove(&id).is_some();
                        if a.is_empty() {
                            reg.patterns.swap_remove(name);
                        }
                        left
                    }
                    None => false,
                },
            };
            if left {
                self.counter(space).fetch_sub(1, Relaxed);
            }
        }
    }

    /// PUBLISH (`sharded` false) or SPUBLISH: appends the message to every
    /// subscriber's mailbox and returns how many deliveries were made (a
    /// connection subscribed to the channel and to two matching patterns
    /// receives it three times, as in Redis).
    pub(crate) fn publish(
        &self,
        sharded: bool,
        channel: &[u8],
        payload: &[u8],
        limits: Limits,
        now_ms: u64,
    ) -> usize {
        let space = if sharded {
            Space::Shard
        } else {
            Space::Channel
        };
        if self.counter(space).load(Relaxed) == 0 {
            return 0;
        }
        let reg = self.lock();
        let mut receivers = 0;
        let (map, kind) = match sharded {
            true => (&reg.shard, PushKind::SMessage),
            false => (&reg.channels, PushKind::Message),
        };
        if let Some(audience) = map.get(channel) {
            for mailbox in audience.values() {
                mailbox.deliver(kind, b"", channel, payload, limits, now_ms);
            }
            receivers += audience.len();
        }
        if !sharded {
            for (pattern, audience) in &reg.patterns {
                if crate::glob::matches(pattern, channel) {
                    for mailbox in audience.values() {
                        mailbox.deliver(
                            PushKind::PMessage,
                            pattern,
                            channel,
                            payload,
                            limits,
                            now_ms,
                        );
                    }
                    receivers += audience.len();
                }
            }
        }
        receivers
    }

    /// The channels (or shard channels) someone listens to, matching
    /// `pattern` if given (PUBSUB CHANNELS / SHARDCHANNELS).
    pub(crate) fn names(&self, space: Space, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let reg = self.lock();
        let keys: Box<dyn Iterator<Item = &Bytes>> = match space {
            Space::Channel => Box::new(reg.channels.keys()),
            Space::Shard => Box::new(reg.shard.keys()),
            Space::Pattern => Box::new(reg.patterns.keys()),
        };
        keys.filter(|k| pattern.is_none_or(|p| crate::glob::matches(p, k)))
            .cloned()
            .collect()
    }

    /// How many connections listen on `name` (PUBSUB NUMSUB / SHARDNUMSUB).
    pub(crate) fn listeners(&self, space: Space, name: &[u8]) -> usize {
        let reg = self.lock();
        let audience = match space {
            Space::Channel => reg.channels.get(name),
            Space::Shard => reg.shard.get(name),
            Space::Pattern => reg.patterns.get(name),
        };
        audience.map_or(0, |a| a.len())
    }

    /// Distinct names with at least one listener (INFO `pubsub_channels`,
    /// `pubsub_patterns`, `pubsubshard_channels`; PUBSUB NUMPAT).
    pub(crate) fn count(&self, space: Space) -> usize {
        let reg = self.lock();
        match space {
            Space::Channel => reg.channels.len(),
            Space::Pattern => reg.patterns.len(),
            Space::Shard => reg.shard.len(),
        }
    }
}

fn leave_map(map: &mut HashMap<Bytes, Audience>, name: &Bytes, id: u64) -> bool {
    let Some(audience) = map.get_mut(name) else {
        return false;
    };
    let left = audience.swap_remove(&id).is_some();
    if audience.is_empty() {
        map.remove(name);
    }
    left
}

/// One connection's subscriptions. Created by its first (P|S)SUBSCRIBE and
/// kept until RESET or disconnect, so messages already in its mailbox are
/// still written after it unsubscribes (as Redis writes what is already in
/// its output buffer).
pub(crate) struct Subscriber {
    hub: Arc<Hub>,
    /// Where publishers put this connection's messages.
    pub(crate) mailbox: Arc<Mailbox>,
    /// In subscription order: a bare UNSUBSCRIBE confirms them in this
    /// order (Redis uses its hash table's order, which no client relies on).
    channels: IndexSet<Bytes>,
    patterns: IndexSet<Bytes>,
    shard: IndexSet<Bytes>,
}

impl Subscriber {
    /// A connection with no subscriptions yet.
    pub(crate) fn new(hub: Arc<Hub>, id: u64, proto: u8) -> Subscriber {
        Subscriber {
            hub,
            mailbox: Arc::new(Mailbox::new(id, proto)),
            channels: IndexSet::new(),
            patterns: IndexSet::new(),
            shard: IndexSet::new(),
        }
    }

    fn set(&mut self, space: Space) -> &mut IndexSet<Bytes> {
        match space {
            Space::Channel => &mut self.channels,
            Space::Pattern => &mut self.patterns,
            Space::Shard => &mut self.shard,
        }
    }

    /// Subscribes to `name`; false if already subscribed.
    pub(crate) fn subscribe(&mut self, space: Space, name: &[u8]) -> bool {
        if self.set(space).contains(name) {
            return false;
        }
        let name = Bytes::copy_from_slice(name);
        self.set(space).insert(name.clone());
        self.hub.join(space, name, &self.mailbox);
        true
    }

    /// Unsubscribes from `name`; false if it was not subscribed.
    pub(crate) fn unsubscribe(&mut self, space: Space, name: &[u8]) -> bool {
        let Some(name) = self.set(space).shift_remove_full(name).map(|(_, n)| n) else {
            return false;
        };
        self.hub.leave(space, &[name], self.mailbox.id);
        true
    }

    /// The names subscribed in `space`, in subscription order.
    pub(crate) fn names(&self, space: Space) -> Vec<Bytes> {
        match space {
            Space::Channel => self.channels.iter().cloned().collect(),
            Space::Pattern => self.patterns.iter().cloned().collect(),
            Space::Shard => self.shard.iter().cloned().collect(),
        }
    }

    /// The count a confirmation reports: channels and patterns together,
    /// shard channels on their own (Redis 7.0).
    pub(crate) fn count(&self, space: Space) -> usize {
        match space {
            Space::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }

    /// `(channels, patterns, shard channels)`, for CLIENT INFO.
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        (self.channels.len(), self.patterns.len(), self.shard.len())
    }

    /// Whether any subscription is left: the connection is in subscribe
    /// mode (restricted in RESP2) exactly while this holds.
    pub(crate) fn is_active(&self) -> bool {
        self.channels.len() + self.patterns.len() + self.shard.len() > 0
    }
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("id", &self.mailbox.id)
            .field("channels", &self.channels)
            .field("patterns", &self.patterns)
            .field("shard", &self.shard)
            .finish()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let id = self.mailbox.id;
        for space in [Space::Channel, Space::Pattern, Space::Shard] {
            let names: Vec<Bytes> = self.set(space).drain(..).collect();
            if !names.is_empty() {
                self.hub.leave(space, &names, id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    fn drained(s: &Subscriber) -> String {
        let mut out = BytesMut::new();
        s.mailbox.take(&mut out, usize::MAX);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn publish_reaches_channels_and_patterns_and_counts_deliveries() {
        let hub = Arc::new(Hub::default());
        let (mut a, mut b) = (
            Subscriber::new(hub.clone(), 1, 2),
            Subscriber::new(hub.clone(), 2, 3),
        );
        assert!(a.subscribe(Space::Channel, b"news"));
        assert!(!a.subscribe(Space::Channel, b"news"));
        a.subscribe(Space::Pattern, b"n*");
        b.subscribe(Space::Pattern, b"n*");
        b.subscribe(Space::Shard, b"news");
        let l = Limits::DEFAULT;
        assert_eq!(hub.publish(false, b"news", b"hi", l, 0), 3);
        assert_eq!(hub.publish(true, b"news", b"s", l, 0), 1);
        assert_eq!(hub.publish(false, b"other", b"x", l, 0), 0);
        assert_eq!(
            drained(&a),
            "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n\
             *4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!(
            drained(&b),
            ">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n\
             >3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$1\r\ns\r\n"
        );
        assert_eq!(hub.count(Space::Pattern), 1);
        assert_eq!(hub.listeners(Space::Pattern, b"n*"), 2);
        assert_eq!(a.count(Space::Channel), 2);
        assert_eq!(b.count(Space::Shard), 1);
    }

    #[test]
    fn dropping_a_subscriber_leaves_everything() {
        let hub = Arc::new(Hub::default());
        let mut a = Subscriber::new(hub.clone(), 1, 2);
        a.subscribe(Space::Channel, b"c");
        a.subscribe(Space::Pattern, b"*");
        a.subscribe(Space::Shard, b"s");
        assert!(a.unsubscribe(Space::Channel, b"c"));
        assert!(!a.unsubscribe(Space::Channel, b"c"));
        a.subscribe(Space::Channel, b"d");
        drop(a);
        for space in [Space::Channel, Space::Pattern, Space::Shard] {
            assert_eq!(hub.count(space), 0);
        }
        assert_eq!(hub.global.load(Relaxed) + hub.sharded.load(Relaxed), 0);
        assert_eq!(hub.publish(false, b"d", b"x", Limits::DEFAULT, 0), 0);
    }
}
