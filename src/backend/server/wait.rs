//! A connection's wait for the reply of its blocked request (BLPOP with
//! nothing to pop, WAIT): the reply a push sends through `backend::blocking`, or
//! the timeout reply; meanwhile the socket is read on, so a client that
//! leaves is noticed and unregistered at once, and a subscriber's
//! messages are written as they arrive.
//!
//! Called by the server loop (`mod.rs`) between batches; owns nothing
//! beyond the wait, and never runs a command.

use super::output::{wait_pushes, write_pushes};
use super::query::BUFFER_BYTES;
use crate::backend::blocking::{Block, Waiting};
use crate::backend::commands::Client;
use crate::backend::node::Node;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

/// Waits for a blocked request's reply: served by a push, or its timeout
/// reply. Meanwhile reads on, to notice the client leaving (Redis keeps
/// what it sends for later). `None` when the connection must close (the
/// client left, its query buffer overflowed, the node stops); dropping
/// the registration on the way out means it pops nothing.
#[allow(clippy::too_many_arguments)]
pub(super) async fn blocked(
    node: &Node,
    client: &Client,
    block: Block,
    sock: &mut TcpStream,
    input: &mut BytesMut,
    out: &mut BytesMut,
    stop: &mut watch::Receiver<bool>,
) -> std::io::Result<Option<Bytes>> {
    let _counted = CountedBlocked::new(&node.stats.blocked_clients);
    let _timed = (block.timeout_ms != 0).then(|| CountedBlocked::new(&node.stats.timeout_clients));
    let mut waiting = block
        .ticket
        .map(|t| Waiting::new(&node.blocking, &node.store.ready, t));
    let deadline = match block.timeout_ms {
        0 => None,
        ms => Instant::now().checked_add(Duration::from_millis(ms)),
    };
    let timeout = async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    // WAIT: answered with the count once enough replicas acknowledged or
    // its own timeout passed.
    let acks = async {
        match block.wait {
            Some(w) => crate::backend::replication::commands::wait_for(node, w).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(acks);
    loop {
        if input.capacity() - input.len() < BUFFER_BYTES / 4 {
            input.reserve(BUFFER_BYTES);
        }
        // A subscriber (RESP3) gets its messages while it blocks, as in Redis.
        let mut pushes = false;
        tokio::select! {
            reply = served(&mut waiting) => {
                // CLIENT UNBLOCK … TIMEOUT: answered as a timeout.
                if reply.is_empty() {
                    return Ok(Some(Bytes::from_static(block.on_timeout)));
                }
                return Ok(Some(reply));
            }
            n = &mut acks => return Ok(Some(Bytes::from(format!(":{n}\r\n")))),
            _ = wait_pushes(client), if client.pubsub.is_some() => pushes = true,
            _ = &mut timeout => {
                // A push may have served it just now: then that is the reply.
                let served = waiting.as_mut().and_then(|w| w.cancel());
                return Ok(Some(served.unwrap_or_else(|| Bytes::from_static(block.on_timeout))));
            }
            r = sock.read_buf(input) => {
                if r? == 0 || input.len() > node.limits.max_query_buffer {
                    return Ok(None);
                }
            }
            _ = stop.changed() => return Ok(None),
        }
        if pushes && !write_pushes(client, out, sock).await? {
            return Ok(None);
        }
    }
}

/// The reply of a registered waiter; never, for WAIT (no registration).
async fn served(waiting: &mut Option<Waiting<'_>>) -> Bytes {
    match waiting {
        Some(w) => w.served().await,
        None => std::future::pending().await,
    }
}

/// INFO `blocked_clients` (and `clients_in_timeout_table`), counted for as
/// long as a connection waits.
struct CountedBlocked<'a>(&'a AtomicUsize);

impl<'a> CountedBlocked<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Relaxed);
        CountedBlocked(n)
    }
}

impl Drop for CountedBlocked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}
