//! CONFIG on the proxy: GET answers the proxy's own parameters plus the
//! first node's, SET goes to every node and is `+OK` only when all of them
//! accepted it, otherwise an error naming each node that refused and why.
//!
//! Called by `local::handle`; reaches nodes through their upstreams like
//! any fan-out, never holds a lock across an `.await`.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::glob;
use crate::proxy::commands::common::help;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::upstream::topology::all_nodes;
use crate::proxy::Proxy;
use crate::resp::encode;

const CONFIG_HELP: &[&str] = &[
    "GET <pattern>",
    "SET <directive> <value> [<directive> <value> ...]",
    "RESETSTAT",
    "RELOAD",
    "    Read the config file again: limits and timeouts apply at once, node changes one at a time.",
    "HELP",
];

/// What `CONFIG GET` reports for the nodes' parameters when the first
/// node cannot answer: enough for redis-benchmark and clients that probe.
const CONFIG_PARAMS: &[(&str, &str)] = &[
    ("appendonly", "no"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "allkeys-lru"),
    ("save", ""),
    ("timeout", "0"),
];

/// Parameters that describe the proxy itself; CONFIG GET answers them from
/// the proxy, whatever the nodes say.
fn own_params(proxy: &Proxy) -> Vec<(&'static str, String)> {
    vec![
        ("databases", "1".into()),
        ("cluster-enabled", "no".into()),
        // Clients connect without a password (as to a redis-server without one).
        ("requirepass", String::new()),
        (
            "proto-max-bulk-len",
            proxy.config().limits.max_bulk_len.to_string(),
        ),
    ]
}

/// CONFIG GET answers from the proxy's own parameters plus the first node
/// of the ring (nodes are configured alike); CONFIG SET goes to every node
/// and is `+OK` only when every node accepted it.
pub(crate) async fn config(proxy: &Arc<Proxy>, s: &ClientState, args: &[Bytes]) -> Pending {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let mut out = BytesMut::new();
    match sub.as_str() {
        "get" if args.len() >= 3 => return config_get(proxy, s, args).await,
        "set" if args.len() >= 4 && args.len().is_multiple_of(2) => {
            return config_set(proxy, s, args).await
        }
        "set" if args.len() >= 4 => return Pending::error("ERR syntax error"),
        "reload" if args.len() == 2 => return crate::proxy::admin::reload::command(proxy),
        "resetstat" | "help" | "reload" if args.len() > 2 => {
            return Pending::error(&format!(
                "ERR wrong number of arguments for 'config|{sub}' command"
            ))
        }
        "resetstat" => return resetstat(proxy, s, args).await,
        "help" => help(&mut out, "CONFIG", CONFIG_HELP),
        "get" | "set" => {
            return Pending::error(&format!(
                "ERR wrong number of arguments for 'config|{sub}' command"
            ))
        }
        "rewrite" => {
            return Pending::error(
                "ERR CONFIG REWRITE is not available through the proxy; the nodes run without config files",
            )
        }
        _ => {
            return Pending::error(&format!(
                "ERR unknown subcommand '{}'. Try CONFIG HELP.",
                String::from_utf8_lossy(&args[1])
            ))
        }
    }
    Pending::ready(out)
}

/// The request re-encoded for the nodes.
fn forwarded(args: &[Bytes]) -> Bytes {
    let parts: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
    let mut raw = BytesMut::new();
    encode::command(&mut raw, &parts);
    raw.freeze()
}

async fn config_get(proxy: &Proxy, s: &ClientState, args: &[Bytes]) -> Pending {
    let pats: Vec<Bytes> = args[2..].to_vec();
    let matching = |name: &str| {
        pats.iter()
            .any(|p| glob::matches_nocase(p, name.as_bytes()))
    };
    let mut found: Vec<(Vec<u8>, Vec<u8>)> = own_params(proxy)
        .into_iter()
        .filter(|(k, _)| matching(k))
        .map(|(k, v)| (k.as_bytes().to_vec(), v.into_bytes()))
        .collect();
    let fallback: Vec<(Vec<u8>, Vec<u8>)> = CONFIG_PARAMS
        .iter()
        .filter(|(k, _)| matching(k))
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    let routing = proxy.routing.load_full();
    let wait = match all_nodes(&routing).first() {
        Some(n) => Some(n.upstream(2, s.id).send(forwarded(args)).await),
        None => None,
    };
    let proto = s.proto;
    Pending::Later(Box::pin(async move {
        let from_node = match wait {
            Some(w) => w.await.ok().and_then(|r| bulk_pairs(&r)),
            None => None,
        };
        for (k, v) in from_node.unwrap_or(fallback) {
            if !found.iter().any(|(f, _)| f.eq_ignore_ascii_case(&k)) {
                found.push((k, v));
            }
        }
        let mut out = BytesMut::new();
        encode::map_len(&mut out, found.len(), proto);
        for (k, v) in found {
            encode::bulk(&mut out, &k);
            encode::bulk(&mut out, &v);
        }
        out.freeze()
    }))
}

/// The strings of a RESP2 array of bulk strings, in pairs.
fn bulk_pairs(reply: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let items: Vec<Vec<u8>> = crate::resp::reply::elements(reply)?
        .into_iter()
        .map(|r| {
            let el = &reply[r];
            let start = el.iter().position(|&c| c == b'\n')? + 1;
            (el.first() == Some(&b'$')).then(|| el[start..el.len() - 2].to_vec())
        })
        .collect::<Option<_>>()?;
    Some(
        items
            .chunks_exact(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
    )
}

/// CONFIG RESETSTAT: the proxy's command and error counters, and every
/// node's (the keyspace hits and misses INFO sums); `+OK` once all have.
async fn resetstat(proxy: &Proxy, s: &ClientState, args: &[Bytes]) -> Pending {
    proxy.ops.calls.reset(&proxy.ops.metrics);
    config_set(proxy, s, args).await
}

async fn config_set(proxy: &Proxy, s: &ClientState, args: &[Bytes]) -> Pending {
    let routing = proxy.routing.load_full();
    let nodes = all_nodes(&routing);
    let raw = forwarded(args);
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_uppercase();
    let mut waits = Vec::with_capacity(nodes.len());
    for n in &nodes {
        let label = format!("{} ({})", n.spec.name, n.spec.addr);
        waits.push((label, n.upstream(2, s.id).send(raw.clone()).await));
    }
    Pending::Later(Box::pin(async move {
        let total = waits.len();
        let mut refused = Vec::new();
        for (label, w) in waits {
            match w.await {
                Ok(r) if &r[..] == b"+OK\r\n" => {}
                Ok(r) => {
                    let text = String::from_utf8_lossy(&r);
                    let text = text.trim_start_matches(['-', '!']).trim_end();
                    refused.push(format!("{label}: {text}"));
                }
                Err(_) => refused.push(format!("{label}: no reply")),
            }
        }
        let mut out = BytesMut::new();
        if refused.is_empty() {
            encode::simple(&mut out, "OK");
        } else {
            let line = format!(
                "ERR CONFIG {sub} refused by {} of {total} nodes (the others applied it): {}",
                refused.len(),
                refused.join("; ")
            );
            encode::error(&mut out, &line);
        }
        out.freeze()
    }))
}
