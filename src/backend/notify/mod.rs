//! Keyspace notifications, as Redis 7.0's `notify.c`: with
//! `notify-keyspace-events` set, every change a command makes is published
//! to the node's own subscribers on `__keyspace@0__:<key>` (the event as
//! message) and `__keyevent@0__:<event>` (the key as message).
//!
//! The command runner calls [`before`] and [`after`] around each handler:
//! `before` notes what a few commands' events depend on (whether a key
//! existed, a member's score, a stream's length), `after` derives the
//! command's events from its name, arguments and reply (`events.rs`) and
//! publishes them together with the events the keyspace raised itself
//! (`keyspace::notices`: `expired`, `evicted`, `new`, implicitly created
//! consumers) in Redis's order. The expiry sweep calls [`flush`].
//!
//! With the flags empty (the default) `before` is one relaxed load and
//! returns `None`, and nothing else runs. Never blocks on a subscriber.

mod events;
mod pre;
mod reply;

use crate::backend::blocking::Op;
use crate::backend::commands::Command;
use crate::backend::keyspace::notices::{self, Notice};
use crate::backend::node::Node;
use crate::backend::value::stream::XReadOp;
pub(crate) use pre::Pre;

/// The flag characters in the order Redis shows them (after `A`).
const CLASSES: [(u32, u8); 11] = [
    (notices::GENERIC, b'g'),
    (notices::STRING, b'$'),
    (notices::LIST, b'l'),
    (notices::SET, b's'),
    (notices::HASH, b'h'),
    (notices::ZSET, b'z'),
    (notices::EXPIRED, b'x'),
    (notices::EVICTED, b'e'),
    (notices::STREAM, b't'),
    (notices::MODULE, b'd'),
    (notices::NEW, b'n'),
];

/// Redis's `keyspaceEventsStringToFlags`: `None` on an unknown character.
pub(crate) fn parse_flags(text: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in text {
        flags |= match c {
            b'A' => notices::ALL,
            b'K' => notices::KEYSPACE,
            b'E' => notices::KEYEVENT,
            b'm' => notices::KEY_MISS,
            _ => CLASSES.iter().find(|(_, ch)| *ch == c)?.0,
        };
    }
    Some(flags)
}

/// Redis's `keyspaceEventsFlagsToString`: what CONFIG GET shows.
pub(crate) fn flags_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & notices::ALL == notices::ALL {
        // Redis shows `A` alone, even with `n` set.
        s.push('A');
    } else {
        for (bit, c) in CLASSES {
            if flags & bit != 0 {
                s.push(c as char);
            }
        }
    }
    for (bit, c) in [
        (notices::KEYSPACE, 'K'),
        (notices::KEYEVENT, 'E'),
        (notices::KEY_MISS, 'm'),
    ] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// CONFIG SET's check: the canonical text, or Redis's reason.
pub(crate) fn normalise(value: &[u8]) -> Result<String, String> {
    parse_flags(value)
        .map(flags_to_string)
        .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
}

/// What the command runner keeps between [`before`] and [`after`]: `None`
/// while notifications are off.
pub(crate) fn before(node: &Node, cmd: &Command, args: &[&[u8]], now: u64) -> Option<Pre> {
    let flags = node.store.hooks.notices.flags();
    if flags == 0 {
        return None;
    }
    Some(pre::capture(node, cmd, args, now))
}

/// Publishes the events of `cmd`, which just ran and wrote `reply`, after
/// the ones the keyspace raised while it ran.
pub(crate) fn after(node: &Node, cmd: &Command, args: &[&[u8]], reply: &[u8], pre: Pre, now: u64) {
    let raised = node.store.hooks.notices.take();
    let own = events::derive(node, cmd, args, reply, &pre, now);
    publish_all(node, merge(raised, own), now);
}

/// Publishes what the keyspace raised outside any command (active expiry).
pub(crate) fn flush(node: &Node, now: u64) {
    if node.store.hooks.notices.flags() == 0 {
        return;
    }
    publish_all(node, node.store.hooks.notices.take(), now);
}

/// Publishes the events of a blocked client served from `key` (its pop,
/// and BLMOVE's push), with what the keyspace raised meanwhile.
pub(crate) fn after_served(node: &Node, op: &Op, key: &[u8], now: u64) {
    if node.store.hooks.notices.flags() == 0 {
        return;
    }
    let raised = node.store.hooks.notices.take();
    let own = events::served_op(node, op, key, now);
    publish_all(node, merge(raised, own), now);
}

/// Whether a blocked XREADGROUP served from `key` is about to create its
/// consumer (false while notifications are off).
pub(crate) fn lacks_consumer(node: &Node, x: &XReadOp, key: &[u8], now: u64) -> bool {
    if node.store.hooks.notices.flags() == 0 {
        return false;
    }
    x.group
        .as_ref()
        .is_some_and(|(g, c, _)| pre::has_consumer(node, key, g, c, now) == Some(false))
}

/// Raises `xgroup-createconsumer` when serving created the consumer
/// [`lacks_consumer`] found missing.
pub(crate) fn consumer_created(node: &Node, fresh: bool, x: &XReadOp, key: &[u8], now: u64) {
    let Some((g, c, _)) = x.group.as_ref().filter(|_| fresh) else {
        return;
    };
    if pre::has_consumer(node, key, g, c, now) == Some(true) {
        let n = &node.store.hooks.notices;
        n.raise(notices::STREAM, "xgroup-createconsumer", key);
    }
}

/// Redis raises `new` inside the command, just before the command's own
/// event on that key; the rest the keyspace raised (expiry at lookup,
/// eviction before the command) come first.
fn merge(raised: Vec<Notice>, own: Vec<Notice>) -> Vec<Notice> {
    let mut out = Vec::with_capacity(raised.len() + own.len());
    let mut held = Vec::new();
    for n in raised {
        let own_new = |o: &Notice| o.class == notices::NEW && o.key == n.key;
        if n.class == notices::NEW && own.iter().any(own_new) {
            // The command raises `new` itself (RENAME, COPY, RESTORE).
            continue;
        }
        if n.class == notices::NEW && own.iter().any(|o| o.key == n.key) {
            held.push(n);
        } else {
            out.push(n);
        }
    }
    for o in own {
        if let Some(i) = held.iter().position(|h| h.key == o.key) {
            out.push(held.remove(i));
        }
        out.push(o);
    }
    out.extend(held);
    out
}

fn publish_all(node: &Node, events: Vec<Notice>, now: u64) {
    let flags = node.store.hooks.notices.flags();
    if events.is_empty() || flags & (notices::KEYSPACE | notices::KEYEVENT) == 0 {
        return;
    }
    let limits = node.settings.pubsub_limits();
    for n in events.iter().filter(|n| flags & n.class != 0) {
        if flags & notices::KEYSPACE != 0 {
            let mut ch = b"__keyspace@0__:".to_vec();
            ch.extend_from_slice(&n.key);
            node.pubsub
                .publish(false, &ch, n.event.as_bytes(), limits, now);
        }
        if flags & notices::KEYEVENT != 0 {
            let ch = format!("__keyevent@0__:{}", n.event);
            node.pubsub
                .publish(false, ch.as_bytes(), &n.key, limits, now);
        }
    }
}

/// One event of a command.
pub(crate) fn ev(class: u32, event: &'static str, key: &[u8]) -> Notice {
    Notice {
        class,
        event,
        key: key.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_back_as_redis_shows_them() {
        for (set, shown) in [
            ("KA", "AK"),
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("g$lshzxetdKE", "AKE"),
            ("AKEn", "AKE"),
            ("gtdnKE", "gtdnKE"),
            ("Em", "Em"),
            ("", ""),
            ("x", "x"),
            ("tn", "tn"),
        ] {
            assert_eq!(normalise(set.as_bytes()).as_deref(), Ok(shown), "{set}");
        }
        assert!(normalise(b"Kq").is_err());
        assert!(normalise(b"k").is_err());
    }
}
