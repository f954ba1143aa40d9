//! The demo's connections: the crate's pipelined [`Conn`] with the demo's
//! timeout, so no step of the demo can hang, and helpers that read the few
//! reply shapes the demo needs (integers, bulk text, arrays of bulks) with
//! the `resp` framing code. Replies stay raw bytes.

use std::time::Duration;

use bytes::Bytes;

pub(crate) use crate::client::Conn;
use crate::resp::parse_i64;
use crate::resp::reply::{elements, integer, is_error};

/// How long any single read or write may take before the step fails.
pub(crate) const IO_TIMEOUT_MS: u64 = 30_000;

/// Connects to `addr`, every network wait bounded by [`IO_TIMEOUT_MS`].
pub(crate) async fn connect(addr: &str) -> Result<Conn, String> {
    Ok(Conn::connect(addr, Duration::from_millis(IO_TIMEOUT_MS)).await?)
}

/// Connects, sends one command, returns its reply.
pub(crate) async fn call(addr: &str, args: &[&str]) -> Result<Bytes, String> {
    Ok(connect(addr).await?.call_str(args).await?)
}

/// The payload of a bulk (or verbatim) reply as text, or the text of a
/// simple / error reply.
pub(crate) fn text(reply: &[u8]) -> String {
    match reply.first() {
        Some(b'$') | Some(b'=') => match bulk(reply) {
            Some(b) => {
                // RESP3 verbatim strings start with a 3-letter format and ':'.
                let b = if reply[0] == b'=' && b.len() >= 4 {
                    &b[4..]
                } else {
                    b
                };
                String::from_utf8_lossy(b).into_owned()
            }
            None => String::new(),
        },
        Some(_) => String::from_utf8_lossy(&reply[1..]).trim_end().to_string(),
        None => String::new(),
    }
}

/// The payload of one `$n\r\n…\r\n` element; `None` for a nil or a non-bulk.
pub(crate) fn bulk(el: &[u8]) -> Option<&[u8]> {
    let nl = el.iter().position(|&b| b == b'\n')?;
    let n = parse_i64(el.get(1..nl.checked_sub(1)?)?)?;
    el.get(nl + 1..nl + 1 + usize::try_from(n).ok()?)
}

/// An integer reply's value.
pub(crate) fn int(reply: &[u8]) -> Result<i64, String> {
    integer(reply).ok_or_else(|| format!("expected an integer, got {:?}", text(reply)))
}

/// Fails with the reply's text when it is an error.
pub(crate) fn ok(reply: &[u8]) -> Result<(), String> {
    if is_error(reply) {
        Err(text(reply))
    } else {
        Ok(())
    }
}

/// The elements of an array reply, each as raw bytes.
pub(crate) fn array(reply: &[u8]) -> Result<Vec<&[u8]>, String> {
    if is_error(reply) {
        return Err(text(reply));
    }
    let els = elements(reply).ok_or_else(|| format!("expected an array, got {:?}", text(reply)))?;
    Ok(els.into_iter().map(|r| &reply[r]).collect())
}

/// One field of `key:value` lines (CLUSTER RINGINFO, INFO).
pub(crate) fn field<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.trim_end()
            .strip_prefix(key)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_reply_shapes() {
        assert_eq!(text(b"$5\r\nhello\r\n"), "hello");
        assert_eq!(text(b"=9\r\ntxt:a:b:c\r\n"), "a:b:c");
        assert_eq!(text(b"-ERR nope\r\n"), "ERR nope");
        assert_eq!(bulk(b"$-1\r\n"), None);
        assert_eq!(int(b":42\r\n"), Ok(42));
        let arr = b"*2\r\n$1\r\na\r\n$-1\r\n";
        assert_eq!(array(arr).unwrap(), vec![&b"$1\r\na\r\n"[..], b"$-1\r\n"]);
        assert_eq!(field("state:ok\r\nepoch:3\r\n", "epoch"), Some("3"));
        assert_eq!(field("state:ok\r\n", "stat"), None);
    }
}
