//! Routing one request: classify it with the command catalogue, then
//! forward it to its key's owner ([`keyed`]), split it across owners
//! ([`split`]), fan it out to every node ([`fan_out`]), or hand it to the
//! proxy's own handlers (`commands`, `admin`).
//!
//! Called by the client session for every request, in order. While a
//! migration runs, a write to a moving key is tracked (see
//! `upstream::dirty`) so the change re-syncs it before the cutover.

pub(crate) mod cursor;
pub(crate) mod fan_out;
pub(crate) mod hot_cache;
pub(crate) mod keyed;
pub mod merge;
pub mod policy;
pub(crate) mod scan;
pub(crate) mod send;
pub(crate) mod split;

use std::sync::Arc;

use crate::catalogue::Id;
use crate::catalogue::{arity_error, unknown_command_error};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ops::metrics::Served;
use crate::proxy::route::policy::Pinned;
use crate::proxy::route::policy::{lookup, Kind};
use crate::proxy::Proxy;
use crate::resp::Request;
use fan_out::fan_out;
use keyed::keyed;
use split::split;

/// Routes one request and returns the reply slot the client is owed for it.
pub(crate) async fn dispatch(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    req: Request,
) -> Pending {
    let spec = lookup(req.name());
    client.served.set(Served::of(spec));
    // Inside MULTI everything is queued (or refused) by the transaction,
    // except what ends the connection's state as a whole.
    if client.tx.is_queueing() && !spec.is_some_and(|s| matches!(s.id, Id::Quit | Id::Reset)) {
        return crate::proxy::commands::transaction::handle(proxy, client, spec, req).await;
    }
    let Some(spec) = spec else {
        return Pending::error(&unknown_command_error(&req.args));
    };
    // The transaction commands check their own arity: a bad EXEC also
    // discards the transaction, as Redis does.
    if !spec.is_arity_ok(req.args.len()) && spec.kind != Kind::Pinned(Pinned::Transaction) {
        return Pending::error(&arity_error(spec));
    }
    if let Some(p) =
        crate::proxy::commands::pubsub::in_subscribe_mode(proxy, client, spec, &req).await
    {
        return p;
    }
    match spec.kind {
        Kind::Keyed
            if matches!(spec.id, Id::Xread | Id::Xreadgroup)
                && crate::catalogue::is_blocking_stream_read(&req.args) =>
        {
            crate::proxy::commands::blocking::handle(proxy, client, spec, req).await
        }
        Kind::Keyed => keyed(proxy, client, spec, req).await,
        Kind::Split(merge) => split(proxy, client, spec, req, merge).await,
        Kind::FanOut(agg) => {
            // FLUSHALL / FLUSHDB: every cached GET may be gone.
            if let (Some(cache), true) = (&proxy.ops.hot_cache, spec.is_write()) {
                cache.clear();
            }
            fan_out(proxy, client, req, agg).await
        }
        Kind::Local => crate::proxy::commands::local::handle(proxy, client, spec, req).await,
        Kind::Admin => crate::proxy::admin::handle(proxy, client, req).await,
        Kind::Pinned(Pinned::Transaction) => {
            crate::proxy::commands::transaction::handle(proxy, client, Some(spec), req).await
        }
        Kind::Pinned(Pinned::Blocking) => {
            crate::proxy::commands::blocking::handle(proxy, client, spec, req).await
        }
        Kind::PubSub(kind) => {
            crate::proxy::commands::pubsub::handle(proxy, client, spec, req, kind).await
        }
        Kind::Refused(why) => Pending::error(&format!(
            "ERR '{}' is not supported by shardis: {why}",
            spec.name
        )),
    }
}
