//! One client connection: decode requests, dispatch them, return replies in
//! request order.
//!
//! ```text
//!  socket ─read─► BytesMut ─decode_request─► Request ─dispatch─► Pending ──┐
//!                                                                          │ bounded channel
//!  socket ◄─write (batched)─ writer task ◄── awaits each Pending in order ◄┘   (pipeline depth)
//! ```
//!
//! The reader half belongs to [`ClientSession::run`], the writer half to one
//! writer task; neither touches the other's half. When the channel of owed
//! replies is full the session stops reading, so a client that pipelines
//! without reading cannot grow the proxy's memory. A protocol error is answered,
//! then that client alone is closed; a bad argument is answered and the session
//! goes on.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::Proxy;
use crate::resp::{decode_request, encode, Request};

/// A reply the client is owed, in request order.
pub enum Pending {
    /// Built by the proxy, ready now.
    Ready(Bytes),
    /// Forwarded to one node; the reply arrives on the channel.
    One(oneshot::Receiver<Bytes>),
    /// Anything that needs more work (merges, fan-outs, admin): a future.
    Later(Pin<Box<dyn Future<Output = Bytes> + Send>>),
    /// Write what is owed so far, then close (QUIT, protocol errors).
    Close,
}

/// Per-connection state that local commands read and change.
pub struct ClientSession {
    pub proxy: Arc<Proxy>,
    pub id: u64,
    /// Protocol version chosen by HELLO: 2 or 3.
    pub proto: u8,
    pub name: Option<Bytes>,
    pub peer: String,
    out: mpsc::Sender<Pending>,
    closing: bool,
}

impl ClientSession {
    /// Serves one client until it disconnects, errs, or the proxy shuts down.
    pub async fn run(proxy: Arc<Proxy>, sock: TcpStream) {
        let _ = sock.set_nodelay(true);
        let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let (mut rd, wr) = sock.into_split();
        let depth = proxy.config.pipeline_depth;
        let (out, rx) = mpsc::channel(depth);
        let writer = tokio::spawn(write_replies(wr, rx));
        let id = proxy.next_client_id.fetch_add(1, Ordering::Relaxed);
        let mut session = ClientSession {
            proxy,
            id,
            proto: 2,
            name: None,
            peer,
            out,
            closing: false,
        };
        let mut buf = BytesMut::with_capacity(16 * 1024);
        let limits = session.proxy.config.limits;
        'read: loop {
            match rd.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            loop {
                match decode_request(&mut buf, &limits) {
                    Ok(Some(req)) => {
                        session.proxy.stats.commands.fetch_add(1, Ordering::Relaxed);
                        session.dispatch(req).await;
                        if session.closing {
                            break 'read;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let mut b = BytesMut::new();
                        encode::error(&mut b, &format!("ERR {e}"));
                        session.push(Pending::Ready(b.freeze())).await;
                        session.push(Pending::Close).await;
                        break 'read;
                    }
                }
            }
            if buf.capacity() - buf.len() < 4096 && buf.is_empty() {
                buf = BytesMut::with_capacity(16 * 1024);
            }
        }
        // Half-close or error: the writer sends what is owed, then closes.
        drop(session);
        let _ = writer.await;
    }

    /// Queues a reply slot; waits while the client owes `pipeline_depth` replies.
    pub async fn push(&mut self, p: Pending) {
        if matches!(p, Pending::Close) {
            self.closing = true;
        }
        // try_send first; wait only when the client owes `pipeline_depth` replies.
        match self.out.try_send(p) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(p)) => {
                let _ = self.out.send(p).await;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Queues an encoded reply.
    pub async fn reply(&mut self, bytes: BytesMut) {
        self.push(Pending::Ready(bytes.freeze())).await;
    }

    /// Queues an error reply (`msg` with its `ERR`/code prefix).
    pub async fn error(&mut self, msg: &str) {
        let mut b = BytesMut::new();
        encode::error(&mut b, msg);
        self.reply(b).await;
    }

    async fn dispatch(&mut self, req: Request) {
        super::route::dispatch(self, req).await;
    }
}

async fn write_replies(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Pending>) {
    let mut out = BytesMut::with_capacity(16 * 1024);
    let mut next = None;
    loop {
        let p = match next.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => break,
            },
        };
        let close = matches!(p, Pending::Close);
        if !close {
            let reply = resolve(p, &mut wr, &mut out).await;
            out.extend_from_slice(&reply);
        }
        // Batch: keep appending replies that are already complete; flush
        // before waiting on one that is not, so earlier replies never wait.
        if !close {
            if let Ok(p) = rx.try_recv() {
                next = Some(p);
                if out.len() < 256 * 1024 {
                    continue;
                }
            }
        }
        if !out.is_empty() {
            if wr.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if close {
            break;
        }
    }
    if !out.is_empty() {
        let _ = wr.write_all(&out).await;
    }
    let _ = wr.shutdown().await;
}

/// Waits for one pending reply; flushes `out` first if it must wait.
async fn resolve(p: Pending, wr: &mut OwnedWriteHalf, out: &mut BytesMut) -> Bytes {
    match p {
        Pending::Ready(b) => b,
        Pending::One(mut rx) => match rx.try_recv() {
            Ok(b) => b,
            Err(oneshot::error::TryRecvError::Closed) => lost_reply(),
            Err(oneshot::error::TryRecvError::Empty) => {
                flush(wr, out).await;
                rx.await.unwrap_or_else(|_| lost_reply())
            }
        },
        Pending::Later(f) => {
            flush(wr, out).await;
            f.await
        }
        Pending::Close => Bytes::new(),
    }
}

async fn flush(wr: &mut OwnedWriteHalf, out: &mut BytesMut) {
    if !out.is_empty() {
        let _ = wr.write_all(out).await;
        out.clear();
    }
}

fn lost_reply() -> Bytes {
    Bytes::from_static(b"-ERR upstream connection lost before the reply arrived\r\n")
}
