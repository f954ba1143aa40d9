//! Opening one upstream connection: TCP connect, then the handshake the
//! node wants first (credentials or `HELLO 3`), then `SELECT` of a pool's
//! database (see `credentials`), each within the request timeout.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::{UpstreamError, UpstreamOptions};
use crate::resp::reply::{self, reply_len};

/// Opens one connection to the node (and says `HELLO 3` for RESP3); also
/// used by the pub/sub subscriber connections.
pub(crate) async fn connect(opts: &UpstreamOptions) -> Result<TcpStream, UpstreamError> {
    let mut sock = match timeout(opts.timeouts.connect(), TcpStream::connect(&opts.addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(UpstreamError::Connect(e.to_string())),
        Err(_) => return Err(UpstreamError::ConnectTimeout(opts.timeouts.connect())),
    };
    let _ = sock.set_nodelay(true);
    let first = match (&opts.credentials, opts.proto >= 3) {
        (Some(c), _) => Some(c.handshake(opts.proto).freeze()),
        (None, true) => Some(Bytes::from_static(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")),
        (None, false) => None,
    };
    if let Some(first) = first {
        match say(&mut sock, &first, opts.timeouts.request()).await {
            Ok(Ok(())) => {}
            Ok(Err(r)) => return Err(UpstreamError::HelloRefused(r)),
            Err(None) => return Err(UpstreamError::HelloTimeout),
            Err(Some(e)) => return Err(UpstreamError::Connect(e)),
        }
    }
    if let Some(cmd) = &opts.select {
        match say(&mut sock, cmd, opts.timeouts.request()).await {
            Ok(Ok(())) => {}
            Ok(Err(r)) => return Err(UpstreamError::SetupRefused(r)),
            Err(None) => return Err(UpstreamError::ConnectTimeout(opts.timeouts.request())),
            Err(Some(e)) => return Err(UpstreamError::Connect(e)),
        }
    }
    Ok(sock)
}

/// Sends one command on a fresh connection and reads its reply:
/// `Ok(Err(reply))` when the node refused it, `Err(None)` on a timeout,
/// `Err(Some(why))` when the socket failed.
async fn say(
    sock: &mut TcpStream,
    cmd: &Bytes,
    within: Duration,
) -> Result<Result<(), String>, Option<String>> {
    let mut buf = BytesMut::with_capacity(512);
    let res = timeout(within, async {
        sock.write_all(cmd).await?;
        loop {
            if let Some(n) = reply_len(&buf).map_err(std::io::Error::other)? {
                return Ok::<_, std::io::Error>(buf.split_to(n));
            }
            if sock.read_buf(&mut buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    })
    .await;
    match res {
        Ok(Ok(r)) if !reply::is_error(&r) => Ok(Ok(())),
        Ok(Ok(r)) => Ok(Err(String::from_utf8_lossy(&r).trim_end().to_string())),
        Ok(Err(e)) => Err(Some(e.to_string())),
        Err(_) => Err(None),
    }
}
