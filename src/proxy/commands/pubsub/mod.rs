//! Pub/sub through the proxy. **PUBLISH is broadcast, subscriptions are
//! placed**: each subscribing client gets one pinned connection (counted
//! under `max_pinned_per_node`) to one node — the one with the fewest pinned
//! connections — and all its (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE go there;
//! PUBLISH and SPUBLISH go to every node of the routing and answer the sum.
//! Each subscriber listens on exactly one node and each message reaches
//! every node once, so every matching subscriber gets it exactly once, and
//! the node's confirmations (one connection holds all of the client's
//! subscriptions) are relayed verbatim. Redis Cluster broadcasts PUBLISH
//! over its bus the same way.
//!
//! This module holds the client's side (`Subscriber`, in its
//! `ClientState`): routing of the subscribe family, the RESP2 subscribe-mode
//! rule, and the channel on which messages reach the session. `conn` is the
//! connection actor, `link` its node and socket, `publish` the fan-outs
//! (PUBLISH, PUBSUB …), `frame` the frame reading. Called by `dispatch`, `local` (RESET) and the
//! session (messages). Must never let a message into the middle of a reply:
//! the session appends them behind every reply owed when they arrive.

mod conn;
mod frame;
mod handle;
mod keyfeed;
mod link;
mod message;
mod publish;
pub(crate) mod subscriber;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use frame::Family;
use handle::SubConn;
pub(crate) use keyfeed::KeyFeed;
pub(crate) use message::Push;
use message::{Expect, SubRequest};
pub(crate) use subscriber::Held;

use crate::catalogue::Id;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::policy::CommandSpec;
use crate::proxy::policy::PubSub;
use crate::proxy::Proxy;
use crate::resp::Request;

/// Routes PUBLISH, SPUBLISH, PUBSUB and the subscribe family.
pub(crate) async fn handle(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: &'static CommandSpec,
    req: Request,
    kind: PubSub,
) -> Pending {
    match kind {
        PubSub::Publish => publish::publish(proxy, client, req).await,
        PubSub::Introspect => publish::pubsub(proxy, client, req).await,
        PubSub::Subscribe => subscribe(proxy, client, spec, req).await,
    }
}

async fn subscribe(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: &'static CommandSpec,
    req: Request,
) -> Pending {
    let (family, on) = match spec.id {
        Id::Subscribe => (Family::Channel, true),
        Id::Psubscribe => (Family::Pattern, true),
        Id::Ssubscribe => (Family::Shard, true),
        Id::Unsubscribe => (Family::Channel, false),
        Id::Punsubscribe => (Family::Pattern, false),
        _ => (Family::Shard, false),
    };
    let n = req.args.len() - 1;
    if !on && !client.pubsub.is_active() {
        // Nothing to drop: answered as Redis answers it, without a node.
        let reply = frame::unsubscribed_nothing(family, &req.args[1..], client.proto);
        return Pending::Ready(reply);
    }
    if on && req.args[1..].iter().any(|a| keyfeed::may_carry(family, a)) {
        // Its first event must not be missed: the feed listens first.
        let within = Duration::from_millis(proxy.config().request_timeout_ms);
        KeyFeed::ensure(proxy, within).await;
    }
    let expect = match (on, n) {
        (false, 0) => Expect::All(family),
        _ => Expect::Args(n),
    };
    send(proxy, client, req.raw, expect)
}

/// Whether `req` is of the subscribe family (whose confirmations CLIENT
/// REPLY does not silence).
pub(crate) fn is_subscribe(req: &Request) -> bool {
    const NAMES: [&[u8]; 6] = [
        b"subscribe",
        b"psubscribe",
        b"ssubscribe",
        b"unsubscribe",
        b"punsubscribe",
        b"sunsubscribe",
    ];
    req.args
        .first()
        .is_some_and(|a| NAMES.iter().any(|n| crate::resp::eq_ignore_case(a, n)))
}

/// Sends a request on the client's subscriber connection, opening one if
/// it has none (or its last one was released).
fn send(proxy: &Arc<Proxy>, client: &mut ClientState, raw: Bytes, expect: Expect) -> Pending {
    let (tx, rx) = oneshot::channel();
    let mut req = SubRequest {
        raw,
        expect,
        reply: tx,
    };
    if let Some(c) = &client.pubsub.conn {
        match c.send(req) {
            Ok(()) => return Pending::One(rx),
            Err(r) => req = r,
        }
    }
    let push = client.pubsub.sender();
    let conn = match SubConn::open(
        proxy,
        client.proto,
        client.id,
        &client.budget,
        push,
        &client.entry,
    ) {
        Ok(c) => c,
        Err(e) => return Pending::error(&e.to_string()),
    };
    if conn.send(req).is_err() {
        return Pending::error("ERR subscriber connection closed");
    }
    client.pubsub.conn = Some(conn);
    Pending::One(rx)
}

/// A RESP2 client with subscriptions may only send the subscribe family,
/// PING, QUIT and RESET (Redis's rule and error); its PING is answered by
/// its node, in subscribe-mode form. `None`: dispatch as usual.
pub(crate) async fn in_subscribe_mode(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: &'static CommandSpec,
    req: &Request,
) -> Option<Pending> {
    if client.proto != 2 || !client.pubsub.is_active() {
        return None;
    }
    if matches!(
        spec.kind,
        crate::proxy::policy::Kind::PubSub(PubSub::Subscribe)
    ) || matches!(spec.id, Id::Quit | Id::Reset)
    {
        return None;
    }
    // An UNSUBSCRIBE sent just before may end subscribe mode: its answer
    // decides (bounded: a node that does not answer does not hold the client).
    if let Some(c) = &client.pubsub.conn {
        let wait = Duration::from_millis(proxy.config().request_timeout_ms);
        let _ = tokio::time::timeout(wait, c.settled()).await;
    }
    if !client.pubsub.is_active() {
        return None;
    }
    if spec.id == Id::Ping {
        return Some(send(proxy, client, req.raw.clone(), Expect::One));
    }
    Some(Pending::error(&format!(
        "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
        spec.name
    )))
}
