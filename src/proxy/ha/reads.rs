//! The two places replicas touch a request: `read_from` picks a replica in
//! sync for a read, and `write_ack = "replica"` holds a write's reply until
//! `WAIT 1 <ms>`, sent right behind it on the same upstream connection,
//! says a replica has it. Called by `route::send` and `route::keyed`.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use crate::proxy::config::ha::ReadFrom;
use crate::proxy::conn::client::ClientState;
use crate::proxy::upstream::shard::Shard;
use crate::proxy::upstream::topology::Node;
use crate::proxy::Proxy;
use crate::resp::reply::{integer, is_error};

/// Where a read of `shard` goes: a replica in sync (spread by client), the
/// primary, or — under `read_from = "replica"` with none in sync — an error.
pub(crate) fn read_node<'a>(
    proxy: &Proxy,
    shard: &'a Shard,
    client: u64,
) -> Result<&'a Arc<Node>, String> {
    let mode = proxy.ha.config.read_from;
    if mode == ReadFrom::Primary || shard.replicas().is_empty() {
        return Ok(shard.primary());
    }
    let primary = &shard.primary().spec.addr;
    let offset = proxy.ha.status(primary).offset();
    let max_lag = proxy.ha.config.max_lag_bytes;
    let fit: Vec<&Arc<Node>> = shard
        .replicas()
        .iter()
        .filter(|r| {
            proxy
                .ha
                .status(&r.spec.addr)
                .is_in_sync(primary, offset, max_lag)
        })
        .collect();
    if fit.is_empty() {
        return match mode {
            ReadFrom::Replica => Err(format!(
                "ERR no replica of {} is in sync (read_from = \"replica\")",
                shard.name()
            )),
            _ => Ok(shard.primary()),
        };
    }
    Ok(fit[(client as usize) % fit.len()])
}

/// Sends a write and, right behind it on the same connection, `WAIT 1
/// <wait_timeout_ms>`; the write's reply reaches the client only once the
/// WAIT counted a replica. A WAIT that counts none turns the reply into an
/// error: the write happened on the primary but is not known to be on a
/// replica, so it is never acknowledged silently. The reply is charged to
/// the client's budget when it is handed over.
pub(crate) async fn send_acked(
    proxy: &Proxy,
    client: &ClientState,
    node: &Node,
    raw: Bytes,
) -> oneshot::Receiver<Bytes> {
    let ms = proxy.ha.config.wait_timeout_ms;
    let up = client.upstream_to(node);
    let written = up.send(raw).await;
    let waited = up.send_wait(wait_request(ms)).await;
    let (tx, rx) = oneshot::channel();
    let budget = client.budget.clone();
    let shard = node.spec.name.clone();
    tokio::spawn(async move {
        let reply = written
            .await
            .unwrap_or_else(|_| crate::proxy::conn::error::lost());
        let reply = acked_or_error(reply, waited.await.ok(), &shard, ms, "write");
        let n = reply.len();
        budget.charge(n);
        if tx.send(reply).is_err() {
            budget.release(n);
        }
    });
    rx
}

/// `WAIT 1 <ms>`, encoded.
pub(crate) fn wait_request(ms: u64) -> Bytes {
    let ms_text = ms.to_string();
    let mut wait = BytesMut::new();
    crate::resp::encode::array_len(&mut wait, 3);
    for a in [&b"WAIT"[..], b"1", ms_text.as_bytes()] {
        crate::resp::encode::bulk(&mut wait, a);
    }
    wait.freeze()
}

/// `reply` when it is an error or `waited` (WAIT's reply) counted a
/// replica; else the error saying the `what` (a write, a transaction) on
/// `shard` is not known to be on a replica.
pub(crate) fn acked_or_error(
    reply: Bytes,
    waited: Option<Bytes>,
    shard: &str,
    ms: u64,
    what: &str,
) -> Bytes {
    if is_error(&reply) {
        return reply;
    }
    match waited.as_deref().and_then(integer) {
        Some(n) if n >= 1 => reply,
        _ => {
            let mut out = BytesMut::new();
            crate::resp::encode::error(
                &mut out,
                &format!("ERR {what} to {shard} not acknowledged by a replica within {ms} ms (write_ack = \"replica\"): it may or may not be kept"),
            );
            out.freeze()
        }
    }
}
