//! The checker's client: the crate's [`Conn`], one request at a time, every
//! call under a timeout, reconnecting on demand, replies decoded into
//! [`Reply`] values.

use std::time::Duration;

use crate::client::{ClientError, Conn};
use crate::resp::parse_i64;

/// One decoded reply (what the checker needs of RESP2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    pub(crate) fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            Reply::Bulk(Some(b)) => parse_i64(b),
            _ => None,
        }
    }

    pub(crate) fn text(&self) -> String {
        match self {
            Reply::Simple(s) | Reply::Error(s) => s.clone(),
            Reply::Int(n) => n.to_string(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Bulk(None) => String::new(),
            Reply::Array(v) => v.iter().map(|r| r.text()).collect::<Vec<_>>().join("\n"),
        }
    }
}

/// A bulk reply of `s` (for tests).
#[cfg(test)]
pub(crate) fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

fn decode(buf: &[u8]) -> (Reply, usize) {
    let nl = buf
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(buf.len() - 1);
    let line = &buf[1..nl.saturating_sub(1)];
    let text = || String::from_utf8_lossy(line).into_owned();
    match buf[0] {
        b'+' => (Reply::Simple(text()), nl + 1),
        b'-' => (Reply::Error(text()), nl + 1),
        b':' => (Reply::Int(parse_i64(line).unwrap_or(0)), nl + 1),
        b'$' => {
            let n = parse_i64(line).unwrap_or(-1);
            if n < 0 {
                return (Reply::Bulk(None), nl + 1);
            }
            let start = nl + 1;
            (
                Reply::Bulk(Some(buf[start..start + n as usize].to_vec())),
                start + n as usize + 2,
            )
        }
        b'*' => {
            let n = parse_i64(line).unwrap_or(-1);
            let mut pos = nl + 1;
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                let (r, used) = decode(&buf[pos..]);
                items.push(r);
                pos += used;
            }
            (Reply::Array(items), pos)
        }
        _ => (
            Reply::Error(format!(
                "unexpected reply {:?}",
                String::from_utf8_lossy(buf)
            )),
            buf.len(),
        ),
    }
}

/// A connection to `addr`, opened lazily and reopened after any failure.
pub(crate) struct Client {
    addr: String,
    conn: Option<Conn>,
    timeout: Duration,
}

impl Client {
    pub(crate) fn new(addr: &str, timeout: Duration) -> Client {
        Client {
            addr: addr.to_string(),
            conn: None,
            timeout,
        }
    }

    /// Sends one command; `Err` is a transport failure (the command may or
    /// may not have run), `Ok(Reply::Error)` a server error. The timeout
    /// bounds the whole call, connecting included.
    pub(crate) async fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        let r = tokio::time::timeout(self.timeout, self.call_inner(args)).await;
        match r {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.terse())
            }
            Err(_) => {
                self.conn = None;
                Err("timed out".into())
            }
        }
    }

    /// Closes the connection (the server forgets its MULTI and WATCH); the
    /// next call opens a new one.
    pub(crate) fn drop_connection(&mut self) {
        self.conn = None;
    }

    async fn call_inner(&mut self, args: &[&[u8]]) -> Result<Reply, ClientError> {
        let conn = match &mut self.conn {
            Some(c) => c,
            None => self
                .conn
                .insert(Conn::connect(&self.addr, self.timeout).await?),
        };
        let frame = conn.call(args).await?;
        Ok(decode(&frame).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_replies() {
        assert_eq!(decode(b"+OK\r\n").0, Reply::Simple("OK".into()));
        assert_eq!(decode(b":-3\r\n").0, Reply::Int(-3));
        assert_eq!(decode(b"$-1\r\n").0, Reply::Bulk(None));
        assert_eq!(
            decode(b"*2\r\n$1\r\na\r\n:1\r\n").0,
            Reply::Array(vec![Reply::Bulk(Some(b"a".to_vec())), Reply::Int(1)])
        );
    }
}
