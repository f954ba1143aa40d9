//! One subscriber connection's mailbox: the messages published to it and
//! not yet taken by its serve loop, already encoded in its protocol (as
//! Redis encodes into a client's output buffer), bounded in bytes by the
//! `pubsub` class of `client-output-buffer-limit`.
//!
//! Publishers call [`Mailbox::deliver`] (never blocks, never waits for the
//! subscriber); the connection's serve loop waits on [`Mailbox::wait`] and
//! takes the bytes with [`Mailbox::take`]. A mailbox over its hard limit,
//! or over its soft limit for longer than the soft period, is closed: its
//! bytes are freed at once, later messages are dropped, and the serve loop
//! closes the connection (Redis: "scheduled to be closed ASAP for
//! overcoming of output buffer limits").
//!
//! Never touches a socket and never holds its lock across an `.await`.

use crate::resp::encode;
use bytes::{BufMut, BytesMut};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::Mutex;
use tokio::sync::Notify;

/// The `pubsub` class of `client-output-buffer-limit`; 0 disables a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Bytes pending at which the subscriber is disconnected at once.
    pub(crate) hard: u64,
    /// Bytes pending that, held for longer than `soft_secs`, disconnect it.
    pub(crate) soft: u64,
    /// Seconds the soft limit may be exceeded continuously.
    pub(crate) soft_secs: u64,
}

#[cfg(test)]
impl Limits {
    /// Redis's default: `pubsub 32mb 8mb 60`.
    pub(crate) const DEFAULT: Limits = Limits {
        hard: 32 * 1024 * 1024,
        soft: 8 * 1024 * 1024,
        soft_secs: 60,
    };
}

/// What a message push says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushKind {
    /// `message channel payload` (PUBLISH to a channel).
    Message,
    /// `pmessage pattern channel payload` (PUBLISH matching a pattern).
    PMessage,
    /// `smessage channel payload` (SPUBLISH).
    SMessage,
}

/// What [`Mailbox::take`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Nothing left after this take.
    Empty,
    /// More bytes wait: take again after writing these.
    More,
    /// The mailbox was closed over its limit: close the connection.
    Closed,
}

/// One subscriber connection's pending messages.
pub(crate) struct Mailbox {
    /// The connection's CLIENT ID.
    pub(crate) id: u64,
    /// The protocol messages are encoded in; HELLO changes it, as it
    /// changes how Redis encodes later replies.
    proto: AtomicU8,
    /// A std mutex: held only to append or take bytes, never across an
    /// `.await`; publishers on other threads take it briefly.
    inbox: Mutex<Inbox>,
    /// Wakes the serve loop: a message arrived or the mailbox closed.
    wake: Notify,
}

#[derive(Default)]
struct Inbox {
    bytes: BytesMut,
    /// When the pending bytes first reached the soft limit (ms since the
    /// epoch), while they stay at or over it.
    over_soft_since: Option<u64>,
    /// The soft limit seen at the last delivery, so taking bytes can tell
    /// when the subscriber has caught up under it.
    soft: u64,
    closed: bool,
}

impl Mailbox {
    /// An empty mailbox for connection `id` speaking `proto`.
    pub(crate) fn new(id: u64, proto: u8) -> Mailbox {
        Mailbox {
            id,
            proto: AtomicU8::new(proto),
            inbox: Mutex::new(Inbox::default()),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Encodes later messages in `proto` (after HELLO).
    pub(crate) fn set_proto(&self, proto: u8) {
        self.proto.store(proto, Relaxed);
    }

    /// Appends one message, then applies the limits (as Redis does after
    /// adding a reply). Never blocks on the subscriber.
    pub(crate) fn deliver(
        &self,
        kind: PushKind,
        pattern: &[u8],
        channel: &[u8],
        payload: &[u8],
        limits: Limits,
        now_ms: u64,
    ) {
        let proto = self.proto.load(Relaxed);
        {
            let mut inbox = self.lock();
            if inbox.closed {
                return;
            }
            let len = message_len(kind, pattern, channel, payload);
            if limits.hard > 0 && (inbox.bytes.len() + len) as u64 >= limits.hard {
                // Over the hard limit with this message: close without
                // copying it (a huge payload is never copied per subscriber).
                inbox.closed = true;
                inbox.bytes = BytesMut::new();
            } else {
                encode_message(&mut inbox.bytes, proto, kind, pattern, channel, payload);
            }
            inbox.soft = limits.soft;
            if !inbox.closed && inbox.is_over(limits, now_ms) {
                inbox.closed = true;
                inbox.bytes = BytesMut::new();
            }
        }
        self.wake.notify_one();
    }

    /// Moves up to `max` pending bytes to the end of `out`. A take may end
    /// inside a message: the caller must take the rest before appending
    /// anything else to `out` (every take before a reply takes all).
    pub(crate) fn take(&self, out: &mut BytesMut, max: usize) -> Taken {
        let mut inbox = self.lock();
        if inbox.closed {
            return Taken::Closed;
        }
        let n = inbox.bytes.len().min(max);
        out.extend_from_slice(&inbox.bytes[..n]);
        if n == inbox.bytes.len() {
            // Keep the allocation for the next messages unless it grew
            // large while the subscriber lagged.
            if inbox.bytes.capacity() > 1024 * 1024 {
                inbox.bytes = BytesMut::new();
            } else {
                inbox.bytes.clear();
            }
        } else {
            let _ = inbox.bytes.split_to(n);
        }
        if (inbox.bytes.len() as u64) < inbox.soft || inbox.soft == 0 {
            inbox.over_soft_since = None;
        }
        if inbox.bytes.is_empty() {
            Taken::Empty
        } else {
            Taken::More
        }
    }

    /// Whether the mailbox was closed over its limit.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Bytes waiting (CLIENT INFO `omem`).
    pub(crate) fn pending(&self) -> usize {
        self.lock().bytes.len()
    }

    /// Resolves once something was delivered (or the mailbox closed) since
    /// the last wait; a delivery made while nobody waits is not lost.
    pub(crate) async fn wait(&self) {
        self.wake.notified().await
    }

    /// Wakes the serve loop again (it took a part and more waits).
    pub(crate) fn rewake(&self) {
        self.wake.notify_one();
    }
}

impl Inbox {
    /// Redis's `checkClientOutputBufferLimits`: the hard limit at once, the
    /// soft one when held continuously for longer than its period.
    fn is_over(&mut self, limits: Limits, now_ms: u64) -> bool {
        let used = self.bytes.len() as u64;
        if limits.hard > 0 && used >= limits.hard {
            return true;
        }
        if limits.soft > 0 && used >= limits.soft {
            match self.over_soft_since {
                None => self.over_soft_since = Some(now_ms),
                Some(t) => return now_ms.saturating_sub(t) > limits.soft_secs * 1000,
            }
        } else {
            self.over_soft_since = None;
        }
        false
    }
}

/// A message push: `*3`/`>3` `message channel payload`, `smessage …`, or
/// `*4`/`>4` `pmessage pattern channel payload`.
pub(crate) fn encode_message(
    out: &mut BytesMut,
    proto: u8,
    kind: PushKind,
    pattern: &[u8],
    channel: &[u8],
    payload: &[u8],
) {
    let (n, name): (usize, &[u8]) = match kind {
        PushKind::Message => (3, b"message"),
        PushKind::PMessage => (4, b"pmessage"),
        PushKind::SMessage => (3, b"smessage"),
    };
    push_header(out, proto, n);
    encode::bulk(out, name);
    if kind == PushKind::PMessage {
        encode::bulk(out, pattern);
    }
    encode::bulk(out, channel);
    encode::bulk(out, payload);
}

/// The bytes [`encode_message`] writes (the same in RESP2 and RESP3).
pub(crate) fn message_len(kind: PushKind, pattern: &[u8], channel: &[u8], payload: &[u8]) -> usize {
    fn bulk(n: usize) -> usize {
        let digits = std::iter::successors(Some(n), |&v| (v >= 10).then_some(v / 10)).count();
        1 + digits + 2 + n + 2
    }
    let (name, pattern) = match kind {
        PushKind::Message => (7, 0),
        PushKind::PMessage => (8, bulk(pattern.len())),
        PushKind::SMessage => (8, 0),
    };
    4 + bulk(name) + pattern + bulk(channel.len()) + bulk(payload.len())
}

/// `*n` in RESP2, `>n` (a push) in RESP3.
pub(crate) fn push_header(out: &mut BytesMut, proto: u8, n: usize) {
    out.put_u8(if proto >= 3 { b'>' } else { b'*' });
    out.put_u8(b'0' + n as u8);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(hard: u64, soft: u64, soft_secs: u64) -> Limits {
        Limits {
            hard,
            soft,
            soft_secs,
        }
    }

    #[test]
    fn messages_are_encoded_in_the_subscribers_protocol() {
        let m = Mailbox::new(1, 2);
        let l = Limits::DEFAULT;
        m.deliver(PushKind::Message, b"", b"ch", b"hi", l, 0);
        m.set_proto(3);
        m.deliver(PushKind::PMessage, b"c*", b"ch", b"", l, 0);
        m.deliver(PushKind::SMessage, b"", b"s", b"x", l, 0);
        let mut out = BytesMut::new();
        assert_eq!(m.take(&mut out, usize::MAX), Taken::Empty);
        assert_eq!(
            &out[..],
            &b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n\
               >4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$0\r\n\r\n\
               >3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$1\r\nx\r\n"[..]
        );
    }

    #[test]
    fn message_len_is_the_encoded_length() {
        let big = vec![b'x'; 12_345];
        for kind in [PushKind::Message, PushKind::PMessage, PushKind::SMessage] {
            for (pat, ch, payload) in [
                (&b""[..], &b""[..], &b""[..]),
                (b"p*", b"chan", b"hello"),
                (b"0123456789", b"c", &big[..]),
            ] {
                let mut out = BytesMut::new();
                encode_message(&mut out, 3, kind, pat, ch, payload);
                assert_eq!(message_len(kind, pat, ch, payload), out.len(), "{kind:?}");
            }
        }
    }

    #[test]
    fn a_message_over_the_hard_limit_is_never_copied() {
        let m = Mailbox::new(1, 2);
        let huge = vec![b'x'; 1 << 20];
        m.deliver(
            PushKind::Message,
            b"",
            b"c",
            &huge,
            limits(1 << 20, 0, 0),
            0,
        );
        assert!(m.is_closed());
        assert_eq!(m.lock().bytes.capacity(), 0);
    }

    #[test]
    fn takes_in_parts_keep_the_byte_order() {
        let m = Mailbox::new(1, 2);
        for i in 0..10u8 {
            m.deliver(
                PushKind::Message,
                b"",
                b"c",
                &[b'a' + i],
                Limits::DEFAULT,
                0,
            );
        }
        let (mut all, mut parts) = (BytesMut::new(), 0);
        while m.take(&mut all, 7) == Taken::More {
            parts += 1;
        }
        assert!(parts > 5);
        let mut want = BytesMut::new();
        for i in 0..10u8 {
            encode_message(&mut want, 2, PushKind::Message, b"", b"c", &[b'a' + i]);
        }
        assert_eq!(all, want);
    }

    #[test]
    fn the_hard_limit_closes_at_once_and_frees_the_bytes() {
        let m = Mailbox::new(1, 2);
        let l = limits(100, 0, 0);
        m.deliver(PushKind::Message, b"", b"c", &[b'x'; 40], l, 0);
        assert!(!m.is_closed());
        m.deliver(PushKind::Message, b"", b"c", &[b'x'; 40], l, 0);
        assert!(m.is_closed());
        assert_eq!(m.pending(), 0);
        m.deliver(PushKind::Message, b"", b"c", b"late", l, 0);
        assert_eq!(m.pending(), 0);
        assert_eq!(m.take(&mut BytesMut::new(), usize::MAX), Taken::Closed);
    }

    #[test]
    fn the_soft_limit_closes_only_when_held_past_its_period() {
        let m = Mailbox::new(1, 2);
        let l = limits(0, 50, 2);
        m.deliver(PushKind::Message, b"", b"c", &[b'x'; 60], l, 1_000);
        m.deliver(PushKind::Message, b"", b"c", b"y", l, 3_000);
        assert!(!m.is_closed(), "exactly the period is not past it");
        // Catching up resets the clock.
        m.take(&mut BytesMut::new(), usize::MAX);
        m.deliver(PushKind::Message, b"", b"c", &[b'x'; 60], l, 3_500);
        m.deliver(PushKind::Message, b"", b"c", b"y", l, 5_000);
        assert!(!m.is_closed());
        m.deliver(PushKind::Message, b"", b"c", b"y", l, 5_501);
        assert!(m.is_closed());
    }
}
