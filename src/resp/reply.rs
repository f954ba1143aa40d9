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

/// Largest element count or bulk length accepted from a backend.
const MAX_REPLY_LEN: i64 = 1 << 40;

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let i = memchr::memchr(b'\n', &buf[from..])? + from;
    Some(i)
}

/// Length in bytes of the first complete reply in `buf`; `Ok(None)` until it has
/// all arrived.
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, ReplyError> {
    let mut pos = 0;
    let mut remaining: i64 = 1;
    while remaining > 0 {
        if pos >= buf.len() {
            return Ok(None);
        }
        let kind = buf[pos];
        let Some(nl) = line_end(buf, pos) else {
            return Ok(None);
        };
        // The type byte, then CRLF at the earliest: a bare "\r\n" has no type.
        if nl < pos + 2 || buf[nl - 1] != b'\r' {
            return Err(ReplyError(format!(
                "line without CRLF after '{}'",
                kind as char
            )));
        }
        let line = &buf[pos + 1..nl - 1];
        pos = nl + 1;
        remaining -= 1;
        match kind {
            b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => {}
            b'$' | b'!' | b'=' => {
                let n = parse_i64(line).ok_or_else(|| ReplyError("bad bulk length".into()))?;
                if n == -1 && kind == b'$' {
                    continue;
                }
                if !(0..=MAX_REPLY_LEN).contains(&n) {
                    return Err(ReplyError(format!("bulk length {n}")));
                }
                let end = pos + n as usize;
                if buf.len() < end + 2 {
                    return Ok(None);
                }
                if &buf[end..end + 2] != b"\r\n" {
                    return Err(ReplyError("bulk without CRLF".into()));
                }
                pos = end + 2;
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = parse_i64(line).ok_or_else(|| ReplyError("bad aggregate length".into()))?;
                if n == -1 && kind == b'*' {
                    continue;
                }
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
            other => return Err(ReplyError(format!("unknown type byte 0x{other:02x}"))),
        }
    }
    Ok(Some(pos))
}

/// Splits a complete array (or set/push) reply into its elements' byte ranges.
/// `None` if `reply` is not an aggregate of that kind (e.g. an error or null).
pub fn elements(reply: &[u8]) -> Option<Vec<std::ops::Range<usize>>> {
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
pub fn integer(reply: &[u8]) -> Option<i64> {
    if reply.first() != Some(&b':') || reply.len() < 4 {
        return None;
    }
    parse_i64(&reply[1..reply.len() - 2])
}

/// True for an error reply (`-…` or RESP3 `!…`).
pub fn is_error(reply: &[u8]) -> bool {
    matches!(reply.first(), Some(b'-' | b'!'))
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
