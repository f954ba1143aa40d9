//! The one way this crate opens a connection to a node: TCP (Nagle off),
//! then, when the node is reached over TLS, a rustls handshake that checks
//! the node's certificate against the configured CA and the server name
//! (by default the host of the address), optionally presenting the
//! proxy's own certificate (mutual TLS). All of it within one timeout.
//!
//! [`Stream`] is what every caller gets back, plain or TLS, one type:
//! the proxy's pipelined upstreams and pinned connections
//! (`proxy::upstream::connect`), the pub/sub links, and every [`super::Conn`]
//! (probes, health checks, the migration mover, ADDNODE's check).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::tls::TlsTo;
use super::ClientError;

/// One open connection to a node, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket under it (for its addresses).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }
}

/// Connects to `addr` and, with `tls`, completes the handshake; `timeout`
/// bounds both together.
pub async fn connect(
    addr: &str,
    tls: Option<&TlsTo>,
    timeout: Duration,
) -> Result<Stream, ClientError> {
    let open = async {
        let sock = TcpStream::connect(addr)
            .await
            .map_err(|err| ClientError::Connect {
                addr: addr.to_string(),
                err,
            })?;
        let _ = sock.set_nodelay(true);
        let Some(tls) = tls else {
            return Ok(Stream::Plain(sock));
        };
        let handshake = |err: io::Error| ClientError::Handshake {
            addr: addr.to_string(),
            err,
        };
        let name = tls
            .name_for(addr)
            .map_err(|e| handshake(io::Error::other(e)))?;
        let s = tls
            .connector()
            .connect(name, sock)
            .await
            .map_err(handshake)?;
        Ok(Stream::Tls(Box::new(s)))
    };
    tokio::time::timeout(timeout, open)
        .await
        .map_err(|_| ClientError::ConnectTimeout {
            addr: addr.to_string(),
        })?
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
