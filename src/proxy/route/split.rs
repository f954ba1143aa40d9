//! Multi-key commands split by owner node (MGET, MSET, DEL, EXISTS, …):
//! one fragment per node, merged back in the client's key order.

use std::sync::Arc;

use bytes::BytesMut;

use crate::catalogue::arity_error;
use crate::catalogue::Command;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::policy::Merge;
use crate::proxy::route::merge::merge_fragments;
use crate::proxy::route::send::{gather, invalidate_written, moving_writes, send_tracked};
use crate::proxy::upstream::topology::Node;
use crate::proxy::Proxy;
use crate::resp::{encode, Request};

pub(crate) async fn split(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    spec: &'static Command,
    req: Request,
    merge: Merge,
) -> Pending {
    let positions = match spec.key_positions(&req.args) {
        Ok(p) => p,
        Err(e) => return Pending::error(&e),
    };
    if merge == Merge::AllOk && req.args.len().is_multiple_of(2) {
        return Pending::error(&arity_error(spec));
    }
    let routing = match client
        .enter_for(&proxy.routing, || positions.iter().map(|&p| &req.args[p]))
        .await
    {
        Ok(g) => g,
        Err(p) => return p,
    };
    invalidate_written(proxy, spec, positions.iter().map(|&p| &req.args[p]));
    // Group keys by owner node (not by ring point), keeping each key's position.
    let mut groups: Vec<(Arc<Node>, Vec<usize>)> = Vec::new();
    for &p in &positions {
        proxy.ops.hot_keys.sample(&req.args[p]);
        let node = routing.owner(&req.args[p]);
        match groups.iter_mut().find(|(n, _)| Arc::ptr_eq(n, node)) {
            Some((_, ps)) => ps.push(p),
            None => groups.push((node.clone(), vec![p])),
        }
    }
    client.served.on_many(groups.len());
    if groups.len() == 1 {
        client
            .served
            .on(routing.ring.locate(&req.args[positions[0]]));
        let track = moving_writes(
            &routing,
            spec,
            positions.iter().map(|&p| req.args[p].clone()),
        );
        let mut rx =
            send_tracked(proxy, spec, client, &routing, &groups[0].0, req.raw, track).await;
        if spec.is_write() {
            rx = proxy
                .wake
                .after_write(positions.iter().map(|&p| &req.args[p]), rx);
        }
        return Pending::Charged(rx);
    }
    // One fragment per node: the command name, then that node's keys (and values).
    let fragments = &proxy.stats.fragments;
    fragments.fetch_add(groups.len() as u64, std::sync::atomic::Ordering::Relaxed);
    let mut waits = Vec::with_capacity(groups.len());
    for (node, ps) in &groups {
        let mut parts: Vec<&[u8]> = vec![&req.args[0]];
        for &p in ps {
            parts.push(&req.args[p]);
            if merge == Merge::AllOk {
                parts.push(&req.args[p + 1]);
            }
        }
        let mut raw = BytesMut::new();
        encode::command(&mut raw, &parts);
        let track = moving_writes(&routing, spec, ps.iter().map(|&p| req.args[p].clone()));
        let mut rx = send_tracked(proxy, spec, client, &routing, node, raw.freeze(), track).await;
        if spec.is_write() {
            rx = proxy.wake.after_write(ps.iter().map(|&p| &req.args[p]), rx);
        }
        waits.push(rx);
    }
    let order: Vec<Vec<usize>> = groups.into_iter().map(|(_, ps)| ps).collect();
    let total = positions.len();
    let first_key = positions[0];
    let budget = client.budget.clone();
    Pending::Later(Box::pin(async move {
        let replies = gather(waits, &budget).await;
        merge_fragments(merge, &replies, &order, total, first_key)
    }))
}
