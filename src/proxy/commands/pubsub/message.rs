//! What passes between a subscriber's session and its connection's actor:
//! requests with how many frames answer them, and what the actor pushes
//! to the session besides replies. Types only.

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::proxy::commands::pubsub::frame::Family;

/// What the actor hands the client's session besides replies.
pub(crate) enum Push {
    /// Message frames (one or more, whole), already charged to the client's
    /// budget.
    Message(Bytes),
    /// The client must be closed: it holds more than the pub/sub limit.
    OverLimit,
    /// The client must be closed: no node could take its subscriptions.
    Lost,
    /// The client must be closed: its node closed the subscriber connection
    /// and still answers, so it did so on purpose (its output buffer limit
    /// for pub/sub clients, or CLIENT KILL there). Moving the subscriptions
    /// instead would hide the messages the node dropped.
    ClosedByNode,
}

/// How many frames answer a request.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expect {
    /// One confirmation per argument.
    Args(usize),
    /// A no-argument unsubscribe: one per current subscription of the
    /// family, or one if there is none (counted when it is answered).
    All(Family),
    /// PING: one reply.
    One,
}

/// One request for the subscriber connection.
pub(crate) struct SubRequest {
    pub(crate) raw: Bytes,
    pub(crate) expect: Expect,
    pub(crate) reply: oneshot::Sender<Bytes>,
}
