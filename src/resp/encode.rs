//! Reply encoders: append one RESP value to a `BytesMut`.
//!
//! Used for replies the proxy or the node builds itself (local commands,
//! errors, merged multi-key replies). Forwarded replies are never re-encoded.
//! `proto` is the client's protocol version (2 or 3), where the two differ.

use bytes::{BufMut, BytesMut};

fn put_len(out: &mut BytesMut, prefix: u8, n: i64) {
    let mut buf = itoa_buf();
    out.put_u8(prefix);
    out.put_slice(fmt_i64(&mut buf, n));
    out.put_slice(b"\r\n");
}

fn itoa_buf() -> [u8; 20] {
    [0u8; 20]
}

/// Formats `n` into `buf` without allocating; returns the digits.
pub(crate) fn fmt_i64(buf: &mut [u8; 20], n: i64) -> &[u8] {
    let mut i = digits(buf, n.unsigned_abs());
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Formats `v` into `buf` without allocating; returns the digits.
#[inline]
pub(crate) fn fmt_u64(buf: &mut [u8; 20], v: u64) -> &[u8] {
    let i = digits(buf, v);
    &buf[i..]
}

/// Writes the decimal digits of `v` at the end of `buf`; where they start.
/// (20 bytes hold `u64::MAX`, and `i64::MIN` with its sign.)
#[inline]
fn digits(buf: &mut [u8; 20], mut v: u64) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return i;
        }
    }
}

/// `+s\r\n`
pub(crate) fn simple(out: &mut BytesMut, s: &str) {
    out.reserve(s.len() + 3);
    out.put_u8(b'+');
    out.put_slice(s.as_bytes());
    out.put_slice(b"\r\n");
}

/// `-s\r\n`; `s` carries its own prefix (`ERR …`, `WRONGTYPE …`). CR/LF in `s`
/// become spaces so an error can never break the framing.
pub(crate) fn error(out: &mut BytesMut, s: &str) {
    out.reserve(s.len() + 3);
    out.put_u8(b'-');
    for &b in s.as_bytes() {
        out.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
    }
    out.put_slice(b"\r\n");
}

/// `:n\r\n`
pub(crate) fn integer(out: &mut BytesMut, n: i64) {
    put_len(out, b':', n);
}

/// `$len\r\nbytes\r\n`
pub fn bulk(out: &mut BytesMut, b: &[u8]) {
    out.reserve(b.len() + 16);
    put_len(out, b'$', b.len() as i64);
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// The null bulk string: `$-1` in RESP2, `_` in RESP3.
pub(crate) fn null(out: &mut BytesMut, proto: u8) {
    out.put_slice(if proto >= 3 { b"_\r\n" } else { b"$-1\r\n" });
}

/// The null array: `*-1` in RESP2, `_` in RESP3.
pub(crate) fn null_array(out: &mut BytesMut, proto: u8) {
    out.put_slice(if proto >= 3 { b"_\r\n" } else { b"*-1\r\n" });
}

/// `*n\r\n`
pub fn array_len(out: &mut BytesMut, n: usize) {
    put_len(out, b'*', n as i64);
}

/// A map header: `%n` in RESP3, an array of `2n` flat elements in RESP2.
pub(crate) fn map_len(out: &mut BytesMut, n: usize, proto: u8) {
    if proto >= 3 {
        put_len(out, b'%', n as i64);
    } else {
        put_len(out, b'*', 2 * n as i64);
    }
}

/// A set header: `~n` in RESP3, `*n` in RESP2.
pub(crate) fn set_len(out: &mut BytesMut, n: usize, proto: u8) {
    put_len(out, if proto >= 3 { b'~' } else { b'*' }, n as i64);
}

/// Text for a human (INFO): a verbatim string `=len\r\ntxt:…` in RESP3, bulk in RESP2.
pub(crate) fn verbatim(out: &mut BytesMut, text: &[u8], proto: u8) {
    if proto >= 3 {
        put_len(out, b'=', text.len() as i64 + 4);
        out.put_slice(b"txt:");
        out.put_slice(text);
        out.put_slice(b"\r\n");
    } else {
        bulk(out, text);
    }
}

/// Encodes a request (a command and its arguments) as a RESP multibulk.
pub fn command(out: &mut BytesMut, args: &[&[u8]]) {
    array_len(out, args.len());
    for a in args {
        bulk(out, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoders_write_exact_bytes() {
        let mut b = BytesMut::new();
        simple(&mut b, "OK");
        error(&mut b, "ERR bad\r\nthing");
        integer(&mut b, -12);
        integer(&mut b, i64::MIN);
        bulk(&mut b, b"hi");
        null(&mut b, 2);
        null(&mut b, 3);
        null_array(&mut b, 2);
        map_len(&mut b, 2, 2);
        map_len(&mut b, 2, 3);
        command(&mut b, &[b"GET", b"k"]);
        assert_eq!(
            &b[..],
            &b"+OK\r\n-ERR bad  thing\r\n:-12\r\n:-9223372036854775808\r\n$2\r\nhi\r\n$-1\r\n_\r\n*-1\r\n*4\r\n%2\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..]
        );
        assert_eq!(fmt_u64(&mut [0; 20], 0), b"0");
        assert_eq!(fmt_u64(&mut [0; 20], u64::MAX), b"18446744073709551615");
    }
}
