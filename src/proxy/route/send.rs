//! Sending on behalf of a client: a request to one node's shared upstream,
//! tracked when it writes keys a migration is moving; the replies of
//! several fragments gathered; cached GETs of written keys forgotten. Used
//! by every forwarding path of `route`.

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::catalogue::Command;
use crate::proxy::config::ha::WriteAck;
use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::error::lost;
use crate::proxy::upstream::dirty::track_write;
use crate::proxy::upstream::topology::{Node, Routing};
use crate::proxy::Proxy;

/// The moving keys a write touches, to be marked dirty when it is answered.
pub(crate) fn moving_writes(
    routing: &Routing,
    spec: &Command,
    keys: impl Iterator<Item = Bytes>,
) -> Option<Vec<Bytes>> {
    routing.migration.as_ref()?;
    if !spec.is_write() {
        return None;
    }
    let moving: Vec<Bytes> = keys
        .filter(|k| routing.is_moving(k))
        .map(|k| Bytes::copy_from_slice(&k))
        .collect();
    (!moving.is_empty()).then_some(moving)
}

/// Sends a request, tracking it if it writes moving keys; its reply is
/// charged to the client's budget when it arrives. A write under
/// `write_ack = "replica"` is answered once a replica has it
/// (`ha::reads::send_acked`).
pub(crate) async fn send_tracked(
    proxy: &Proxy,
    spec: &Command,
    client: &ClientState,
    routing: &Routing,
    node: &Node,
    raw: Bytes,
    track: Option<Vec<Bytes>>,
) -> oneshot::Receiver<Bytes> {
    let rx = if spec.is_write() && proxy.ha.config.write_ack == WriteAck::Replica {
        crate::proxy::ha::reads::send_acked(proxy, client, node, raw).await
    } else {
        client
            .upstream_to(node)
            .send_for(raw, Some(client.budget.clone()))
            .await
    };
    match (track, &routing.migration) {
        (Some(keys), Some(m)) => track_write(&m.dirty, keys, rx),
        _ => rx,
    }
}

/// Forgets cached GETs of the keys a write is about to change.
pub(crate) fn invalidate_written<'a>(
    proxy: &Proxy,
    spec: &Command,
    keys: impl IntoIterator<Item = &'a Bytes>,
) {
    if let (Some(cache), true) = (&proxy.ops.hot_cache, spec.is_write()) {
        for k in keys {
            cache.invalidate(k);
        }
    }
}

/// Waits for every fragment's reply (each charged to `budget` on arrival)
/// and releases their charge: the merged reply is charged instead when the
/// session takes it.
pub(crate) async fn gather(
    waits: Vec<oneshot::Receiver<Bytes>>,
    budget: &ReplyBudget,
) -> Vec<Bytes> {
    let mut replies = Vec::with_capacity(waits.len());
    for w in waits {
        replies.push(match w.await {
            Ok(r) => {
                budget.release(r.len());
                r
            }
            Err(_) => lost(),
        });
    }
    replies
}
