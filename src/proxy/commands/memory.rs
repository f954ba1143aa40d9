//! MEMORY on the proxy: USAGE is routed by key; DOCTOR, STATS and HELP
//! answer for the whole cluster, from the nodes' INFO summed as INFO sums
//! it (`info`).
//!
//! Called by `local::handle`.

use std::sync::Arc;

use bytes::BytesMut;

use crate::catalogue::{Command, Id, KeySpec, READONLY};
use crate::proxy::commands::info::{ask_nodes, collect, NodeSums};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::Proxy;
use crate::resp::info::human;
use crate::resp::{encode, eq_ignore_case, Request};

/// `MEMORY USAGE key [SAMPLES n]`, routed like any command keyed at position 2.
/// Not a catalogue row: MEMORY as a whole is the proxy's, this form of it
/// is forwarded.
static MEMORY_USAGE: Command = Command {
    id: Id::Memory,
    name: "memory",
    arity: -3,
    keys: KeySpec::Range {
        first: 2,
        last: 2,
        step: 1,
    },
    flags: READONLY,
};

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports (summed over the nodes behind the proxy).",
    "STATS",
    "    Return information about the memory usage of the nodes, summed.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value, asked of the node that owns it.",
    "HELP",
    "    Print this help.",
];

/// MEMORY DOCTOR | STATS | USAGE key [SAMPLES n] | HELP
pub(crate) async fn memory(proxy: &Arc<Proxy>, s: &mut ClientState, req: Request) -> Pending {
    let sub = req.args[1].clone();
    let argc = req.args.len();
    if eq_ignore_case(&sub, b"usage") {
        if argc == 3 || (argc == 5 && eq_ignore_case(&req.args[3], b"samples")) {
            return crate::proxy::route::keyed::keyed(proxy, s, &MEMORY_USAGE, req).await;
        }
        let msg = if argc == 2 {
            "ERR wrong number of arguments for 'memory|usage' command"
        } else {
            "ERR syntax error"
        };
        return Pending::error(msg);
    }
    if eq_ignore_case(&sub, b"help") && argc == 2 {
        let mut out = BytesMut::new();
        encode::array_len(&mut out, MEMORY_HELP.len());
        MEMORY_HELP.iter().for_each(|l| encode::simple(&mut out, l));
        return Pending::ready(out);
    }
    let (doctor, stats) = (
        eq_ignore_case(&sub, b"doctor"),
        eq_ignore_case(&sub, b"stats"),
    );
    if (doctor || stats) && argc == 2 {
        let proto = s.proto;
        let waits = ask_nodes(proxy, s).await;
        let total = waits.len();
        return Pending::Later(Box::pin(async move {
            let n = collect(waits).await;
            let mut out = BytesMut::new();
            if doctor {
                encode::verbatim(&mut out, doctor_text(&n, total).as_bytes(), proto);
            } else {
                memory_stats(&mut out, &n, total, proto);
            }
            out.freeze()
        }));
    }
    let name = String::from_utf8_lossy(&sub).to_ascii_lowercase();
    let msg = match name.as_str() {
        "malloc-stats" | "purge" => format!(
            "ERR MEMORY {} is per node: run it on a node directly (CLUSTER RING lists them)",
            name.to_uppercase()
        ),
        "doctor" | "stats" | "help" => {
            format!("ERR wrong number of arguments for 'memory|{name}' command")
        }
        _ => format!(
            "ERR unknown subcommand '{}'. Try MEMORY HELP.",
            String::from_utf8_lossy(&sub)
        ),
    };
    Pending::error(&msg)
}

fn doctor_text(n: &NodeSums, total: usize) -> String {
    let mut text = format!(
        "shardis: {} of {total} nodes answered. Together they use {} (peak {}), resident {}, fragmentation ratio {:.2}, {} keys.",
        n.answered,
        human(n.used),
        human(n.peak),
        human(n.rss),
        n.rss as f64 / n.used.max(1) as f64,
        n.keys
    );
    if n.answered < total {
        text.push_str(" Some nodes did not answer: CLUSTER RING shows which.");
    }
    if n.evicted > 0 {
        text.push_str(&format!(
            " {} keys were evicted under maxmemory: add a node (CLUSTER SPAWNNODE / ADDNODE) or raise maxmemory.",
            n.evicted
        ));
    }
    text.push_str(" For one node's own report, run MEMORY DOCTOR on that node.");
    text
}

fn memory_stats(out: &mut BytesMut, n: &NodeSums, total: usize, proto: u8) {
    let fields: [(&str, u64); 6] = [
        ("peak.allocated", n.peak),
        ("total.allocated", n.used),
        ("keys.count", n.keys),
        ("rss", n.rss),
        ("shardis.nodes", total as u64),
        ("shardis.nodes.reporting", n.answered as u64),
    ];
    encode::map_len(out, fields.len(), proto);
    for (k, v) in fields {
        encode::bulk(out, k.as_bytes());
        encode::integer(out, v as i64);
    }
}
