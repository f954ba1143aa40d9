//! Inline requests (`GET k\r\n`, as typed into `nc` or sent by
//! redis-benchmark's PING_INLINE): finding the line and splitting it into
//! arguments with Redis's quoting rules.
//!
//! Called by the request decoder ([`super::request`]); no sockets, no state
//! beyond what the caller keeps between calls.

use super::parsed::{Parsed, ProtocolError};
use super::Limits;

/// Parses the inline request at the front of `buf`. `scanned` is how many
/// bytes earlier calls searched for its newline in vain (resumed from there,
/// so a long line arriving in pieces is searched once); it is updated.
pub(crate) fn parse_inline(
    buf: &[u8],
    limits: &Limits,
    scanned: &mut usize,
) -> Result<Parsed, ProtocolError> {
    let from = (*scanned).min(buf.len());
    let Some(nl) = memchr::memchr(b'\n', &buf[from..]).map(|i| i + from) else {
        *scanned = buf.len();
        if buf.len() > limits.max_inline_len {
            return Err(ProtocolError::TooBigInline);
        }
        return Ok(Parsed::Incomplete);
    };
    if nl > limits.max_inline_len {
        return Err(ProtocolError::TooBigInline);
    }
    let mut line = &buf[..nl];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    let args = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
    if args.is_empty() {
        return Ok(Parsed::Skip(nl + 1));
    }
    if args.len() > limits.max_args {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    Ok(Parsed::Inline { len: nl + 1, args })
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// A closing quote at `p` must be followed by a space or the end of the
/// line (`None`: unbalanced).
fn closes(line: &[u8], p: usize) -> Option<bool> {
    (p + 1 >= line.len() || is_space(line[p + 1])).then_some(true)
}

/// A quoted argument's byte at `p`; `None` when the line ended inside the
/// quotes.
fn in_quotes(line: &[u8], p: usize, c: u8) -> Option<u8> {
    (p < line.len()).then_some(c)
}

/// Splits an inline line like Redis's `sdssplitargs`: whitespace separates
/// arguments; "double quotes" take `\n \r \t \b \a \\ \" \xHH` escapes;
/// 'single quotes' take `\'`; a closing quote must be followed by a space or the
/// end. `None` means unbalanced quotes.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut p = 0;
    let at = |i: usize| -> u8 { line.get(i).copied().unwrap_or(0) };
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(args);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if inq {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && hex_val(at(p + 2)).is_some()
                    && hex_val(at(p + 3)).is_some()
                {
                    cur.push(hex_val(at(p + 2))? * 16 + hex_val(at(p + 3))?);
                    p += 3;
                } else if c == b'\\' && p + 1 < line.len() {
                    p += 1;
                    cur.push(match line[p] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    done = closes(line, p)?;
                } else {
                    cur.push(in_quotes(line, p, c)?);
                }
            } else if insq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    done = closes(line, p)?;
                } else {
                    cur.push(in_quotes(line, p, c)?);
                }
            } else if p >= line.len() {
                done = true;
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    _ => cur.push(c),
                }
            }
            if p < line.len() {
                p += 1;
            }
        }
        args.push(cur);
    }
}
