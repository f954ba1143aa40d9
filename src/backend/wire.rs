//! Stand-in for the parts of `crate::resp` the node uses, with the exact
//! signatures `resp` will export. Everything in the node imports RESP through
//! this module, so switching to `crate::resp` is a one-line change here.
//!
//! Owns: request decoding (multibulk and inline) and reply encoding. Never
//! touches a socket.

use bytes::{BufMut, Bytes, BytesMut};
use std::fmt;

/// Bounds on what a client may send, checked before anything is allocated.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most arguments in one multibulk request.
    pub max_args: usize,
    /// Longest single bulk argument, in bytes (Redis `proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Longest inline request line, in bytes.
    pub max_inline_len: usize,
    /// Most bytes buffered for one client before it is disconnected.
    pub max_query_buffer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_args: 1024 * 1024,
            max_bulk_len: 512 * 1024 * 1024,
            max_inline_len: 64 * 1024,
            max_query_buffer: 1024 * 1024 * 1024,
        }
    }
}

/// One decoded request: its raw bytes and its arguments as slices of them.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request exactly as it arrived (the node does not forward, so it
    /// only reads `args`).
    #[allow(dead_code)]
    pub raw: Bytes,
    /// The arguments, zero-copy slices of `raw` (inline requests too).
    pub args: Vec<Bytes>,
}

/// A malformed request; `Display` gives Redis's exact text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*` count not a number or too large.
    InvalidMultibulkLength,
    /// `$` length not a number or too large.
    InvalidBulkLength,
    /// Something other than `$` where a bulk was expected.
    ExpectedDollar(u8),
    /// An inline line longer than the limit.
    TooBigInline,
    /// A `*` header line longer than the limit.
    TooBigMbulkCount,
    /// A `$` header line longer than the limit.
    TooBigBulkCount,
    /// An inline request with an unterminated quote.
    UnbalancedQuotes,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::InvalidMultibulkLength => {
                f.write_str("Protocol error: invalid multibulk length")
            }
            ProtocolError::InvalidBulkLength => f.write_str("Protocol error: invalid bulk length"),
            ProtocolError::ExpectedDollar(c) => {
                write!(f, "Protocol error: expected '$', got '{}'", *c as char)
            }
            ProtocolError::TooBigInline => f.write_str("Protocol error: too big inline request"),
            ProtocolError::TooBigMbulkCount => {
                f.write_str("Protocol error: too big mbulk count string")
            }
            ProtocolError::TooBigBulkCount => {
                f.write_str("Protocol error: too big bulk count string")
            }
            ProtocolError::UnbalancedQuotes => {
                f.write_str("Protocol error: unbalanced quotes in request")
            }
        }
    }
}

impl std::error::Error for ProtocolError {}

/// ASCII case-insensitive equality, without allocating.
pub fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Header lines (`*N`, `$N`) longer than this are refused, as Redis does.
const MAX_HEADER_LEN: usize = 64 * 1024;

/// Takes one complete request off the front of `buf`; `Ok(None)` until it has
/// all arrived. Empty inline lines and `*0`/`*-1` are skipped (no request).
pub fn decode_request(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Request>, ProtocolError> {
    loop {
        if buf.is_empty() {
            return Ok(None);
        }
        let parsed = if buf[0] == b'*' {
            decode_multibulk(buf, limits)?
        } else {
            decode_inline(buf, limits)?
        };
        match parsed {
            Parsed::Incomplete => return Ok(None),
            Parsed::Skip(n) => {
                let _ = buf.split_to(n);
            }
            Parsed::Done(n, spans) => {
                let raw = buf.split_to(n).freeze();
                let args = spans.into_iter().map(|(s, e)| raw.slice(s..e)).collect();
                return Ok(Some(Request { raw, args }));
            }
        }
    }
}

enum Parsed {
    Incomplete,
    /// Consume this many bytes and produce nothing.
    Skip(usize),
    /// Consume this many bytes; the arguments are these byte ranges of them.
    Done(usize, Vec<(usize, usize)>),
}

/// Finds `\r\n` at or after `from`; the index of `\r`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(i) = memchr::memchr(b'\r', &buf[at..]) {
        let i = at + i;
        if i + 1 >= buf.len() {
            return None;
        }
        if buf[i + 1] == b'\n' {
            return Some(i);
        }
        at = i + 1;
    }
    None
}

fn parse_len(digits: &[u8]) -> Option<i64> {
    let (neg, d) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if d.is_empty() || d.len() > 18 {
        return None;
    }
    let mut n: i64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (c - b'0') as i64;
    }
    Some(if neg { -n } else { n })
}

fn decode_multibulk(buf: &[u8], limits: &Limits) -> Result<Parsed, ProtocolError> {
    let Some(end) = find_crlf(buf, 1) else {
        if buf.len() > MAX_HEADER_LEN {
            return Err(ProtocolError::TooBigMbulkCount);
        }
        return Ok(Parsed::Incomplete);
    };
    let count = parse_len(&buf[1..end]).ok_or(ProtocolError::InvalidMultibulkLength)?;
    if count > limits.max_args as i64 || count > i32::MAX as i64 {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    let mut pos = end + 2;
    if count <= 0 {
        return Ok(Parsed::Skip(pos));
    }
    // Capacity is bounded by what has arrived, not by the count on the wire.
    let mut spans = Vec::with_capacity((count as usize).min(buf.len() / 4 + 1));
    for _ in 0..count {
        if pos >= buf.len() {
            return Ok(Parsed::Incomplete);
        }
        if buf[pos] != b'$' {
            return Err(ProtocolError::ExpectedDollar(buf[pos]));
        }
        let Some(end) = find_crlf(buf, pos + 1) else {
            if buf.len() - pos > MAX_HEADER_LEN {
                return Err(ProtocolError::TooBigBulkCount);
            }
            return Ok(Parsed::Incomplete);
        };
        let len = parse_len(&buf[pos + 1..end]).ok_or(ProtocolError::InvalidBulkLength)?;
        if len < 0 || len as u64 > limits.max_bulk_len as u64 {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let start = end + 2;
        let stop = start + len as usize;
        if stop + 2 > buf.len() {
            return Ok(Parsed::Incomplete);
        }
        spans.push((start, stop));
        pos = stop + 2;
    }
    Ok(Parsed::Done(pos, spans))
}

fn decode_inline(buf: &[u8], limits: &Limits) -> Result<Parsed, ProtocolError> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        if buf.len() > limits.max_inline_len {
            return Err(ProtocolError::TooBigInline);
        }
        return Ok(Parsed::Incomplete);
    };
    if nl > limits.max_inline_len {
        return Err(ProtocolError::TooBigInline);
    }
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    let spans = split_inline(&buf[..line_end])?;
    if spans.is_empty() {
        return Ok(Parsed::Skip(nl + 1));
    }
    Ok(Parsed::Done(nl + 1, spans))
}

/// Splits an inline line on blanks. Quoted arguments without escapes stay
/// zero-copy ranges; escapes (rare in practice) are not decoded here.
fn split_inline(line: &[u8]) -> Result<Vec<(usize, usize)>, ProtocolError> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let q = line[i];
        if q == b'"' || q == b'\'' {
            let start = i + 1;
            let mut j = start;
            while j < line.len() && line[j] != q {
                if q == b'"' && line[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            if j >= line.len() {
                return Err(ProtocolError::UnbalancedQuotes);
            }
            spans.push((start, j));
            i = j + 1;
        } else {
            let start = i;
            while i < line.len() && !line[i].is_ascii_whitespace() {
                i += 1;
            }
            spans.push((start, i));
        }
    }
    Ok(spans)
}

/// Reply encoders; each appends one RESP value to `out`.
pub mod encode {
    use super::*;

    /// `+s\r\n`
    pub fn simple(out: &mut BytesMut, s: &str) {
        out.reserve(s.len() + 3);
        out.put_u8(b'+');
        out.put_slice(s.as_bytes());
        out.put_slice(b"\r\n");
    }

    /// `-s\r\n`; `s` includes the prefix (`ERR `, `BUSYKEY ` …).
    pub fn error(out: &mut BytesMut, s: &str) {
        out.reserve(s.len() + 3);
        out.put_u8(b'-');
        out.put_slice(s.as_bytes());
        out.put_slice(b"\r\n");
    }

    fn header(out: &mut BytesMut, tag: u8, n: i64) {
        let mut b = itoa_buf();
        let s = itoa(n, &mut b);
        out.reserve(s.len() + 3);
        out.put_u8(tag);
        out.put_slice(s);
        out.put_slice(b"\r\n");
    }

    /// `:n\r\n`
    pub fn integer(out: &mut BytesMut, n: i64) {
        header(out, b':', n);
    }

    /// `$len\r\nb\r\n`
    pub fn bulk(out: &mut BytesMut, b: &[u8]) {
        header(out, b'$', b.len() as i64);
        out.reserve(b.len() + 2);
        out.put_slice(b);
        out.put_slice(b"\r\n");
    }

    /// `$-1` (RESP2) or `_` (RESP3).
    pub fn null(out: &mut BytesMut, proto: u8) {
        out.put_slice(if proto >= 3 { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// `*-1` (RESP2) or `_` (RESP3).
    pub fn null_array(out: &mut BytesMut, proto: u8) {
        out.put_slice(if proto >= 3 { b"_\r\n" } else { b"*-1\r\n" });
    }

    /// `*n`
    pub fn array_len(out: &mut BytesMut, n: usize) {
        header(out, b'*', n as i64);
    }

    /// `%n` in RESP3, `*2n` in RESP2.
    pub fn map_len(out: &mut BytesMut, n: usize, proto: u8) {
        if proto >= 3 {
            header(out, b'%', n as i64);
        } else {
            header(out, b'*', 2 * n as i64);
        }
    }

    fn itoa_buf() -> [u8; 20] {
        [0u8; 20]
    }

    fn itoa(n: i64, buf: &mut [u8; 20]) -> &[u8] {
        let mut i = buf.len();
        let neg = n < 0;
        let mut v = n.unsigned_abs();
        loop {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        if neg {
            i -= 1;
            buf[i] = b'-';
        }
        &buf[i..]
    }
}
