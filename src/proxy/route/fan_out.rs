//! Commands sent to every node (DBSIZE, KEYS, FLUSHALL, SCRIPT, …), their
//! replies aggregated; SCAN and RANDOMKEY walk the nodes themselves.

use std::sync::Arc;

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::policy::Aggregate;
use crate::proxy::route::merge::{aggregate, owned_only};
use crate::proxy::route::send::gather;
use crate::proxy::upstream::topology::{self, all_nodes};
use crate::proxy::Proxy;
use crate::resp::Request;

pub(crate) async fn fan_out(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    req: Request,
    agg: Aggregate,
) -> Pending {
    // SCAN and RANDOMKEY visit nodes one at a time and enter the gate themselves.
    match agg {
        Aggregate::Scan => {
            return crate::proxy::route::scan::scan(proxy, client.proto, client.id, &req.args).await
        }
        Aggregate::AnyNonNil => {
            return crate::proxy::route::scan::random_key(proxy, client.proto, client.id, req.raw)
                .await
        }
        _ => {}
    }
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    if agg == Aggregate::AllOk && (routing.migration.is_some() || routing.filter_keys) {
        return Pending::error("ERR FLUSHALL/FLUSHDB are refused while a topology change runs; retry when CLUSTER RINGINFO shows state:ok");
    }
    let nodes = all_nodes(&routing);
    client.served.on_many(nodes.len());
    let (proto, id) = (client.proto, client.id);
    let mut waits = Vec::with_capacity(nodes.len());
    for n in &nodes {
        let budget = Some(client.budget.clone());
        waits.push(
            n.upstream(proto, id)
                .send_for(req.raw.clone(), budget)
                .await,
        );
    }
    let filter = routing.filter_keys.then(|| routing.clone());
    let budget = client.budget.clone();
    Pending::Later(Box::pin(async move {
        let mut replies = gather(waits, &budget).await;
        if let (Some(routing), Aggregate::Concat) = (&filter, agg) {
            for (i, r) in replies.iter_mut().enumerate() {
                *r = owned_only(r, routing, i);
            }
        }
        aggregate(agg, &replies)
    }))
}
