//! Hand-written RESP2 for the load generator: encode SET/GET requests into a
//! write buffer and find where one reply ends in a read buffer.
//!
//! Deliberately independent of `shardis::resp` so the load generator measures
//! the proxy with a second, separate implementation of the protocol. Never
//! touches a socket.

use bytes::{BufMut, BytesMut};

/// Largest bulk string we accept in a reply (the values we write are ≤ 16 MiB).
pub const MAX_BULK_BYTES: i64 = 64 * 1024 * 1024;
/// Largest array length we accept in a reply.
pub const MAX_ARRAY_LEN: i64 = 1024 * 1024;
/// Longest `+`/`-`/`:` line or length header before we call the reply malformed.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Why a reply could not be scanned. The connection cannot be resynchronised
/// after this, so the caller closes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanError {
    BadType(u8),
    BadInteger,
    BadLength(i64),
    MissingCrlf,
    LineTooLong,
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::BadType(b) => write!(f, "unexpected reply type byte 0x{b:02x}"),
            ScanError::BadInteger => write!(f, "malformed integer in reply"),
            ScanError::BadLength(n) => write!(f, "reply length {n} out of range"),
            ScanError::MissingCrlf => write!(f, "bulk string not terminated by CRLF"),
            ScanError::LineTooLong => write!(f, "reply line longer than {MAX_LINE_BYTES} bytes"),
        }
    }
}

/// Byte length of the first complete RESP2 reply at the front of `buf`;
/// `Ok(None)` until all of it has arrived.
///
/// Handles simple strings, errors, integers, bulk strings (including the `$-1`
/// nil) and arrays (including `*-1`), nested to any depth, without recursion:
/// an array just adds its element count to the number of replies still owed.
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, ScanError> {
    let mut pos = 0usize;
    let mut owed: u64 = 1;
    while owed > 0 {
        owed -= 1;
        let Some(&tag) = buf.get(pos) else {
            return Ok(None);
        };
        let Some((line, next)) = line_at(buf, pos + 1)? else {
            return Ok(None);
        };
        match tag {
            b'+' | b'-' => pos = next,
            b':' => {
                parse_int(line)?;
                pos = next;
            }
            b'$' => {
                let n = parse_int(line)?;
                if n == -1 {
                    pos = next;
                } else if !(0..=MAX_BULK_BYTES).contains(&n) {
                    return Err(ScanError::BadLength(n));
                } else {
                    let end = next + n as usize + 2;
                    if buf.len() < end {
                        return Ok(None);
                    }
                    if &buf[end - 2..end] != b"\r\n" {
                        return Err(ScanError::MissingCrlf);
                    }
                    pos = end;
                }
            }
            b'*' => {
                let n = parse_int(line)?;
                if n == -1 {
                    pos = next;
                } else if !(0..=MAX_ARRAY_LEN).contains(&n) {
                    return Err(ScanError::BadLength(n));
                } else {
                    owed += n as u64;
                    pos = next;
                }
            }
            other => return Err(ScanError::BadType(other)),
        }
    }
    Ok(Some(pos))
}

/// The line starting at `start` (without its CRLF) and the offset just past the CRLF.
fn line_at(buf: &[u8], start: usize) -> Result<Option<(&[u8], usize)>, ScanError> {
    let rest = buf.get(start..).unwrap_or(&[]);
    let window = &rest[..rest.len().min(MAX_LINE_BYTES + 2)];
    match memchr::memchr(b'\n', window) {
        Some(i) if i > 0 && window[i - 1] == b'\r' => Ok(Some((&rest[..i - 1], start + i + 1))),
        Some(_) => Err(ScanError::MissingCrlf),
        None if window.len() > MAX_LINE_BYTES => Err(ScanError::LineTooLong),
        None => Ok(None),
    }
}

/// Parses a RESP integer line: optional `-`, then 1..=18 ASCII digits.
pub fn parse_int(line: &[u8]) -> Result<i64, ScanError> {
    let (neg, digits) = match line.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 18 {
        return Err(ScanError::BadInteger);
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(ScanError::BadInteger);
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Ok(if neg { -n } else { n })
}

/// Writes the decimal form of `n` into `out`, returning the used tail.
pub fn itoa(mut n: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &out[i..]
}

/// Builds keys and values and encodes requests. Values are derived from the key
/// (`<key>xxxx…`, cut to `value_size`) so `--verify` can check what comes back.
pub struct Encoder {
    prefix: Vec<u8>,
    value_size: usize,
    padding: Vec<u8>,
}

impl Encoder {
    pub fn new(prefix: &[u8], value_size: usize) -> Self {
        Encoder {
            prefix: prefix.to_vec(),
            value_size,
            padding: vec![b'x'; value_size],
        }
    }

    /// The key text for key number `n`: prefix followed by the decimal number.
    pub fn key(&self, n: u64, out: &mut Vec<u8>) {
        let mut digits = [0u8; 20];
        out.clear();
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(itoa(n, &mut digits));
    }

    pub fn encode_get(&self, n: u64, scratch: &mut Vec<u8>, buf: &mut BytesMut) {
        self.key(n, scratch);
        buf.put_slice(b"*2\r\n$3\r\nGET\r\n");
        put_bulk(buf, scratch);
    }

    pub fn encode_set(&self, n: u64, scratch: &mut Vec<u8>, buf: &mut BytesMut) {
        self.key(n, scratch);
        buf.put_slice(b"*3\r\n$3\r\nSET\r\n");
        put_bulk(buf, scratch);
        let mut digits = [0u8; 20];
        buf.reserve(self.value_size + 24);
        buf.put_u8(b'$');
        buf.put_slice(itoa(self.value_size as u64, &mut digits));
        buf.put_slice(b"\r\n");
        let head = self.value_head(scratch);
        buf.put_slice(head);
        buf.put_slice(&self.padding[head.len()..]);
        buf.put_slice(b"\r\n");
    }

    /// The part of the value that depends on the key: the key text, cut to
    /// the value size; the rest is `x` padding.
    fn value_head<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        &key[..key.len().min(self.value_size)]
    }

    /// True if `value` is exactly what `encode_set` wrote for the key text `key`.
    pub fn is_expected_value(&self, key: &[u8], value: &[u8]) -> bool {
        if value.len() != self.value_size {
            return false;
        }
        let head = self.value_head(key);
        value[..head.len()] == *head && value[head.len()..].iter().all(|&b| b == b'x')
    }
}

fn put_bulk(buf: &mut BytesMut, data: &[u8]) {
    let mut digits = [0u8; 20];
    buf.put_u8(b'$');
    buf.put_slice(itoa(data.len() as u64, &mut digits));
    buf.put_slice(b"\r\n");
    buf.put_slice(data);
    buf.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPLETE: &[&[u8]] = &[
        b"+OK\r\n",
        b"-ERR unknown command 'FOO'\r\n",
        b":0\r\n",
        b":-42\r\n",
        b"$-1\r\n",
        b"$0\r\n\r\n",
        b"$5\r\nhello\r\n",
        b"$4\r\na\r\nb\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"*2\r\n$3\r\nfoo\r\n$-1\r\n",
        b"*3\r\n:1\r\n*2\r\n+a\r\n-b\r\n$1\r\nz\r\n",
        b"*1\r\n*1\r\n*1\r\n*0\r\n",
    ];

    #[test]
    fn complete_replies_have_their_exact_length_even_with_trailing_bytes() {
        for reply in COMPLETE {
            assert_eq!(reply_len(reply), Ok(Some(reply.len())), "{reply:?}");
            let mut padded = reply.to_vec();
            padded.extend_from_slice(b"+NEXT\r\n$3\r\nabc");
            assert_eq!(reply_len(&padded), Ok(Some(reply.len())), "{reply:?}");
        }
    }

    #[test]
    fn every_cut_of_a_reply_asks_for_more() {
        for reply in COMPLETE {
            for cut in 0..reply.len() {
                assert_eq!(reply_len(&reply[..cut]), Ok(None), "{reply:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn malformed_replies_are_errors() {
        let cases: &[(&[u8], ScanError)] = &[
            (b"?x\r\n", ScanError::BadType(b'?')),
            (b":abc\r\n", ScanError::BadInteger),
            (b":\r\n", ScanError::BadInteger),
            (b"$-2\r\n", ScanError::BadLength(-2)),
            (b"*-5\r\n", ScanError::BadLength(-5)),
            (b"$3\r\nabcde\r\n", ScanError::MissingCrlf),
            (b"+OK\n", ScanError::MissingCrlf),
            (b"$99999999999\r\n", ScanError::BadLength(99_999_999_999)),
        ];
        for (bytes, want) in cases {
            assert_eq!(reply_len(bytes), Err(want.clone()), "{bytes:?}");
        }
    }

    #[test]
    fn overlong_lines_are_refused_without_waiting_forever() {
        let long = vec![b'a'; MAX_LINE_BYTES + 10];
        let mut reply = b"+".to_vec();
        reply.extend_from_slice(&long);
        assert_eq!(reply_len(&reply), Err(ScanError::LineTooLong));
    }

    #[test]
    fn encoded_requests_are_well_formed_and_values_verify() {
        let enc = Encoder::new(b"key:", 16);
        let mut scratch = Vec::new();
        let mut buf = BytesMut::new();
        enc.encode_get(42, &mut scratch, &mut buf);
        assert_eq!(&buf[..], b"*2\r\n$3\r\nGET\r\n$6\r\nkey:42\r\n");
        buf.clear();
        enc.encode_set(7, &mut scratch, &mut buf);
        assert_eq!(
            &buf[..],
            b"*3\r\n$3\r\nSET\r\n$5\r\nkey:7\r\n$16\r\nkey:7xxxxxxxxxxx\r\n"
        );
        assert!(enc.is_expected_value(b"key:7", b"key:7xxxxxxxxxxx"));
        assert!(!enc.is_expected_value(b"key:8", b"key:7xxxxxxxxxxx"));
        assert!(!enc.is_expected_value(b"key:7", b"key:7xxxxxxxxxx"));
    }

    #[test]
    fn tiny_values_hold_a_cut_key() {
        let enc = Encoder::new(b"key:", 3);
        let mut scratch = Vec::new();
        let mut buf = BytesMut::new();
        enc.encode_set(123, &mut scratch, &mut buf);
        assert!(buf.ends_with(b"$3\r\nkey\r\n"));
        assert!(enc.is_expected_value(b"key:123", b"key"));
    }

    #[test]
    fn itoa_matches_to_string() {
        for n in [0u64, 7, 10, 99, 12345, u64::MAX] {
            let mut d = [0u8; 20];
            assert_eq!(itoa(n, &mut d), n.to_string().as_bytes());
        }
    }
}
