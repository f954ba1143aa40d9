//! Finding where one reply ends, for RESP2 and RESP3, without decoding it.
//!
//! The proxy's upstream reader calls [`reply_len`] on its read buffer to split
//! off each reply and hand the raw bytes back to the client unchanged. Merging
//! multi-key replies uses [`elements`] to walk an array's items.
//!
//! Nested aggregates are walked with a counter of outstanding elements rather
//! than recursion, so a hostile or buggy backend cannot overflow the stack.

use std::fmt;

use super::parse_i64;

/// The reply bytes are not valid RESP: the upstream connection is poisoned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyError(pub String);

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid reply: {}", self.0)
    }
}

impl std::error::Error for ReplyError {}

/// Largest element count accepted from a backend, and the largest bulk
/// accepted by [`reply_len`] (the proxy's upstreams use [`ReplyFramer`] with
/// `proto-max-bulk-len` instead).
const MAX_REPLY_LEN: i64 = 1 << 40;

/// Length in bytes of the first complete reply in `buf`; `Ok(None)` until it has
/// all arrived. Scans from the start on every call: for a buffer that grows
/// by reads, use a [`ReplyFramer`].
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, ReplyError> {
    ReplyFramer::new(MAX_REPLY_LEN as usize).next(buf)
}

/// Finds where each reply ends in a buffer that only grows between calls,
/// resuming where the previous call stopped: a reply arriving in many reads
/// is scanned once in all, not once per read. After it returns `Some(n)` the
/// caller takes those `n` bytes off the front and the framer starts afresh.
#[derive(Clone, Debug)]
pub struct ReplyFramer {
    max_bulk_len: usize,
    /// Start of the next element to parse (every element before it is complete).
    pos: usize,
    /// Elements still to parse in this reply, counting the one at `pos`.
    remaining: i64,
    /// Bytes after `pos` already searched for a line end without finding one.
    scanned: usize,
    /// Bytes the buffer must hold before the next call can get further,
    /// when a bulk's length is known and its body has not all arrived.
    needed: usize,
}

impl ReplyFramer {
    /// A framer refusing bulks longer than `max_bulk_len` bytes.
    pub fn new(max_bulk_len: usize) -> ReplyFramer {
        ReplyFramer {
            max_bulk_len,
            pos: 0,
            remaining: 1,
            scanned: 0,
            needed: 0,
        }
    }

    /// Bytes the buffer must hold for the reply to get further, when known
    /// (a bulk's body is awaited), else 0: lets the reader make room for a
    /// large value at once rather than by doubling, so no more than the
    /// value's own bytes are held for it.
    pub fn needed(&self) -> usize {
        self.needed
    }

    /// Length of the first complete reply in `buf`; `Ok(None)` until it has
    /// all arrived. `buf` must hold the bytes of the previous call, maybe more.
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<usize>, ReplyError> {
        while self.remaining > 0 {
            let pos = self.pos;
            if pos >= buf.len() {
                return Ok(None);
            }
            let kind = buf[pos];
            let from = pos + self.scanned;
            let Some(nl) = memchr::memchr(b'\n', &buf[from..]).map(|i| i + from) else {
                self.scanned = buf.len() - pos;
                // A line is a type byte and a number or a short string:
                // refuse to buffer one without end.
                if self.scanned > self.max_bulk_len.saturating_add(2) {
                    return Err(ReplyError(format!(
                        "a '{}' line longer than {} bytes",
                        kind as char, self.max_bulk_len
                    )));
                }
                return Ok(None);
            };
            // The line is complete: never search it again.
            self.scanned = nl - pos;
            // A type byte, then CR LF at the earliest ("\r\n" alone is no line).
            if nl < pos + 2 || buf[nl - 1] != b'\r' {
                return Err(ReplyError(format!(
                    "line without CRLF after '{}'",
                    kind as char
                )));
            }
            let line = &buf[pos + 1..nl - 1];
            let mut next = nl + 1;
            let mut remaining = self.remaining - 1;
            match kind {
                b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => {}
                b'$' | b'!' | b'=' => {
                    let n = parse_i64(line).ok_or_else(|| ReplyError("bad bulk length".into()))?;
                    if !(n == -1 && kind == b'$') {
                        if n < 0 || n as u64 > self.max_bulk_len as u64 {
                            return Err(ReplyError(format!(
                                "bulk length {n} is over proto-max-bulk-len ({})",
                                self.max_bulk_len
                            )));
                        }
                        let end = next + n as usize;
                        if buf.len() < end + 2 {
                            self.needed = end + 2;
                            return Ok(None);
                        }
                        if &buf[end..end + 2] != b"\r\n" {
                            return Err(ReplyError("bulk without CRLF".into()));
                        }
                        next = end + 2;
                    }
                }
                b'*' | b'~' | b'>' | b'%' | b'|' => {
                    let n =
                        parse_i64(line).ok_or_else(|| ReplyError("bad aggregate length".into()))?;
                    if !(n == -1 && kind == b'*') {
                        if !(0..=MAX_REPLY_LEN).contains(&n) {
                            return Err(ReplyError(format!("aggregate length {n}")));
                        }
                        remaining += match kind {
                            b'%' => 2 * n,
                            // An attribute is followed by the reply it describes.
                            b'|' => 2 * n + 1,
                            _ => n,
                        };
                    }
                }
                other => return Err(ReplyError(format!("unknown type byte 0x{other:02x}"))),
            }
            self.pos = next;
            self.remaining = remaining;
            self.scanned = 0;
            self.needed = 0;
        }
        let n = self.pos;
        *self = ReplyFramer::new(self.max_bulk_len);
        Ok(Some(n))
    }
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let i = memchr::memchr(b'\n', &buf[from..])? + from;
    Some(i)
}

/// Splits a complete array (or set/push) reply into its elements' byte ranges.
/// `None` if `reply` is not an aggregate of that kind (e.g. an error or null).
pub(crate) fn elements(reply: &[u8]) -> Option<Vec<std::ops::Range<usize>>> {
    if !matches!(reply.first(), Some(b'*' | b'~' | b'>')) {
        return None;
    }
    let nl = line_end(reply, 0)?;
    let n = parse_i64(&reply[1..nl.checked_sub(1)?])?;
    if n < 0 {
        return None;
    }
    let mut out = Vec::with_capacity((n as usize).min(1024));
    let mut pos = nl + 1;
    for _ in 0..n {
        let len = reply_len(&reply[pos..]).ok()??;
        out.push(pos..pos + len);
        pos += len;
    }
    Some(out)
}

/// The integer of a `:n` reply.
pub(crate) fn integer(reply: &[u8]) -> Option<i64> {
    if reply.first() != Some(&b':') || reply.len() < 4 {
        return None;
    }
    parse_i64(&reply[1..reply.len() - 2])
}

/// True for an error reply (`-…` or RESP3 `!…`).
pub(crate) fn is_error(reply: &[u8]) -> bool {
    matches!(reply.first(), Some(b'-' | b'!'))
}

/// The error code of an error reply: its first word, or `ERR` when it has
/// none within its first 32 bytes (as Redis's `afterErrorReply`).
pub(crate) fn error_code(reply: &[u8]) -> &[u8] {
    let text = match reply.first() {
        // !<len>\r\n<text>\r\n
        Some(b'!') => reply
            .iter()
            .position(|&c| c == b'\n')
            .map_or(&reply[..0], |i| &reply[i + 1..]),
        _ => reply.get(1..).unwrap_or_default(),
    };
    let head = &text[..text.len().min(32)];
    match head.iter().position(|&c| c == b' ') {
        Some(0) | None => b"ERR",
        Some(i) => &head[..i],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPLIES: &[&[u8]] = &[
        b"+OK\r\n",
        b"-ERR x\r\n",
        b":42\r\n",
        b"$-1\r\n",
        b"$0\r\n\r\n",
        b"$5\r\nhe\r\no\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
        b"_\r\n",
        b"#t\r\n",
        b",3.14\r\n",
        b"(123456789012345678901234567890\r\n",
        b"!5\r\nERR x\r\n",
        b"=8\r\ntxt:abcd\r\n",
        b"%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n_\r\n",
        b"~1\r\n+x\r\n",
        b">2\r\n+message\r\n+hi\r\n",
        b"|1\r\n+key\r\n+val\r\n:7\r\n",
    ];

    #[test]
    fn finds_the_end_of_every_reply_type_padded_and_cut() {
        for r in REPLIES {
            assert_eq!(
                reply_len(r).unwrap(),
                Some(r.len()),
                "{:?}",
                String::from_utf8_lossy(r)
            );
            let mut padded = r.to_vec();
            padded.extend_from_slice(b"+NEXT\r\n");
            assert_eq!(reply_len(&padded).unwrap(), Some(r.len()));
            for cut in 0..r.len() {
                assert_eq!(
                    reply_len(&r[..cut]).unwrap(),
                    None,
                    "cut {cut} of {:?}",
                    String::from_utf8_lossy(r)
                );
            }
        }
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            &b"?x\r\n"[..],
            b"$3\r\nabcde\r\n",
            b"*x\r\n",
            b"+OK\n",
            b"$-5\r\n",
            b"\r\n",
            b"*1\r\n\r\n",
        ] {
            assert!(
                reply_len(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_bulk_over_the_limit_is_refused_from_its_header() {
        let mut f = ReplyFramer::new(1024);
        let err = f.next(b"$1099511627776\r\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid reply: bulk length 1099511627776 is over proto-max-bulk-len (1024)"
        );
        assert!(ReplyFramer::new(1024).next(&[b'+'; 2000]).is_err());
        assert_eq!(ReplyFramer::new(1024).next(&[b'+'; 1000]), Ok(None));
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let mut deep = b"*1\r\n".repeat(100_000);
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(reply_len(&deep).unwrap(), Some(deep.len()));
    }

    #[test]
    fn elements_walks_an_array() {
        let r = b"*3\r\n$1\r\na\r\n$-1\r\n:5\r\n";
        let els = elements(r).unwrap();
        let parts: Vec<&[u8]> = els.iter().map(|e| &r[e.clone()]).collect();
        assert_eq!(parts, vec![&b"$1\r\na\r\n"[..], b"$-1\r\n", b":5\r\n"]);
        assert!(elements(b"-ERR x\r\n").is_none());
        assert_eq!(integer(b":-7\r\n"), Some(-7));
    }

    /// Replies back to back, fed to a framer in pieces cut at `cuts`, give
    /// the same frame ends as framing the whole buffer at once.
    fn frame_in_pieces(stream: &[u8], cuts: &[usize]) -> Result<Vec<usize>, ReplyError> {
        let mut f = ReplyFramer::new(1 << 20);
        let mut buf = Vec::new();
        let mut ends = Vec::new();
        let mut fed = 0;
        for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
            let cut = cut.clamp(fed, stream.len());
            buf.extend_from_slice(&stream[fed..cut]);
            fed = cut;
            while let Some(n) = f.next(&buf)? {
                ends.push(n);
                buf.drain(..n);
            }
        }
        Ok(ends)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Incremental framing at any splits equals one-shot framing.
        #[test]
        fn framing_in_pieces_equals_framing_at_once(
            picks in proptest::collection::vec(0..REPLIES.len(), 1..8),
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let stream: Vec<u8> = picks.iter().flat_map(|&i| REPLIES[i].to_vec()).collect();
            let want: Vec<usize> = picks.iter().map(|&i| REPLIES[i].len()).collect();
            let mut cuts = cuts;
            cuts.sort_unstable();
            proptest::prop_assert_eq!(frame_in_pieces(&stream, &cuts).unwrap(), want);
        }

        /// On arbitrary bytes, incremental and one-shot framing agree on
        /// every frame and on whether the stream is invalid.
        #[test]
        fn framing_garbage_in_pieces_agrees_with_at_once(
            data in proptest::collection::vec(proptest::prop_oneof![
                proptest::strategy::Just(b'*'), proptest::strategy::Just(b'$'),
                proptest::strategy::Just(b'\r'), proptest::strategy::Just(b'\n'),
                proptest::strategy::Just(b'1'), proptest::strategy::Just(b'2'),
                proptest::strategy::Just(b'+'), proptest::num::u8::ANY,
            ], 0..96),
            cut in 0usize..96,
        ) {
            let whole = frame_in_pieces(&data, &[]);
            let split = frame_in_pieces(&data, &[cut]);
            proptest::prop_assert_eq!(whole.is_ok(), split.is_ok());
            if let (Ok(a), Ok(b)) = (whole, split) {
                proptest::prop_assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn framing_at_every_split_equals_framing_at_once() {
        let stream: Vec<u8> = REPLIES.concat();
        let want: Vec<usize> = REPLIES.iter().map(|r| r.len()).collect();
        for cut in 0..stream.len() {
            assert_eq!(frame_in_pieces(&stream, &[cut]).unwrap(), want, "cut {cut}");
        }
        let every_byte: Vec<usize> = (0..stream.len()).collect();
        assert_eq!(frame_in_pieces(&stream, &every_byte).unwrap(), want);
    }

    /// Cross-check against the redis-protocol crate's RESP3 decoder: for any
    /// well-formed frame it builds, both agree on where the frame ends.
    #[test]
    fn agrees_with_redis_protocol_on_frame_ends() {
        use bytes::BytesMut;
        use redis_protocol::resp3::decode::complete::decode_bytes_mut;
        let mut compared = 0;
        for r in REPLIES {
            let mut buf = BytesMut::from(*r);
            buf.extend_from_slice(b"+NEXT\r\n");
            let ours = reply_len(&buf).unwrap().unwrap();
            if let Ok(Some((_, consumed, _))) = decode_bytes_mut(&mut buf) {
                assert_eq!(ours, consumed, "{:?}", String::from_utf8_lossy(r));
                compared += 1;
            }
        }
        assert!(
            compared >= REPLIES.len() - 2,
            "only {compared} frames cross-checked"
        );
    }
}
