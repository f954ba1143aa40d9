//! Reading the frames a node sends on a subscriber connection: which are
//! messages (relayed to the client as they come), which confirm a
//! (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE, and which answer anything else (PING).
//! Also builds the confirmations the proxy answers itself. Pure: no I/O.

use bytes::{Bytes, BytesMut};

use crate::resp::encode;
use crate::resp::reply::elements;

/// The three kinds of subscription; each is counted apart by the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    Channel,
    Pattern,
    Shard,
}

impl Family {
    pub(crate) const ALL: [Family; 3] = [Family::Channel, Family::Pattern, Family::Shard];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The command that subscribes (re-subscribes after a move).
    pub(crate) fn subscribe(self) -> &'static [u8] {
        match self {
            Family::Channel => b"SUBSCRIBE",
            Family::Pattern => b"PSUBSCRIBE",
            Family::Shard => b"SSUBSCRIBE",
        }
    }

    /// The kind word of this family's unsubscribe confirmation.
    pub(crate) fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Family::Channel => b"unsubscribe",
            Family::Pattern => b"punsubscribe",
            Family::Shard => b"sunsubscribe",
        }
    }
}

/// What one frame from a subscriber connection is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FrameKind {
    /// `message` / `pmessage` / `smessage`: delivered to the client as is.
    Message,
    /// A confirmation: its family, whether it subscribes, and the channel
    /// (none in the confirmation of an UNSUBSCRIBE with nothing to drop).
    Confirm(Family, bool, Option<Bytes>),
    /// Anything else: the reply to the oldest request (PING's, an error).
    Reply,
}

/// Classifies one complete frame.
pub(crate) fn classify(frame: &Bytes) -> FrameKind {
    let Some(els) = elements(frame) else {
        return FrameKind::Reply;
    };
    let Some(kind) = els.first().and_then(|r| text(&frame[r.clone()])) else {
        return FrameKind::Reply;
    };
    let confirm = |family, on| {
        let channel = els
            .get(1)
            .and_then(|r| text(&frame[r.clone()]))
            .map(|c| frame.slice_ref(c));
        FrameKind::Confirm(family, on, channel)
    };
    match kind {
        b"message" | b"pmessage" | b"smessage" if els.len() >= 3 => FrameKind::Message,
        b"subscribe" if els.len() == 3 => confirm(Family::Channel, true),
        b"unsubscribe" if els.len() == 3 => confirm(Family::Channel, false),
        b"psubscribe" if els.len() == 3 => confirm(Family::Pattern, true),
        b"punsubscribe" if els.len() == 3 => confirm(Family::Pattern, false),
        b"ssubscribe" if els.len() == 3 => confirm(Family::Shard, true),
        b"sunsubscribe" if els.len() == 3 => confirm(Family::Shard, false),
        _ => FrameKind::Reply,
    }
}

/// The text of a bulk or simple string element; `None` for nil or anything else.
pub(super) fn text(el: &[u8]) -> Option<&[u8]> {
    let nl = memchr::memchr(b'\n', el)?;
    match el.first()? {
        b'$' if el.get(1) != Some(&b'-') => el.get(nl + 1..el.len().checked_sub(2)?),
        b'+' => el.get(1..nl.checked_sub(1)?),
        _ => None,
    }
}

/// The confirmation(s) Redis sends for an unsubscribe from a client with no
/// subscriptions of any kind: one per named channel, or one with a nil
/// channel, each counting 0.
pub(crate) fn unsubscribed_nothing(family: Family, channels: &[Bytes], proto: u8) -> Bytes {
    let mut out = BytesMut::new();
    let head = |out: &mut BytesMut| {
        out.extend_from_slice(if proto >= 3 { b">3\r\n" } else { b"*3\r\n" });
        encode::bulk(out, family.unsubscribe_word());
    };
    if channels.is_empty() {
        head(&mut out);
        encode::null(&mut out, proto);
        encode::integer(&mut out, 0);
    }
    for c in channels {
        head(&mut out);
        encode::bulk(&mut out, c);
        encode::integer(&mut out, 0);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::b;

    #[test]
    fn frames_are_told_apart_in_both_protocols() {
        let cases = [
            (
                "*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n",
                FrameKind::Message,
            ),
            (
                ">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n",
                FrameKind::Message,
            ),
            (
                ">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nc1\r\n$1\r\nm\r\n",
                FrameKind::Message,
            ),
            (
                "*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n",
                FrameKind::Confirm(Family::Channel, true, Some(b("c"))),
            ),
            (
                ">3\r\n$12\r\npunsubscribe\r\n$2\r\np*\r\n:0\r\n",
                FrameKind::Confirm(Family::Pattern, false, Some(b("p*"))),
            ),
            (
                "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n",
                FrameKind::Confirm(Family::Channel, false, None),
            ),
            (
                ">3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n",
                FrameKind::Confirm(Family::Shard, false, None),
            ),
            ("*2\r\n$4\r\npong\r\n$0\r\n\r\n", FrameKind::Reply),
            ("+PONG\r\n", FrameKind::Reply),
            ("-ERR no\r\n", FrameKind::Reply),
        ];
        for (frame, want) in cases {
            assert_eq!(classify(&b(frame)), want, "{frame:?}");
        }
    }

    #[test]
    fn unsubscribing_nothing_looks_like_redis() {
        assert_eq!(
            &unsubscribed_nothing(Family::Channel, &[], 2)[..],
            b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
        );
        assert_eq!(
            &unsubscribed_nothing(Family::Pattern, &[b("a"), b("b")], 3)[..],
            b">3\r\n$12\r\npunsubscribe\r\n$1\r\na\r\n:0\r\n>3\r\n$12\r\npunsubscribe\r\n$1\r\nb\r\n:0\r\n"
        );
    }
}
