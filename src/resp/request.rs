//! Client request decoding: RESP multibulk (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) and
//! inline commands (`GET k\r\n`, as sent by `nc` users and redis-benchmark's
//! PING_INLINE).
//!
//! A multibulk request keeps its exact raw bytes so the proxy can forward it
//! unchanged; its arguments are zero-copy slices of those bytes. An inline
//! request is re-encoded once as a multibulk, because backends must never see
//! the client's inline syntax (its quoting rules differ).
//!
//! Parsing is stricter than Redis in one place: a bulk must be followed by CRLF.
//! Redis skips those two bytes unchecked; a proxy that did the same could be
//! desynchronised from its backends by one malformed frame.

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

use super::inline::parse_inline;
pub(crate) use super::parsed::{Parsed, ProtocolError};
use super::{encode, parse_i64, Limits};

/// Argument spans of one multibulk: up to eight without a heap allocation.
pub type Spans = SmallVec<[(usize, usize); 8]>;

/// One complete client request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The request as a RESP multibulk, ready to forward.
    pub raw: Bytes,
    /// The command name and its arguments, slices of `raw`.
    pub args: Vec<Bytes>,
}

impl Request {
    /// Builds a request from arguments, encoding it as a multibulk.
    pub fn from_args(args: &[&[u8]]) -> Request {
        let mut out =
            BytesMut::with_capacity(args.iter().map(|a| a.len() + 16).sum::<usize>() + 16);
        encode::command(&mut out, args);
        let raw = out.freeze();
        let mut buf = BytesMut::from(&raw[..]);
        decode_request(&mut buf, &Limits::default())
            .ok()
            .flatten()
            .expect("an encoded command decodes")
    }

    /// The command name as sent (any case).
    pub fn name(&self) -> &[u8] {
        &self.args[0]
    }
}

/// Takes one complete request off the front of `buf`; `Ok(None)` until it has
/// all arrived. Empty inline lines and empty multibulks (`*0`, `*-1`) are
/// consumed without producing a request, as Redis does. Parses from the
/// start on every call: a reader whose buffer grows by reads should keep a
/// [`RequestDecoder`] instead.
pub fn decode_request(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Request>, ProtocolError> {
    RequestDecoder::new(*limits).decode(buf)
}

/// Decodes the requests of one client's buffer, keeping how far it got into
/// an incomplete request between calls: a request arriving in many reads is
/// scanned once in all (a 512 MB argument in 64 KB reads costs one pass,
/// not eight thousand).
#[derive(Debug)]
pub struct RequestDecoder {
    limits: Limits,
    /// Arguments of the incomplete request at the front, parsed so far.
    spans: Spans,
    progress: Progress,
}

/// How far an incomplete request at the front of the buffer was parsed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Progress {
    /// Arguments the multibulk announced; 0 until its count line is parsed.
    count: usize,
    /// Start of the next argument's `$len` line.
    pos: usize,
    /// Bytes after the current line's start already searched for its end.
    pub(crate) scanned: usize,
}

impl RequestDecoder {
    /// Applies, or lifts, the limits for a client that has not authenticated.
    pub fn set_unauthenticated(&mut self, on: bool) {
        self.limits.unauthenticated = on;
    }

    pub fn new(limits: Limits) -> RequestDecoder {
        RequestDecoder {
            limits,
            spans: Spans::new(),
            progress: Progress::default(),
        }
    }

    /// [`decode_request`], resuming where the previous call stopped. `buf`
    /// must hold what it held then (the request at its front), maybe more.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        loop {
            if buf.is_empty() {
                return Ok(None);
            }
            let parsed = parse_front_from(buf, &self.limits, &mut self.spans, &mut self.progress);
            if !matches!(parsed, Ok(Parsed::Incomplete)) {
                // Done with the request at the front, one way or another.
                self.progress = Progress::default();
            }
            match parsed? {
                Parsed::Incomplete => return Ok(None),
                Parsed::Skip(n) => {
                    let _ = buf.split_to(n);
                }
                Parsed::Multibulk { len } => {
                    let raw = buf.split_to(len).freeze();
                    let args = self.spans.iter().map(|&(s, e)| raw.slice(s..e)).collect();
                    return Ok(Some(Request { raw, args }));
                }
                Parsed::Inline { len, args } => {
                    let _ = buf.split_to(len);
                    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                    let mut enc = BytesMut::new();
                    encode::command(&mut enc, &refs);
                    return match parse_multibulk(&enc, &self.limits, &mut self.spans)? {
                        Parsed::Multibulk { len } => {
                            let raw = enc.split_to(len).freeze();
                            let args = self.spans.iter().map(|&(s, e)| raw.slice(s..e)).collect();
                            Ok(Some(Request { raw, args }))
                        }
                        _ => unreachable!("a freshly encoded multibulk is complete"),
                    };
                }
            }
        }
    }
}

/// One request at the front of a buffer, parsed in place (for a server that
/// executes it before consuming it: no copies, no reference counts).
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A multibulk of `len` bytes from the buffer's start; its arguments are
    /// the spans left in the caller's [`Spans`].
    Spans { len: usize },
    /// An inline request of `len` bytes, its arguments unquoted and owned.
    Inline { len: usize, args: Vec<Vec<u8>> },
}

/// Parses the request at the front of `buf` without consuming it; `Ok(None)`
/// until it has all arrived. Empty requests before it (blank inline lines,
/// `*0`) are consumed with it, counted in its `len`; empty requests followed
/// by nothing complete give a `Frame::Spans` with no spans.
pub fn next_frame(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Spans,
) -> Result<Option<Frame>, ProtocolError> {
    let frame = next_frame_from(buf, limits, spans, &mut Progress::default());
    if matches!(frame, Ok(None)) {
        // Spans of the incomplete request are not a request.
        spans.clear();
    }
    frame
}

/// [`next_frame`], resuming from `progress` and the `spans` the previous
/// call on this buffer left (for a server that keeps its place in a client's
/// query buffer between reads). The caller consumes each frame's `len`
/// before the next call; `buf` then holds what it held, maybe more.
pub(crate) fn next_frame_from(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Spans,
    progress: &mut Progress,
) -> Result<Option<Frame>, ProtocolError> {
    let mut at = 0;
    loop {
        if progress.count == 0 {
            spans.clear();
        }
        let rest = &buf[at..];
        if rest.is_empty() {
            // Only empty requests: consume them, execute nothing.
            return Ok((at > 0).then_some(Frame::Spans { len: at }));
        }
        let parsed = parse_front_from(rest, limits, spans, progress);
        if !matches!(parsed, Ok(Parsed::Incomplete)) {
            // Done with the request at the front, one way or another.
            *progress = Progress::default();
        }
        match parsed? {
            Parsed::Incomplete if at > 0 => {
                // The empty requests go first; the incomplete one behind
                // them is parsed again from its start on the next call.
                *progress = Progress::default();
                spans.clear();
                return Ok(Some(Frame::Spans { len: at }));
            }
            Parsed::Incomplete => return Ok(None),
            Parsed::Skip(n) => at += n,
            Parsed::Multibulk { len } => {
                for s in spans.iter_mut() {
                    *s = (s.0 + at, s.1 + at);
                }
                return Ok(Some(Frame::Spans { len: at + len }));
            }
            Parsed::Inline { len, args } => {
                return Ok(Some(Frame::Inline {
                    len: at + len,
                    args,
                }))
            }
        }
    }
}

/// Parses the request at the front of non-empty `buf`, multibulk or inline,
/// resuming from `progress` (and the `spans` found so far); an incomplete
/// one longer than the query buffer limit is an error.
fn parse_front_from(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Spans,
    progress: &mut Progress,
) -> Result<Parsed, ProtocolError> {
    let parsed = if buf[0] == b'*' {
        parse_multibulk_from(buf, limits, spans, progress)?
    } else {
        parse_inline(buf, limits, &mut progress.scanned)?
    };
    let most = if limits.unauthenticated {
        limits.max_query_buffer.min(super::UNAUTH_MAX_QUERY_BUFFER)
    } else {
        limits.max_query_buffer
    };
    if matches!(parsed, Parsed::Incomplete) && buf.len() > most {
        return Err(ProtocolError::QueryBufferFull);
    }
    Ok(parsed)
}

/// Finds "\r\n" at or after `from`; returns the index of '\r'.
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

/// Parses a complete multibulk at the front of `buf` from scratch.
fn parse_multibulk(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Spans,
) -> Result<Parsed, ProtocolError> {
    parse_multibulk_from(buf, limits, spans, &mut Progress::default())
}

/// Parses the multibulk at the front of `buf`, resuming from `p`: the count
/// line and every argument before `p.pos` are not looked at again, and a
/// line is searched for its end only past what was searched before.
fn parse_multibulk_from(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Spans,
    p: &mut Progress,
) -> Result<Parsed, ProtocolError> {
    if p.count == 0 {
        spans.clear();
        // Back one byte: the '\r' of a CRLF may have been the last byte seen.
        let Some(eol) = find_crlf(buf, p.scanned.saturating_sub(1)) else {
            if buf.len() > limits.max_inline_len {
                return Err(ProtocolError::TooBigMultibulkCount);
            }
            p.scanned = buf.len();
            return Ok(Parsed::Incomplete);
        };
        let count = parse_i64(&buf[1..eol]).ok_or(ProtocolError::InvalidMultibulkLength)?;
        if limits.unauthenticated && count > super::UNAUTH_MAX_ARGS as i64 {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        if count > i32::MAX as i64 || count > limits.max_args as i64 {
            return Err(ProtocolError::InvalidMultibulkLength);
        }
        if count <= 0 {
            return Ok(Parsed::Skip(eol + 2));
        }
        // Spans grow as arguments arrive: a peer announcing a million
        // arguments must send them first.
        *p = Progress {
            count: count as usize,
            pos: eol + 2,
            scanned: 0,
        };
    }
    while spans.len() < p.count {
        let pos = p.pos;
        if pos >= buf.len() {
            return Ok(Parsed::Incomplete);
        }
        if buf[pos] != b'$' {
            return Err(ProtocolError::ExpectedDollar(buf[pos]));
        }
        let Some(eol) = find_crlf(buf, pos + p.scanned.saturating_sub(1)) else {
            if buf.len() - pos > limits.max_inline_len {
                return Err(ProtocolError::TooBigBulkCount);
            }
            p.scanned = buf.len() - pos;
            return Ok(Parsed::Incomplete);
        };
        // The `$len` line is complete: a resumed call finds it at once.
        p.scanned = eol - pos;
        let len = parse_i64(&buf[pos + 1..eol]).ok_or(ProtocolError::InvalidBulkLength)?;
        if limits.unauthenticated && len > super::UNAUTH_MAX_BULK_LEN as i64 {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        if len < 0 || len as u64 > limits.max_bulk_len as u64 {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let start = eol + 2;
        let end = start + len as usize;
        if buf.len() < end + 2 {
            return Ok(Parsed::Incomplete);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(ProtocolError::BulkNotTerminated);
        }
        spans.push((start, end));
        p.pos = end + 2;
        p.scanned = 0;
    }
    Ok(Parsed::Multibulk { len: p.pos })
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
