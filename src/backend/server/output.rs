//! Writing a client's replies, and a subscriber's messages between them:
//! a subscriber's mailbox closed over its output limit ends a write the
//! client is not reading. Used by the socket loop (`mod.rs`) and the wait
//! of a blocked request (`wait.rs`).

use crate::backend::commands::Client;
use crate::backend::pubsub::mailbox::{Mailbox, Taken};
use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Most pub/sub message bytes a subscriber's loop writes per wakeup before
/// it reads its own commands again.
const PUSH_WRITE_BYTES: usize = 256 * 1024;
/// A subscriber's mailbox.
pub(super) fn mailbox(client: &Client) -> Option<&Mailbox> {
    client.pubsub.as_ref().map(|s| &*s.mailbox)
}

/// Waits until a subscriber's mailbox has messages; never, for others.
pub(super) async fn wait_pushes(client: &Client) {
    match mailbox(client) {
        Some(m) => m.wait().await,
        None => std::future::pending().await,
    }
}

/// Writes part of a subscriber's waiting messages (`out` is empty here).
/// False when its mailbox was closed over the output buffer limit.
pub(super) async fn write_pushes(
    client: &Client,
    out: &mut BytesMut,
    sock: &mut TcpStream,
) -> std::io::Result<bool> {
    let Some(m) = mailbox(client) else {
        return Ok(true);
    };
    match m.take(out, PUSH_WRITE_BYTES) {
        Taken::Closed => return Ok(false),
        // The rest on a later turn, after the commands already read.
        Taken::More => m.rewake(),
        Taken::Empty => {}
    }
    write_out(sock, out, Some(m)).await
}

/// Writes `out` and clears it. For a subscriber, a mailbox closed over its
/// limit ends a write the client is not reading (returns false): PUBLISH
/// never waits on it, and the connection closes.
pub(super) async fn write_out(
    sock: &mut TcpStream,
    out: &mut BytesMut,
    mailbox: Option<&Mailbox>,
) -> std::io::Result<bool> {
    let Some(m) = mailbox else {
        sock.write_all(out).await?;
        out.clear();
        return Ok(true);
    };
    let write = sock.write_all(out);
    tokio::pin!(write);
    let mut woken = false;
    loop {
        tokio::select! {
            r = &mut write => {
                r?;
                break;
            }
            _ = m.wait() => {
                if m.is_closed() {
                    return Ok(false);
                }
                woken = true;
            }
        }
    }
    if woken {
        // Messages arrived during the write: the loop must still see them.
        m.rewake();
    }
    out.clear();
    Ok(true)
}
