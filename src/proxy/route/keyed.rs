//! Forwarding by key: a request whose keys all live on one node goes to that
//! node's shared upstream (the hot path for one key at position 1, with the
//! hot-GET cache in front of it). The one way a handler forwards to a key's
//! node (MEMORY USAGE uses it too).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::catalogue::KeySpec;
use crate::catalogue::{Command, Id};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::error::lost;
use crate::proxy::conn::pending::Pending;
use crate::proxy::route::hot_cache::{self, Lookup};
use crate::proxy::route::send::{invalidate_written, moving_writes, send_tracked};
use crate::proxy::route::{script_keys, scripts};
use crate::proxy::upstream::topology::{self};
use crate::proxy::Proxy;
use crate::resp::Request;

/// Routes by the keys `spec` declares (all on one node); also used by
/// `memory::memory` for MEMORY USAGE.
pub(crate) async fn keyed(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: &'static Command,
    req: Request,
) -> Pending {
    if let KeySpec::Range {
        first: 1, last: 1, ..
    } = spec.keys
    {
        if req.args.len() > 1 {
            return single_key(proxy, client, spec, req).await;
        }
    }
    let positions = spec.key_positions(&req.args);
    let keyless = match &positions {
        // No key: a form that touches no data (OBJECT HELP), a key count
        // of 0 that Redis refuses (LMPOP 0 …: "numkeys should be greater
        // than 0"), or a script without declared keys.
        Ok(p) => p.is_empty(),
        // A malformed key count: Redis refuses the request before touching
        // data, with an error that depends on more than the count (EVALSHA
        // checks its digest first), so let a node say it. Any other error
        // is the proxy's own refusal and is answered here: it must never
        // reach a node (XREAD BLOCK would hold the shared upstream).
        Err(_) => matches!(spec.keys, KeySpec::NumKeys { .. }),
    };
    // A keyless script runs where the keys its code names as literals
    // live, when they all live on one node (`script_keys`).
    let inferred = keyless && is_script(spec.id) && req.args.len() > 1 && positions.is_ok();
    let keys: Vec<Bytes> = match &positions {
        Ok(_) if inferred => literal_keys(proxy, spec.id, &req.args[1]),
        Ok(p) => p.iter().map(|&p| req.args[p].clone()).collect(),
        Err(e) if !keyless => return Pending::error(e),
        Err(_) => Vec::new(),
    };
    if keys.is_empty() {
        let routing = topology::enter(&proxy.routing, std::iter::empty).await;
        return keyless_send(proxy, client, spec, req, &routing).await;
    }
    let routing = match client.enter_for(&proxy.routing, || keys.iter()).await {
        Ok(g) => g,
        Err(p) => return p,
    };
    let first = routing.ring.locate(&keys[0]);
    let node = routing.node(first).clone();
    for k in &keys[1..] {
        if !Arc::ptr_eq(routing.owner(k), &node) {
            if inferred {
                return keyless_send(proxy, client, spec, req, &routing).await;
            }
            return Pending::error(crate::proxy::conn::error::CROSSSLOT);
        }
    }
    client.served.on(first);
    proxy.ops.hot_keys.sample(&keys[0]);
    if is_script(spec.id) {
        client.lane.claim(&node, client.proto);
        if is_eval(spec.id) {
            scripts::spread_eval(&proxy.scripts, client, &routing, &req.args[1], &node).await;
        }
    }
    invalidate_written(proxy, spec, &keys);
    let track = moving_writes(&routing, spec, keys.iter().cloned());
    let mut rx = send_tracked(proxy, spec, client, &routing, &node, req.raw, track).await;
    if spec.is_write() {
        rx = proxy.wake.after_write(keys.iter(), rx);
    }
    Pending::Charged(rx)
}

/// The hot path: a command with one key at position 1 (GET, SET, INCR, …).
async fn single_key(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    spec: &'static Command,
    req: Request,
) -> Pending {
    let Request { raw, args } = req;
    let key = &args[1];
    let routing = match client
        .enter_for(&proxy.routing, || std::iter::once(key))
        .await
    {
        Ok(g) => g,
        Err(p) => return p,
    };
    proxy.ops.hot_keys.sample(key);
    // One branch when the cache is off.
    let mut fill = None;
    if let Some(cache) = &proxy.ops.hot_cache {
        if spec.is_write() {
            cache.invalidate(key);
        } else if spec.id == Id::Get && args.len() == 2 && proxy.ops.hot_keys.is_hot(key) {
            let epoch = routing.ring.epoch();
            match cache.lookup(key, epoch, Instant::now()) {
                Lookup::Hit(payload) => {
                    return Pending::Ready(hot_cache::reply(&payload, client.proto))
                }
                Lookup::Miss(token) => fill = Some((token, epoch)),
            }
        }
    }
    let idx = routing.ring.locate(key);
    let mut node = routing.node(idx);
    if spec.flags & crate::catalogue::READONLY != 0 {
        node = match crate::proxy::ha::reads::read_node(proxy, &routing.shards[idx], client.id) {
            Ok(n) => n,
            Err(e) => return Pending::error(&e),
        };
    }
    client.served.on(idx);
    let track = moving_writes(&routing, spec, std::iter::once(key.clone()));
    let mut rx = send_tracked(proxy, spec, client, &routing, node, raw, track).await;
    if spec.is_write() {
        rx = proxy.wake.after_write(std::iter::once(key), rx);
    }
    match fill {
        Some((token, epoch)) => fill_on_reply(proxy, client, key.clone(), token, epoch, rx),
        None if spec.is_write() && proxy.ops.hot_cache.is_some() => {
            forget_on_reply(proxy, client, key.clone(), rx)
        }
        None => Pending::Charged(rx),
    }
}

/// A forwarded write whose key is forgotten again once the node answered: a
/// GET from another client, sent on another connection after the first
/// invalidation, may have read the old value just before the write landed.
fn forget_on_reply(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    key: Bytes,
    rx: oneshot::Receiver<Bytes>,
) -> Pending {
    on_reply(proxy, client, rx, move |cache, _| cache.invalidate(&key))
}

/// A forwarded hot GET whose reply also fills the cache (bulk and nil only).
fn fill_on_reply(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    key: Bytes,
    token: u64,
    epoch: u64,
    rx: oneshot::Receiver<Bytes>,
) -> Pending {
    on_reply(proxy, client, rx, move |cache, reply| {
        if let Some(payload) = hot_cache::cacheable(reply) {
            cache.fill(&key, token, epoch, payload, Instant::now());
        }
    })
}

/// A forwarded request whose reply, once it arrives, is shown to the hot
/// cache (`then`) before the client gets it.
fn on_reply(
    proxy: &Arc<Proxy>,
    client: &ClientState,
    rx: oneshot::Receiver<Bytes>,
    then: impl FnOnce(&hot_cache::HotCache, &Bytes) + Send + 'static,
) -> Pending {
    let proxy = proxy.clone();
    let budget = client.budget.clone();
    Pending::Later(Box::pin(async move {
        let Ok(reply) = rx.await else {
            return lost();
        };
        // Charged on arrival; the session charges it again when it takes it.
        budget.release(reply.len());
        if let Some(cache) = &proxy.ops.hot_cache {
            then(cache, &reply);
        }
        reply
    }))
}

/// A request with no key to route by: any node answers it as Redis would.
/// A keyless script (EVAL … 0, FCALL f 0) whose code names no literal keys
/// on one node goes where its body, digest or function name would live as
/// a key: always the same node for the same script, as a Redis Cluster
/// client sends it to one node of its choice.
async fn keyless_send(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    spec: &'static Command,
    req: Request,
    routing: &topology::Routing,
) -> Pending {
    let by = if is_script(spec.id) && req.args.len() > 1 {
        &req.args[1]
    } else {
        &req.args[0]
    };
    client.served.on(routing.ring.locate(by));
    let node = routing.owner(by);
    if is_script(spec.id) {
        client.lane.claim(node, client.proto);
        if is_eval(spec.id) && req.args.len() > 1 {
            scripts::spread_eval(&proxy.scripts, client, routing, &req.args[1], node).await;
        }
    }
    let rx = client.upstream_to(node).send(req.raw).await;
    Pending::One(rx)
}

/// The keys a keyless script's code names as literals: an EVAL's body, the
/// body of an EVALSHA's digest as this proxy saw it (`EVAL`, `SCRIPT
/// LOAD`), a function's code as `FUNCTION LOAD` gave it.
fn literal_keys(proxy: &Proxy, id: Id, script: &[u8]) -> Vec<Bytes> {
    match id {
        Id::Eval | Id::EvalRo => script_keys::literal_keys(script),
        Id::Evalsha | Id::EvalshaRo => proxy.scripts.literal_keys_of(script),
        Id::Fcall | Id::FcallRo => proxy.scripts.functions.keys(script),
        _ => Vec::new(),
    }
}

/// EVAL and EVAL_RO: their body is cached by the node that runs it.
fn is_eval(id: Id) -> bool {
    matches!(id, Id::Eval | Id::EvalRo)
}

/// EVAL, FCALL and their forms: a keyless one is routed by its script.
fn is_script(id: Id) -> bool {
    matches!(
        id,
        Id::Eval | Id::Evalsha | Id::EvalRo | Id::EvalshaRo | Id::Fcall | Id::FcallRo
    )
}
