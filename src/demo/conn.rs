//! A small pipelined RESP client for the demo: queue any number of commands,
//! write them in one go, read the same number of raw replies back. Every
//! network wait is under a timeout so no step of the demo can hang.
//!
//! Replies stay raw bytes; the helpers below read the few shapes the demo
//! needs (integers, bulk text, arrays of bulks) with the `resp` framing code.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::resp::reply::{elements, integer, is_error, reply_len};
use crate::resp::{encode, parse_i64};

/// How long any single read or write may take before the step fails.
pub const IO_TIMEOUT_MS: u64 = 30_000;

/// One connection, used by one task.
pub struct Conn {
    sock: TcpStream,
    inbuf: BytesMut,
    out: BytesMut,
    queued: usize,
    timeout: Duration,
}

impl Conn {
    /// Connects to `addr` (bounded by the I/O timeout).
    pub async fn connect(addr: &str) -> Result<Conn, String> {
        let timeout = Duration::from_millis(IO_TIMEOUT_MS);
        let sock = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| format!("connect to {addr}: timed out"))?
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        let _ = sock.set_nodelay(true);
        Ok(Conn {
            sock,
            inbuf: BytesMut::with_capacity(64 * 1024),
            out: BytesMut::with_capacity(64 * 1024),
            queued: 0,
            timeout,
        })
    }

    /// Adds one command to the outgoing batch.
    pub fn queue(&mut self, args: &[&[u8]]) {
        encode::command(&mut self.out, args);
        self.queued += 1;
    }

    /// Adds an already encoded command to the outgoing batch.
    pub fn queue_raw(&mut self, raw: &[u8]) {
        self.out.extend_from_slice(raw);
        self.queued += 1;
    }

    /// Writes the queued commands without waiting for their replies; returns how many.
    pub async fn flush(&mut self) -> Result<usize, String> {
        let n = self.queued;
        let out = self.out.split();
        self.queued = 0;
        tokio::time::timeout(self.timeout, self.sock.write_all(&out))
            .await
            .map_err(|_| "write timed out".to_string())?
            .map_err(|e| format!("write: {e}"))?;
        Ok(n)
    }

    /// Reads one complete reply.
    pub async fn read_reply(&mut self) -> Result<Bytes, String> {
        loop {
            if let Some(n) = reply_len(&self.inbuf).map_err(|e| e.to_string())? {
                return Ok(self.inbuf.split_to(n).freeze());
            }
            let read = tokio::time::timeout(self.timeout, self.sock.read_buf(&mut self.inbuf))
                .await
                .map_err(|_| "read timed out".to_string())?
                .map_err(|e| format!("read: {e}"))?;
            if read == 0 {
                return Err("connection closed by the server".into());
            }
        }
    }

    /// Writes the queued commands and reads exactly that many replies.
    pub async fn round_trip(&mut self) -> Result<Vec<Bytes>, String> {
        let n = self.flush().await?;
        let mut replies = Vec::with_capacity(n);
        for _ in 0..n {
            replies.push(self.read_reply().await?);
        }
        Ok(replies)
    }

    /// One command, one reply.
    pub async fn call(&mut self, args: &[&str]) -> Result<Bytes, String> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.queue(&args);
        let mut r = self.round_trip().await?;
        Ok(r.pop().expect("one reply"))
    }
}

/// Connects, sends one command, returns its reply.
pub async fn call(addr: &str, args: &[&str]) -> Result<Bytes, String> {
    Conn::connect(addr).await?.call(args).await
}

/// The payload of a bulk (or verbatim) reply as text, or the text of a
/// simple / error reply.
pub fn text(reply: &[u8]) -> String {
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
pub fn bulk(el: &[u8]) -> Option<&[u8]> {
    let nl = el.iter().position(|&b| b == b'\n')?;
    let n = parse_i64(el.get(1..nl.checked_sub(1)?)?)?;
    el.get(nl + 1..nl + 1 + usize::try_from(n).ok()?)
}

/// An integer reply's value.
pub fn int(reply: &[u8]) -> Result<i64, String> {
    integer(reply).ok_or_else(|| format!("expected an integer, got {:?}", text(reply)))
}

/// Fails with the reply's text when it is an error.
pub fn ok(reply: &[u8]) -> Result<(), String> {
    if is_error(reply) {
        Err(text(reply))
    } else {
        Ok(())
    }
}

/// The elements of an array reply, each as raw bytes.
pub fn array(reply: &[u8]) -> Result<Vec<&[u8]>, String> {
    if is_error(reply) {
        return Err(text(reply));
    }
    let els = elements(reply).ok_or_else(|| format!("expected an array, got {:?}", text(reply)))?;
    Ok(els.into_iter().map(|r| &reply[r]).collect())
}

/// One field of `key:value` lines (CLUSTER RINGINFO, INFO).
pub fn field<'a>(info: &'a str, key: &str) -> Option<&'a str> {
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
