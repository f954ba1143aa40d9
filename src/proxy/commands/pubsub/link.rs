//! Where a subscriber's connection goes and the connection itself: the
//! choice of node (the fewest pinned connections among nodes that stay in
//! the routing), one open connection split into a reader (frames) and a
//! writer, the commands that re-subscribe everything after a move, and the
//! probe that tells a node that closed a connection from a node that died.
//! Used by `conn` (the subscriber actor) only; no state of its own.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

use crate::client::Stream;
use crate::proxy::commands::pubsub::frame::Family;
use crate::proxy::upstream::pinned::{PinError, Slot};
use crate::proxy::upstream::shard::Shard;
use crate::proxy::upstream::topology::{Node, Routing};
use crate::proxy::upstream::{connect, UpstreamError, UpstreamOptions};
use crate::resp::encode;
use crate::resp::reply::ReplyFramer;

/// A place and a node for a subscriber: among the nodes that stay in the
/// routing (see [`is_staying`]), except `avoid`, the one with the fewest
/// pinned connections; ties go by client id so subscribers spread.
pub(super) fn take_slot(
    routing: &Routing,
    avoid: &[Arc<Node>],
    client: u64,
) -> Result<(Slot, Arc<Node>), PinError> {
    let mut nodes: Vec<&Arc<Node>> = routing
        .primaries()
        .filter(|n| is_staying(routing, n) && !avoid.iter().any(|a| Arc::ptr_eq(a, n)))
        .collect();
    if nodes.is_empty() {
        return Err(PinError::NoNode);
    }
    let k = nodes.len();
    let start = client as usize % k;
    nodes.rotate_left(start);
    nodes.sort_by_key(|n| (n.health.state() == "down", n.pins.open()));
    let mut last = PinError::NoNode;
    for n in nodes {
        match Slot::take(n) {
            Ok(s) => return Ok((s, n.clone())),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// True when `node` serves a shard of the routing and, while a migration
/// runs, of its next ring too (so a subscriber leaves a node before the
/// cutover drops it).
pub(super) fn is_staying(routing: &Routing, node: &Arc<Node>) -> bool {
    let held = |shards: &[Arc<Shard>]| {
        shards
            .iter()
            .flat_map(|s| s.nodes())
            .any(|n| Arc::ptr_eq(n, node))
    };
    held(&routing.shards)
        && routing
            .migration
            .as_ref()
            .is_none_or(|m| held(&m.next_shards))
}

/// One open connection to a node.
pub(super) struct Link {
    pub(super) reader: Reader,
    pub(super) writer: Writer,
    pub(super) node: Arc<Node>,
    pub(super) label: String,
    // Last: the socket closes before the place is given back.
    _slot: Slot,
}

pub(super) struct Reader {
    pub(super) rd: ReadHalf<Stream>,
    pub(super) buf: BytesMut,
    pub(super) framer: ReplyFramer,
}

pub(super) struct Writer {
    pub(super) wr: WriteHalf<Stream>,
    pub(super) out: BytesMut,
    /// Written since the last flush (TLS may hold a record back).
    pub(super) unflushed: bool,
}

impl Link {
    pub(super) async fn open(
        node: Arc<Node>,
        slot: Slot,
        proto: u8,
    ) -> Result<Link, UpstreamError> {
        let opts = UpstreamOptions {
            proto,
            pinned: true,
            ..node.options().clone()
        };
        let sock = connect(&opts).await?;
        let (rd, wr) = tokio::io::split(sock);
        Ok(Link {
            reader: Reader {
                rd,
                buf: BytesMut::with_capacity(16 * 1024),
                framer: ReplyFramer::new(opts.max_bulk_len),
            },
            writer: Writer {
                wr,
                out: BytesMut::new(),
                unflushed: false,
            },
            label: opts.label,
            node,
            _slot: slot,
        })
    }
}

impl Writer {
    /// Writes all of `bytes` now if the socket takes them without waiting
    /// (a TLS stream buffers them as one record); false otherwise.
    pub(super) fn try_write_all(&mut self, bytes: &[u8]) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut wr = std::pin::Pin::new(&mut self.wr);
        let sent = matches!(
            wr.as_mut().poll_write(&mut cx, bytes),
            std::task::Poll::Ready(Ok(n)) if n == bytes.len()
        );
        // A TLS record may wait in the session's buffer: push it out now.
        let _ = wr.poll_flush(&mut cx);
        sent
    }
}

impl Reader {
    /// Reads once; the complete frames it brought (none for a partial one).
    async fn read(&mut self) -> Result<Vec<Bytes>, UpstreamError> {
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(16 * 1024);
        }
        match self.rd.read_buf(&mut self.buf).await {
            Ok(0) => return Err(UpstreamError::ClosedByNode),
            Ok(_) => {}
            Err(e) => return Err(UpstreamError::Io(e.to_string())),
        }
        let mut frames = Vec::new();
        loop {
            match self.framer.next(&self.buf) {
                Ok(Some(n)) => frames.push(self.buf.split_to(n).freeze()),
                Ok(None) => return Ok(frames),
                Err(e) => return Err(UpstreamError::InvalidReply(e)),
            }
        }
    }
}

pub(super) async fn read_some(r: Option<&mut Reader>) -> Result<Vec<Bytes>, UpstreamError> {
    match r {
        Some(r) => r.read().await,
        None => std::future::pending().await,
    }
}

/// Writes some of what `w` holds, or flushes what the stream kept back (a
/// TLS record) once all is written; the written bytes leave `w.out`.
pub(super) async fn write_some(w: Option<&mut Writer>) -> std::io::Result<()> {
    let Some(w) = w else {
        return std::future::pending().await;
    };
    if w.out.is_empty() {
        w.wr.flush().await?;
        w.unflushed = false;
        return Ok(());
    }
    match w.wr.write(&w.out).await? {
        0 => Err(std::io::ErrorKind::WriteZero.into()),
        n => {
            let _ = w.out.split_to(n);
            w.unflushed = true;
            Ok(())
        }
    }
}

/// How long a node that closed a subscriber connection has to answer PING
/// on a new one before it counts as dead.
const PROBE_MS: u64 = 1000;

/// True when `node` answers PING on a new connection, opened as its
/// upstreams open theirs (TLS, credentials), within [`PROBE_MS`].
/// A node that closed a subscriber connection and still answers closed it
/// on purpose (the output buffer limit of its pubsub class, CLIENT KILL);
/// one that does not has died.
pub(super) async fn is_alive(node: &Arc<Node>) -> bool {
    let ping = Bytes::from_static(b"*1\r\n$4\r\nPING\r\n");
    crate::proxy::upstream::answers(node.options(), &ping, Duration::from_millis(PROBE_MS)).await
}

/// The commands that subscribe to everything in `subs` again.
pub(super) fn resubscribe(subs: &[HashSet<Bytes>; 3]) -> (BytesMut, usize) {
    let mut out = BytesMut::new();
    let mut n = 0;
    for f in Family::ALL {
        let set = &subs[f.index()];
        if set.is_empty() {
            continue;
        }
        let mut args: Vec<&[u8]> = vec![f.subscribe()];
        args.extend(set.iter().map(|c| &c[..]));
        encode::command(&mut out, &args);
        n += set.len();
    }
    (out, n)
}
