//! Opening one upstream connection: TCP connect (and the TLS handshake of a
//! node reached over TLS, `client::stream`), then the handshake the
//! node wants first (credentials or `HELLO 3`), then `SELECT` of a pool's
//! database (see `credentials`), each within the request timeout.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

use super::{UpstreamError, UpstreamOptions};
use crate::client::{stream, ClientError, Stream};
use crate::resp::reply::{self, reply_len};

/// Opens one connection to the node (and says `HELLO 3` for RESP3); also
/// used by the pub/sub subscriber connections.
pub(crate) async fn connect(opts: &UpstreamOptions) -> Result<Stream, UpstreamError> {
    let tls = opts.tls.as_deref();
    let mut sock = match stream::connect(&opts.addr, tls, opts.timeouts.connect()).await {
        Ok(s) => s,
        Err(ClientError::ConnectTimeout { .. }) => {
            return Err(UpstreamError::ConnectTimeout(opts.timeouts.connect()))
        }
        Err(e) => return Err(UpstreamError::Connect(e.terse())),
    };
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

/// True when the node answers `args` on a new connection opened as
/// [`connect`] opens one (TLS, credentials, database) without an error,
/// within `within`: the check that a node which closed a connection is
/// still alive.
pub(crate) async fn answers(opts: &UpstreamOptions, args: &Bytes, within: Duration) -> bool {
    let opts = UpstreamOptions {
        timeouts: super::Timeouts::new(within.as_millis() as u64, within.as_millis() as u64),
        ..opts.clone()
    };
    match connect(&opts).await {
        Ok(mut sock) => matches!(say(&mut sock, args, within).await, Ok(Ok(()))),
        Err(_) => false,
    }
}

/// Sends one command on a fresh connection and reads its reply:
/// `Ok(Err(reply))` when the node refused it, `Err(None)` on a timeout,
/// `Err(Some(why))` when the socket failed.
async fn say(
    sock: &mut Stream,
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
