//! Commands sent to every node (DBSIZE, KEYS, FLUSHALL, SCRIPT, …), their
//! replies aggregated; SCAN and RANDOMKEY walk the nodes themselves. Under
//! `write_ack = "replica"` FLUSHALL and FLUSHDB wait for `WAIT 1` on every
//! shard, as each fragment of a split write does: the reply is `+OK` only
//! once every shard's replica has the flush.
//!
//! SCRIPT KILL and FUNCTION KILL go on a connection of their own to each
//! node: the script they are meant to stop may hold the shared connection
//! to its node (its EVAL is in flight there, and a node answers one
//! connection's requests in order), so a kill queued behind it would only
//! arrive once the script had ended.

use std::sync::Arc;

use bytes::Bytes;

use crate::catalogue::{Command, Id};
use crate::proxy::config::ha::WriteAck;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::policy::Aggregate;
use crate::proxy::route::merge::{aggregate, owned_only};
use crate::proxy::route::send::gather;
use crate::proxy::upstream::topology::{self, all_nodes};
use crate::proxy::Proxy;
use crate::resp::reply::is_error;
use crate::resp::Request;

pub(crate) async fn fan_out(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: &Command,
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
    if is_kill(&req) {
        return kill(proxy, client, req).await;
    }
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    if agg == Aggregate::AllOk && (routing.migration.is_some() || routing.filter_keys) {
        return Pending::error("ERR FLUSHALL/FLUSHDB are refused while a topology change runs; retry when CLUSTER RINGINFO shows state:ok");
    }
    let nodes = all_nodes(&routing);
    client.served.on_many(nodes.len());
    let script = script_sub(&req);
    if script == Some(ScriptSub::Flush) {
        proxy.scripts.clear();
    }
    let loaded = (script == Some(ScriptSub::Load) && req.args.len() == 3)
        .then(|| (proxy.clone(), req.args[2].clone()));
    let library =
        function_load(&req).then(|| (proxy.clone(), req.args[req.args.len() - 1].clone()));
    if is_function_flush(&req) {
        proxy.scripts.functions.clear();
    }
    if is_load(&req) {
        for n in &nodes {
            client.lane.claim(n, client.proto);
        }
    }
    let acked = is_flush(spec) && proxy.ha.config.write_ack == WriteAck::Replica;
    let mut waits = Vec::with_capacity(nodes.len());
    for n in &nodes {
        let budget = Some(client.budget.clone());
        waits.push(if acked {
            crate::proxy::ha::reads::send_acked(proxy, client, n, req.raw.clone()).await
        } else {
            client
                .upstream_to(n)
                .send_for(req.raw.clone(), budget)
                .await
        });
    }
    let filter = routing.filter_keys.then(|| routing.clone());
    let budget = client.budget.clone();
    let stats = is_function_stats(&req);
    Pending::Later(Box::pin(async move {
        let mut replies = gather(waits, &budget).await;
        if stats {
            return function_stats(replies);
        }
        if script == Some(ScriptSub::Exists) {
            return crate::proxy::route::scripts::exists_on_all(&replies);
        }
        if let Some((proxy, body)) = loaded {
            if replies.iter().all(|r| !is_error(r)) {
                proxy.scripts.add(&body);
            }
        }
        if let Some((proxy, code)) = library {
            if replies.iter().all(|r| !is_error(r)) {
                proxy.scripts.functions.learn(&code);
            }
        }
        if let (Some(routing), Aggregate::Concat) = (&filter, agg) {
            for (i, r) in replies.iter_mut().enumerate() {
                *r = owned_only(r, routing, i);
            }
        }
        aggregate(agg, &replies)
    }))
}

/// The SCRIPT subcommands whose fan-out the proxy follows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ScriptSub {
    Load,
    Flush,
    Exists,
}

fn script_sub(req: &Request) -> Option<ScriptSub> {
    if !req.name().eq_ignore_ascii_case(b"script") {
        return None;
    }
    let sub = req.args.get(1)?;
    [
        (&b"load"[..], ScriptSub::Load),
        (b"flush", ScriptSub::Flush),
        (b"exists", ScriptSub::Exists),
    ]
    .into_iter()
    .find(|(n, _)| sub.eq_ignore_ascii_case(n))
    .map(|(_, s)| s)
}

/// FLUSHALL, FLUSHDB: the fan-out writes of data a replica must have.
fn is_flush(spec: &Command) -> bool {
    matches!(spec.id, Id::Flushall | Id::Flushdb)
}

/// SCRIPT LOAD, FUNCTION LOAD and FUNCTION RESTORE: sent on a script lane
/// of every node when the client may take them (`upstream::lane`), so the
/// script that uses what they load, pipelined behind them, stays behind.
fn is_load(req: &Request) -> bool {
    let name = req.name();
    let script = name.eq_ignore_ascii_case(b"script");
    let function = name.eq_ignore_ascii_case(b"function");
    req.args.get(1).is_some_and(|sub| {
        (script || function) && sub.eq_ignore_ascii_case(b"load")
            || function && sub.eq_ignore_ascii_case(b"restore")
    })
}

/// `FUNCTION LOAD [REPLACE] code`: its functions' literal keys are kept
/// (`script_keys`).
fn function_load(req: &Request) -> bool {
    (3..=4).contains(&req.args.len())
        && req.name().eq_ignore_ascii_case(b"function")
        && req.args[1].eq_ignore_ascii_case(b"load")
}

fn is_function_flush(req: &Request) -> bool {
    req.args.len() >= 2
        && req.name().eq_ignore_ascii_case(b"function")
        && req.args[1].eq_ignore_ascii_case(b"flush")
}

fn is_function_stats(req: &Request) -> bool {
    req.args.len() == 2
        && req.name().eq_ignore_ascii_case(b"function")
        && req.args[1].eq_ignore_ascii_case(b"stats")
}

/// FUNCTION STATS: the reply of the node that runs a script, as the one
/// Redis that runs it answers (its `running_script`, or `-BUSY` while an
/// EVAL runs there), else the first node's.
fn function_stats(mut replies: Vec<Bytes>) -> Bytes {
    const KEY: &[u8] = b"running_script\r\n";
    let running = |r: &Bytes| {
        is_error(r)
            || r.windows(KEY.len())
                .position(|w| w == KEY)
                .map(|i| &r[i + KEY.len()..])
                .is_some_and(|v| {
                    !(v.starts_with(b"_") || v.starts_with(b"$-1") || v.starts_with(b"*-1"))
                })
    };
    match replies.iter().position(running) {
        Some(i) => replies.swap_remove(i),
        None if !replies.is_empty() => replies.swap_remove(0),
        None => Bytes::from_static(b"-ERR no node answered\r\n"),
    }
}

/// SCRIPT KILL, FUNCTION KILL.
fn is_kill(req: &Request) -> bool {
    let name = req.name();
    (name.eq_ignore_ascii_case(b"script") || name.eq_ignore_ascii_case(b"function"))
        && req.args.len() == 2
        && req.args[1].eq_ignore_ascii_case(b"kill")
}

/// A kill on a fresh connection to every node (the shared one may be held
/// by the very script to stop; with no pinned place left, the shared one),
/// answered as one Redis would: `+OK` if some node stopped its script.
async fn kill(proxy: &Arc<Proxy>, client: &ClientState, req: Request) -> Pending {
    let routing = topology::enter(&proxy.routing, std::iter::empty).await;
    let nodes = all_nodes(&routing);
    client.served.on_many(nodes.len());
    let mut pins = Vec::with_capacity(nodes.len());
    let mut waits = Vec::with_capacity(nodes.len());
    for n in &nodes {
        match n.pin(client.proto) {
            Ok(p) => {
                waits.push(p.send_for(req.raw.clone(), &client.budget).await);
                pins.push(p);
            }
            Err(_) => waits.push(
                n.upstream(client.proto, client.id)
                    .send_for(req.raw.clone(), Some(client.budget.clone()))
                    .await,
            ),
        }
    }
    drop(routing);
    let budget = client.budget.clone();
    Pending::Later(Box::pin(async move {
        // Held until every node answered: dropping one closes it.
        let _pins = pins;
        merge_kills(&gather(waits, &budget).await)
    }))
}

/// One reply for a kill sent to every node: `+OK` from the node that killed
/// its script; else the first error that is not NOTBUSY (UNKILLABLE, a node
/// down); else NOTBUSY.
pub(crate) fn merge_kills(replies: &[bytes::Bytes]) -> bytes::Bytes {
    let notbusy = |r: &[u8]| r.starts_with(b"-NOTBUSY");
    if let Some(ok) = replies.iter().find(|r| !is_error(r)) {
        return ok.clone();
    }
    replies
        .iter()
        .find(|r| !notbusy(r))
        .or(replies.first())
        .cloned()
        .unwrap_or_else(|| {
            bytes::Bytes::from_static(b"-NOTBUSY No scripts in execution right now.\r\n")
        })
}

#[cfg(test)]
mod tests {
    use super::merge_kills;
    use bytes::Bytes;

    #[test]
    fn a_kill_is_ok_when_any_node_stopped_its_script() {
        let nb = Bytes::from_static(b"-NOTBUSY No scripts in execution right now.\r\n");
        let ok = Bytes::from_static(b"+OK\r\n");
        let unk = Bytes::from_static(b"-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n");
        assert_eq!(merge_kills(&[nb.clone(), ok.clone(), nb.clone()]), ok);
        assert_eq!(merge_kills(&[nb.clone(), nb.clone()]), nb);
        assert_eq!(merge_kills(&[nb.clone(), unk.clone()]), unk);
        assert_eq!(merge_kills(&[]), nb);
    }
}
