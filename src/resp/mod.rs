//! RESP framing over `BytesMut`, with no sockets: decode a client request
//! (multibulk or inline), find the end of one reply (RESP2 and RESP3), encode
//! replies, and the command table that classifies every request.
//!
//! Called by the proxy's client sessions and upstream connections and by the
//! built-in node. It must never touch a socket, block, or allocate an amount of
//! memory chosen by the peer before checking it against [`Limits`].

pub mod command;
pub mod encode;
pub(crate) mod info;
mod inline;
mod parsed;
pub mod reply;
pub(crate) mod request;
pub(crate) mod timeout;

pub use reply::reply_len;
pub(crate) use request::ProtocolError;
pub use request::{decode_request, next_frame, Frame, Request, RequestDecoder, Spans};

/// Redis's `proto-max-bulk-len` default: 512 MB.
pub(crate) const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Arguments accepted in one request (Redis allows up to INT_MAX; we bound it).
pub(crate) const DEFAULT_MAX_ARGS: usize = 1024 * 1024;
/// Redis's `PROTO_INLINE_MAX_SIZE`: longest inline request or count line.
pub(crate) const DEFAULT_MAX_INLINE_LEN: usize = 64 * 1024;
/// Redis's `client-query-buffer-limit` default: 1 GB.
pub(crate) const DEFAULT_MAX_QUERY_BUFFER: usize = 1024 * 1024 * 1024;

/// Bounds on what a peer may make us buffer or allocate, checked before allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most arguments in one request.
    pub max_args: usize,
    /// Longest bulk string argument, in bytes.
    pub max_bulk_len: usize,
    /// Longest inline request line (and multibulk / bulk count line), in bytes.
    pub max_inline_len: usize,
    /// Most unparsed bytes buffered for one client.
    pub max_query_buffer: usize,
    /// The client has not authenticated: Redis's tighter limits apply
    /// (at most [`UNAUTH_MAX_ARGS`] arguments of [`UNAUTH_MAX_BULK_LEN`]
    /// bytes, [`UNAUTH_MAX_QUERY_BUFFER`] buffered), with Redis's errors.
    pub unauthenticated: bool,
}

/// Arguments one request of an unauthenticated client may have (Redis's limit).
pub const UNAUTH_MAX_ARGS: usize = 10;
/// Longest argument of an unauthenticated client (Redis's limit).
pub const UNAUTH_MAX_BULK_LEN: usize = 16 * 1024;
/// Unparsed bytes buffered for an unauthenticated client, at most.
pub const UNAUTH_MAX_QUERY_BUFFER: usize = 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_args: DEFAULT_MAX_ARGS,
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_inline_len: DEFAULT_MAX_INLINE_LEN,
            max_query_buffer: DEFAULT_MAX_QUERY_BUFFER,
            unauthenticated: false,
        }
    }
}

/// ASCII case-insensitive comparison, without allocating.
pub(crate) fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Parses a decimal i64 the way Redis's `string2ll` does: optional '-', digits
/// only, no leading '+', no spaces, no leading zeros except "0" itself.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = (c - b'0') as i64;
        v = if neg {
            v.checked_mul(10)?.checked_sub(d)?
        } else {
            v.checked_mul(10)?.checked_add(d)?
        };
    }
    Some(v)
}

/// Parses a SCAN cursor the way Redis 7 does (`strtoul`, then a check that
/// it consumed everything): an optional sign — a leading `-` wraps — then
/// digits; no leading space, no overflow. The empty string has no digits
/// and nothing left over, so it is cursor 0, as in Redis.
pub(crate) fn parse_cursor(s: &[u8]) -> Option<u64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        // strtoul stops at the sign; only an empty string leaves nothing over.
        return s.is_empty().then_some(0);
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_cursor_follows_redis_strtoul() {
        let cases: &[(&[u8], Option<u64>)] = &[
            (b"0", Some(0)),
            (b"", Some(0)),
            (b"17", Some(17)),
            (b"+17", Some(17)),
            (b"-1", Some(u64::MAX)),
            (b"18446744073709551615", Some(u64::MAX)),
            (b"18446744073709551616", None),
            (b"-", None),
            (b"+", None),
            (b" 1", None),
            (b"1 ", None),
            (b"1a", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse_cursor(input),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn parse_i64_follows_redis_string2ll() {
        let cases: &[(&[u8], Option<i64>)] = &[
            (b"0", Some(0)),
            (b"42", Some(42)),
            (b"-42", Some(-42)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"", None),
            (b"-", None),
            (b"-0", None),
            (b"007", None),
            (b"+1", None),
            (b" 1", None),
            (b"1a", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse_i64(input),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
