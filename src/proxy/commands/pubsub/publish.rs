//! The broadcast half of pub/sub: PUBLISH and SPUBLISH go to every node of
//! the routing (through the shared upstream connections) and answer the sum
//! of the nodes' receiver counts; PUBSUB CHANNELS / SHARDCHANNELS answer the
//! union of the nodes' lists, NUMSUB / SHARDNUMSUB per-channel sums, NUMPAT
//! the distinct patterns the proxy's subscribers hold — the same results one Redis gives for the same subscribers,
//! since each subscriber is on exactly one node. Called by `pubsub::handle`.
//!
//! Entered through the epoch gate like every fan-out: a PUBLISH routed by a
//! snapshot is sent before a topology change treats that snapshot as done,
//! so subscribers on nodes in both rings never miss it.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use crate::proxy::commands::pubsub::keyfeed::is_fed;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::error::lost;
use crate::proxy::conn::pending::Pending;
use crate::proxy::upstream::topology;
use crate::proxy::Proxy;
use crate::resp::reply::{elements, integer, is_error};
use crate::resp::{encode, eq_ignore_case, Request};

/// Sends `raw` to every node; the replies in node order.
async fn broadcast(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    raw: Bytes,
) -> Vec<oneshot::Receiver<Bytes>> {
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    client.served.on_many(routing.shards.len());
    let mut waits = Vec::with_capacity(routing.shards.len());
    for n in routing.primaries() {
        waits.push(client.upstream_to(n).send(raw.clone()).await);
    }
    waits
}

/// The replies of the nodes that answered; a node that failed (down, or
/// dying) is left out as long as one answered, as a Redis Cluster PUBLISH or
/// PUBSUB is not failed by a node it cannot reach. When none answered, the
/// first error.
async fn gather(waits: Vec<oneshot::Receiver<Bytes>>) -> Result<Vec<Bytes>, Bytes> {
    let mut answered = Vec::with_capacity(waits.len());
    let mut failed = None;
    for w in waits {
        let r = w.await.unwrap_or_else(|_| lost());
        if is_error(&r) {
            failed.get_or_insert(r);
        } else {
            answered.push(r);
        }
    }
    match failed {
        Some(e) if answered.is_empty() => Err(e),
        _ => Ok(answered),
    }
}

/// PUBLISH / SPUBLISH: the sum of the counts of the nodes that answered.
/// A PUBLISH to a keyspace notification channel goes to one node: the
/// keyspace feed hands it to the subscribers placed elsewhere, as it hands
/// them the node's own events (broadcast, each would hear it once per node).
pub(super) async fn publish(proxy: &Arc<Proxy>, client: &ClientState, req: Request) -> Pending {
    let named = req.args.len() == 3 && eq_ignore_case(&req.args[0], b"publish");
    if named && is_fed(&req.args[1]) {
        return publish_key_event(proxy, client, req).await;
    }
    let waits = broadcast(proxy, client, req.raw).await;
    Pending::Later(Box::pin(async move {
        match gather(waits).await {
            Ok(replies) => sum(&replies),
            Err(e) => e,
        }
    }))
}

/// A PUBLISH to a keyspace channel, on the first primary only; its count
/// is that node's, less the feed's own subscription there, plus the
/// subscribers the feed hands it to.
async fn publish_key_event(proxy: &Arc<Proxy>, client: &ClientState, req: Request) -> Pending {
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    let Some(node) = routing.primaries().next().cloned() else {
        return Pending::error("ERR no node to publish to");
    };
    client.served.on_many(1);
    let wait = client.upstream_to(&node).send(req.raw).await;
    let proxy = proxy.clone();
    Pending::Later(Box::pin(async move {
        let r = wait.await.unwrap_or_else(|_| lost());
        let Some(n) = integer(&r) else { return r };
        let elsewhere = proxy.keyfeed.receivers(&node.spec.addr, &req.args[1]);
        let mut out = BytesMut::new();
        encode::integer(&mut out, n - elsewhere.0 as i64 + elsewhere.1 as i64);
        out.freeze()
    }))
}

/// PUBSUB CHANNELS | SHARDCHANNELS | NUMSUB | SHARDNUMSUB | NUMPAT | HELP.
pub(super) async fn pubsub(proxy: &Arc<Proxy>, client: &ClientState, req: Request) -> Pending {
    let sub = &req.args[1];
    let merge: fn(&[Bytes]) -> Bytes =
        if eq_ignore_case(sub, b"channels") || eq_ignore_case(sub, b"shardchannels") {
            union
        } else if eq_ignore_case(sub, b"numsub") || eq_ignore_case(sub, b"shardnumsub") {
            sum_pairs
        } else if eq_ignore_case(sub, b"numpat") && req.args.len() == 2 {
            let mut out = BytesMut::new();
            encode::integer(&mut out, proxy.subscriptions.patterns.len() as i64);
            return Pending::ready(out);
        } else {
            // HELP, a bad subcommand or arity: every node says the same.
            first
        };
    let waits = broadcast(proxy, client, req.raw).await;
    Pending::Later(Box::pin(async move {
        match gather(waits).await {
            Ok(replies) => merge(&replies),
            Err(e) => e,
        }
    }))
}

fn first(replies: &[Bytes]) -> Bytes {
    replies.first().cloned().unwrap_or_else(lost)
}

fn sum(replies: &[Bytes]) -> Bytes {
    let mut total = 0;
    for r in replies {
        match integer(r) {
            Some(n) => total += n,
            None => return unexpected(r),
        }
    }
    let mut out = BytesMut::new();
    encode::integer(&mut out, total);
    out.freeze()
}

/// The channel names of every node, each once, in the order first seen.
fn union(replies: &[Bytes]) -> Bytes {
    let mut seen = HashSet::new();
    let mut names: Vec<&[u8]> = Vec::new();
    for r in replies {
        let Some(els) = elements(r) else {
            return unexpected(r);
        };
        for e in els {
            let el = &r[e];
            if seen.insert(el) {
                names.push(el);
            }
        }
    }
    let mut out = BytesMut::new();
    encode::array_len(&mut out, names.len());
    for n in names {
        out.extend_from_slice(n);
    }
    out.freeze()
}

/// NUMSUB: name, count pairs in the order asked; counts summed per channel.
fn sum_pairs(replies: &[Bytes]) -> Bytes {
    let Some(first) = replies.first() else {
        return lost();
    };
    let Some(layout) = elements(first) else {
        return unexpected(first);
    };
    let mut counts = vec![0i64; layout.len() / 2];
    for r in replies {
        match elements(r) {
            Some(els) if els.len() == layout.len() => {
                for (i, c) in counts.iter_mut().enumerate() {
                    match integer(&r[els[2 * i + 1].clone()]) {
                        Some(n) => *c += n,
                        None => return unexpected(r),
                    }
                }
            }
            _ => return unexpected(r),
        }
    }
    let mut out = BytesMut::new();
    out.extend_from_slice(&first[..layout.first().map_or(first.len(), |e| e.start)]);
    for (i, c) in counts.iter().enumerate() {
        out.extend_from_slice(&first[layout[2 * i].clone()]);
        encode::integer(&mut out, *c);
    }
    out.freeze()
}

fn unexpected(r: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    let shown = String::from_utf8_lossy(&r[..r.len().min(64)]).replace(['\r', '\n'], " ");
    encode::error(
        &mut out,
        &format!("ERR unexpected reply from a node while merging: {shown}"),
    );
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::b;

    #[test]
    fn merges_give_one_redis_answers() {
        assert_eq!(
            &sum(&[b(":2\r\n"), b(":0\r\n"), b(":3\r\n")])[..],
            b":5\r\n"
        );
        assert_eq!(
            &union(&[
                b("*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
                b("*0\r\n"),
                b("*2\r\n$1\r\nb\r\n$1\r\nc\r\n")
            ])[..],
            b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(
            &sum_pairs(&[
                b("*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:0\r\n"),
                b("*4\r\n$1\r\na\r\n:2\r\n$1\r\nb\r\n:5\r\n")
            ])[..],
            b"*4\r\n$1\r\na\r\n:3\r\n$1\r\nb\r\n:5\r\n"
        );
        assert_eq!(&sum_pairs(&[b("*0\r\n"), b("*0\r\n")])[..], b"*0\r\n");
        assert!(sum(&[b("+OK\r\n")]).starts_with(b"-ERR unexpected"));
    }
}
