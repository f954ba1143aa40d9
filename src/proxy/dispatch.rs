//! The junction of the request path: classify a request with the command
//! catalogue's proxy column (`policy`), then hand it to the router
//! (`route`: keyed, split, fan-out) or to one of the proxy's own handlers
//! (`commands`, `admin`). The only module that knows both sides: the
//! router imports no handler, and no handler imports this.
//!
//! Called by the client session for every request, in order (and by
//! MONITOR's loop for the requests of a client in monitor mode).

use std::sync::Arc;

use crate::catalogue::Id;
use crate::catalogue::{arity_error, unknown_command_error};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ops::metrics::Served;
use crate::proxy::policy::Pinned;
use crate::proxy::policy::{lookup, Kind};
use crate::proxy::route::fan_out::fan_out;
use crate::proxy::route::keyed::keyed;
use crate::proxy::route::split::split;
use crate::proxy::Proxy;
use crate::resp::Request;

/// Whether requests of this kind reach nodes by the ring.
fn routes_keys(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Keyed | Kind::Split(_) | Kind::FanOut(_) | Kind::Pinned(_)
    )
}

/// Routes one request and returns the reply slot the client is owed for it.
pub(crate) async fn dispatch(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    req: Request,
) -> Pending {
    let spec = lookup(req.name());
    client.served.set(Served::of(spec));
    if let Some(s) = spec.filter(|s| routes_keys(s.kind)) {
        if let Some(refusal) = crate::proxy::admin::store::refusal(proxy, s, &req.args) {
            return Pending::error(refusal);
        }
    }
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
            fan_out(proxy, client, spec, req, agg).await
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
