//! The one RESP client connection of this crate: connect under a timeout,
//! queue requests (one or a pipeline), write them in one go, read whole
//! replies framed by [`ReplyFramer`], every network wait bounded.
//!
//! [`Conn`] is the tokio variant (the checker, the demo, the migration mover,
//! admin probes, the load generator); [`blocking::Conn`] is the std variant
//! (readiness probes of child processes, the integration tests). Both frame
//! replies the same way and report the same [`ClientError`].
//!
//! Replies stay raw bytes: callers read what they need with `resp::reply`.
//! This is a client for tools and control paths; it must never be used on the
//! proxy's hot path (the proxy's upstreams are pipelined, shared actors in
//! `proxy::upstream`).

pub mod blocking;
pub mod stream;
pub mod tls;

use std::fmt;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

pub use stream::Stream;
pub use tls::TlsTo;

use crate::resp::encode;
use crate::resp::reply::{ReplyError, ReplyFramer};

/// Bytes reserved in the read buffer before each read.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Largest bulk accepted in a reply (Redis's `proto-max-bulk-len` default).
const MAX_BULK_BYTES: usize = crate::resp::DEFAULT_MAX_BULK_LEN;

/// Why a connection failed. Every variant leaves the connection unusable
/// (a reply may be half read), so the caller drops it and reconnects.
#[derive(Debug)]
pub enum ClientError {
    /// No connection within the timeout.
    ConnectTimeout {
        addr: String,
    },
    /// The connection was refused or failed.
    Connect {
        addr: String,
        err: std::io::Error,
    },
    /// The TLS handshake failed (the node's certificate is not trusted or
    /// names another host, or the node refused the proxy's).
    Handshake {
        addr: String,
        err: std::io::Error,
    },
    /// A write did not complete within the timeout.
    WriteTimeout,
    Write(std::io::Error),
    /// No whole reply within the timeout.
    ReadTimeout,
    Read(std::io::Error),
    /// The peer closed the connection before a whole reply arrived.
    Closed,
    /// The peer sent bytes that are not RESP.
    Protocol(ReplyError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::ConnectTimeout { addr } => write!(f, "connect to {addr}: timed out"),
            ClientError::Connect { addr, err } => write!(f, "connect to {addr}: {err}"),
            ClientError::Handshake { addr, err } => write!(f, "TLS handshake with {addr}: {err}"),
            ClientError::WriteTimeout => write!(f, "write timed out"),
            ClientError::Write(e) => write!(f, "write: {e}"),
            ClientError::ReadTimeout => write!(f, "read timed out"),
            ClientError::Read(e) => write!(f, "read: {e}"),
            ClientError::Closed => write!(f, "connection closed by the server"),
            ClientError::Protocol(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl ClientError {
    /// Whether no whole reply came in time (the peer may still be working).
    pub fn is_read_timeout(&self) -> bool {
        matches!(self, ClientError::ReadTimeout)
    }

    /// The failure in a few words, without the address, for messages that
    /// name the node already: the system's error text, `timed out` or
    /// `connection closed`.
    pub(crate) fn terse(&self) -> String {
        match self {
            ClientError::Connect { err, .. } => err.to_string(),
            ClientError::Handshake { err, .. } => format!("TLS handshake: {err}"),
            ClientError::Write(err) | ClientError::Read(err) => err.to_string(),
            ClientError::ConnectTimeout { .. }
            | ClientError::ReadTimeout
            | ClientError::WriteTimeout => "timed out".into(),
            ClientError::Closed => "connection closed".into(),
            ClientError::Protocol(e) => e.to_string(),
        }
    }
}

/// Sends one command on a fresh connection and reads one reply, all within
/// `timeout` (a check that a node is up, or empty).
pub async fn probe(addr: &str, args: &[&[u8]], timeout: Duration) -> Result<Bytes, ClientError> {
    let call = async { Conn::connect(addr, timeout).await?.call(args).await };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| ClientError::ReadTimeout)?
}

/// [`probe`] over TLS when `tls` says so.
pub async fn probe_over(
    addr: &str,
    tls: Option<&TlsTo>,
    args: &[&[u8]],
    timeout: Duration,
) -> Result<Bytes, ClientError> {
    let call = async {
        Conn::connect_over(addr, tls, timeout)
            .await?
            .call(args)
            .await
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| ClientError::ReadTimeout)?
}

/// The tools report failures as text.
impl From<ClientError> for String {
    fn from(e: ClientError) -> String {
        e.to_string()
    }
}

/// What a connection holds besides its socket: the requests queued to write
/// and the bytes read that are not yet a whole reply. Shared by both variants.
struct Buffers {
    inbuf: BytesMut,
    framer: ReplyFramer,
    out: BytesMut,
    queued: usize,
}

impl Buffers {
    fn new() -> Buffers {
        Buffers {
            inbuf: BytesMut::with_capacity(READ_CHUNK_BYTES),
            framer: ReplyFramer::new(MAX_BULK_BYTES),
            out: BytesMut::new(),
            queued: 0,
        }
    }

    fn queue_with(&mut self, encode: impl FnOnce(&mut BytesMut)) {
        encode(&mut self.out);
        self.queued += 1;
    }

    /// Everything queued, and how many requests that is; the queue is left empty.
    fn take_out(&mut self) -> (BytesMut, usize) {
        (self.out.split(), std::mem::take(&mut self.queued))
    }

    /// Takes one whole reply off the front of the read buffer, if it has all
    /// arrived.
    fn take_reply(&mut self) -> Result<Option<Bytes>, ClientError> {
        match self
            .framer
            .next(&self.inbuf)
            .map_err(ClientError::Protocol)?
        {
            Some(n) => {
                self.framer = ReplyFramer::new(MAX_BULK_BYTES);
                Ok(Some(self.inbuf.split_to(n).freeze()))
            }
            None => Ok(None),
        }
    }
}

/// One connection, used by one task. Requests are queued with [`Conn::queue`]
/// and written by [`Conn::flush`]; replies come back in order from
/// [`Conn::read_reply`].
pub struct Conn {
    sock: Stream,
    bufs: Buffers,
    timeout: Duration,
}

impl Conn {
    /// Connects to `addr` (Nagle off); `timeout` bounds the connect and then
    /// every single write and every wait for one reply.
    pub async fn connect(addr: &str, timeout: Duration) -> Result<Conn, ClientError> {
        Conn::connect_over(addr, None, timeout).await
    }

    /// [`Conn::connect`], over TLS when `tls` says so (the handshake within
    /// the same timeout).
    pub async fn connect_over(
        addr: &str,
        tls: Option<&TlsTo>,
        timeout: Duration,
    ) -> Result<Conn, ClientError> {
        let sock = stream::connect(addr, tls, timeout).await?;
        Ok(Conn {
            sock,
            bufs: Buffers::new(),
            timeout,
        })
    }

    /// The socket, to read its addresses.
    pub(crate) fn stream(&self) -> &TcpStream {
        self.sock.tcp()
    }

    /// Changes the bound on each later write and wait for a reply.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Adds one command to the outgoing batch.
    pub(crate) fn queue(&mut self, args: &[&[u8]]) {
        self.queue_with(|out| encode::command(out, args));
    }

    /// Adds an already encoded request to the outgoing batch.
    pub fn queue_raw(&mut self, raw: &[u8]) {
        self.queue_with(|out| out.extend_from_slice(raw));
    }

    /// Adds one request that `encode` writes straight into the outgoing
    /// batch (a load generator's encoder, without a copy).
    pub fn queue_with(&mut self, encode: impl FnOnce(&mut BytesMut)) {
        self.bufs.queue_with(encode);
    }

    /// Requests queued and not yet written.
    pub fn queued(&self) -> usize {
        self.bufs.queued
    }

    /// Writes the queued requests without waiting for their replies; returns
    /// how many.
    pub async fn flush(&mut self) -> Result<usize, ClientError> {
        let deadline = Instant::now() + self.timeout;
        self.flush_until(deadline).await
    }

    /// [`Conn::flush`], bounded by `deadline` instead of the timeout.
    pub async fn flush_until(&mut self, deadline: Instant) -> Result<usize, ClientError> {
        let (out, n) = self.bufs.take_out();
        tokio::time::timeout_at(deadline, self.sock.write_all(&out))
            .await
            .map_err(|_| ClientError::WriteTimeout)?
            .map_err(ClientError::Write)?;
        Ok(n)
    }

    /// Reads one whole reply, waiting at most the timeout.
    pub async fn read_reply(&mut self) -> Result<Bytes, ClientError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(reply) = self.try_reply()? {
                return Ok(reply);
            }
            self.fill_until(deadline).await?;
        }
    }

    /// A whole reply already in the read buffer, without reading.
    pub fn try_reply(&mut self) -> Result<Option<Bytes>, ClientError> {
        self.bufs.take_reply()
    }

    /// One read into the buffer, waiting until `deadline` at the most. Cancel
    /// safe: a loop may `select!` on it and drop it.
    pub async fn fill_until(&mut self, deadline: Instant) -> Result<(), ClientError> {
        let inbuf = &mut self.bufs.inbuf;
        inbuf.reserve(READ_CHUNK_BYTES);
        let read = tokio::time::timeout_at(deadline, self.sock.read_buf(inbuf))
            .await
            .map_err(|_| ClientError::ReadTimeout)?
            .map_err(ClientError::Read)?;
        if read == 0 {
            return Err(ClientError::Closed);
        }
        Ok(())
    }

    /// Writes the queued requests and reads exactly that many replies.
    pub(crate) async fn round_trip(&mut self) -> Result<Vec<Bytes>, ClientError> {
        let n = self.flush().await?;
        let mut replies = Vec::with_capacity(n);
        for _ in 0..n {
            replies.push(self.read_reply().await?);
        }
        Ok(replies)
    }

    /// One command, one reply.
    pub(crate) async fn call(&mut self, args: &[&[u8]]) -> Result<Bytes, ClientError> {
        self.queue(args);
        let mut r = self.round_trip().await?;
        Ok(r.pop().expect("one reply"))
    }

    /// [`Conn::call`] with text arguments.
    pub async fn call_str(&mut self, args: &[&str]) -> Result<Bytes, ClientError> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.call(&args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_whole_replies_one_at_a_time() {
        let mut b = Buffers::new();
        b.inbuf.extend_from_slice(b"+OK\r\n*2\r\n$1\r\na\r\n:");
        assert_eq!(&b.take_reply().unwrap().unwrap()[..], b"+OK\r\n");
        assert!(b.take_reply().unwrap().is_none());
        b.inbuf.extend_from_slice(b"1\r\n");
        assert_eq!(
            &b.take_reply().unwrap().unwrap()[..],
            b"*2\r\n$1\r\na\r\n:1\r\n"
        );
        b.inbuf.extend_from_slice(b"?\r\n");
        assert!(matches!(b.take_reply(), Err(ClientError::Protocol(_))));
    }

    #[test]
    fn queued_requests_leave_together_with_their_count() {
        let mut b = Buffers::new();
        b.queue_with(|out| encode::command(out, &[b"PING"]));
        b.queue_with(|out| out.extend_from_slice(b"*1\r\n$4\r\nPING\r\n"));
        let (out, n) = b.take_out();
        assert_eq!(
            (&out[..], n),
            (&b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n"[..], 2)
        );
        assert_eq!(b.take_out().1, 0);
    }
}
