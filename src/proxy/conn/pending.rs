//! A reply a client is owed: ready now, arriving from a node, or still
//! being built. Handlers return one per request; the session keeps them in
//! request order and writes each once it is complete. Knows no socket.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::resp::encode;

/// A reply the client is owed, in request order.
pub(crate) enum Pending {
    /// Built by the proxy, ready now.
    Ready(Bytes),
    /// Its reply arrives on the channel (not charged to the client's budget
    /// until the session takes it).
    One(oneshot::Receiver<Bytes>),
    /// Forwarded to one node with the client's budget: the reply was charged
    /// when it arrived.
    Charged(oneshot::Receiver<Bytes>),
    /// Anything that needs more work (merges, fan-outs, admin): a future.
    Later(Pin<Box<dyn Future<Output = Bytes> + Send>>),
    /// Write this last reply and what is owed before it, then close (QUIT,
    /// protocol errors).
    Close(Bytes),
    /// Pub/sub messages that arrived while this was the last slot, charged
    /// to the client's budget on arrival (see `pubsub`).
    Pushed(BytesMut),
}

impl Pending {
    /// A reply the proxy built.
    pub(crate) fn ready(out: BytesMut) -> Pending {
        Pending::Ready(out.freeze())
    }

    /// An error reply; `msg` carries its `ERR`/code prefix.
    pub(crate) fn error(msg: &str) -> Pending {
        let mut b = BytesMut::new();
        encode::error(&mut b, msg);
        Pending::Ready(b.freeze())
    }
}

/// The reply owed when a node connection failed before answering.
pub(crate) fn lost_reply() -> Bytes {
    Bytes::from_static(b"-ERR upstream connection lost before the reply arrived\r\n")
}

/// Waits for the reply at the front of the FIFO (never a `Close`: `collect`
/// has taken it).
pub(crate) fn front_reply(
    owed: &mut VecDeque<Pending>,
) -> impl Future<Output = (Bytes, bool)> + '_ {
    poll_fn(move |cx| match owed.front_mut() {
        Some(Pending::One(rx)) => Pin::new(rx)
            .poll(cx)
            .map(|r| (r.unwrap_or_else(|_| lost_reply()), false)),
        Some(Pending::Charged(rx)) => Pin::new(rx).poll(cx).map(|r| match r {
            Ok(b) => (b, true),
            Err(_) => (lost_reply(), false),
        }),
        Some(Pending::Later(f)) => f.as_mut().poll(cx).map(|b| (b, false)),
        Some(Pending::Ready(b)) => Poll::Ready((b.clone(), false)),
        Some(Pending::Pushed(b)) => Poll::Ready((std::mem::take(b).freeze(), true)),
        _ => Poll::Pending,
    })
}

/// Sleeps until `deadline`; never resolves without one.
pub(crate) async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
