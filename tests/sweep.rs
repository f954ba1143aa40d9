//! The differential command sweep: every row of the command table (read from
//! the library, so a new row is swept without touching this file), at every
//! argument count from none to two past its arity, with a handful of argument
//! shapes, sent (a) through the proxy over redis-server backends and (b) to a
//! plain redis-server, and (c) to a built-in node for what it implements.
//!
//! The same requests also go (d) through a proxy over built-in nodes, which
//! must answer each one in time, whatever the nodes implement, and answer
//! pub/sub (PUBLISH, SPUBLISH, PUBSUB, the unsubscribe family) with Redis's
//! reply class. The unsubscribe family is read as one frame per argument.
//!
//! The proxy must answer every request in time (never close, hang or panic)
//! with the same reply class as Redis — error or not, and for errors the same
//! first word — or a documented refusal. The node must do the same wherever it
//! implements the command. Differences by design sit in [`ALLOWED`], each
//! with its reason; anything else fails the test with a table.

mod common;
#[path = "sweep/targets.rs"]
mod targets;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use shardis::resp::command::{CommandSpec, Kind, TABLE};
use targets::{show, Outcome, Req, Target};

/// How long any one reply may take. Nothing swept blocks, so only a hang
/// (or a machine under very heavy load) reaches it.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Commands that must never reach a server: the proxy refuses them, and then
/// only the proxy is asked (it must answer with an error); should one stop
/// being refused, it is skipped and listed instead of being run.
///
/// (XREAD and XREADGROUP are swept: they block only with a BLOCK argument,
/// which no shape spells, and the proxy refuses BLOCK.)
const DANGEROUS: &[(&str, &str)] = &[
    ("shutdown", "stops the server"),
    ("debug", "can crash or stall the server"),
    ("monitor", "turns the connection into a feed"),
    ("subscribe", "turns the connection into a subscriber"),
    ("psubscribe", "turns the connection into a subscriber"),
    ("ssubscribe", "turns the connection into a subscriber"),
    ("sync", "starts a replication stream"),
    ("psync", "starts a replication stream"),
    ("save", "writes a snapshot"),
    ("bgsave", "forks a snapshot"),
    ("bgrewriteaof", "forks an AOF rewrite"),
    ("replicaof", "makes the server a replica"),
    ("slaveof", "makes the server a replica"),
    ("failover", "starts a failover"),
    ("migrate", "moves keys to another server"),
    ("multi", "queues every later command on the connection"),
    ("quit", "closes the connection by design"),
    (
        "select",
        "a non-zero database would split the direct connection's keyspace",
    ),
    ("blpop", "blocks"),
    ("brpop", "blocks"),
    ("brpoplpush", "blocks"),
    ("blmove", "blocks"),
    ("blmpop", "blocks"),
    ("bzpopmin", "blocks"),
    ("bzpopmax", "blocks"),
    ("bzmpop", "blocks"),
    ("wait", "blocks"),
    ("waitaof", "blocks"),
];

/// Subcommands left out of [`SUBCOMMANDS`] on purpose, and why; printed.
const EXCLUDED_SUBCOMMANDS: &[(&str, &str)] = &[
    (
        "client kill|pause|unpause|reply|unblock|tracking|caching",
        "act on connections",
    ),
    (
        "config set|rewrite",
        "change or write the server's configuration",
    ),
    ("script kill", "stops a running script"),
    (
        "cluster addnode|removenode|spawnnode|failover|addreplica|removereplica",
        "change the topology",
    ),
];

/// Subcommands swept besides the argument shapes (which never spell one);
/// see [`EXCLUDED_SUBCOMMANDS`] for those left out.
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "object",
        &["help", "encoding", "freq", "idletime", "refcount"],
    ),
    ("config", &["get", "help", "resetstat"]),
    (
        "client",
        &[
            "id", "getname", "setname", "info", "list", "help", "no-evict", "no-touch", "setinfo",
        ],
    ),
    (
        "command",
        &["count", "info", "docs", "list", "help", "getkeys"],
    ),
    ("script", &["exists", "load", "flush", "help"]),
    (
        "cluster",
        &[
            "info", "nodes", "slots", "shards", "keynode", "help", "myid",
        ],
    ),
];

/// Where the proxy differs from redis-server by design (`command` or
/// `command subcommand`), and why.
const ALLOWED: &[(&str, &str)] = &[
    (
        "cluster",
        "the proxy answers CLUSTER itself (its topology); a standalone redis-server refuses it",
    ),
    (
        "readonly",
        "the proxy is a cluster node to cluster-mode clients: READONLY is +OK",
    ),
    (
        "readwrite",
        "the proxy is a cluster node to cluster-mode clients: READWRITE is +OK",
    ),
    (
        "asking",
        "the proxy is a cluster node to cluster-mode clients: ASKING is +OK",
    ),
];

/// Rows whose replies through the proxy over built-in nodes are compared
/// with redis-server's too (for the rest, (d) asks only for an answer): pub/sub,
/// which both kinds of node serve alike. Each must have been swept.
const COMPARED_OVER_BUILTIN: &[&str] = &[
    "publish",
    "spublish",
    "pubsub",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
];

/// Where the built-in node differs from redis-server by design, and why.
const ALLOWED_NODE: &[(&str, &str)] = &[];

/// Argument shapes: every argument after the name (and subcommand) is filled
/// by the shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// Keys nobody wrote, on different nodes.
    Missing,
    /// Keys sharing a hash tag: `{t}a {t}b …`.
    Tagged,
    /// The first argument a list (created on the servers first), then `{t}…`.
    List,
    /// The first argument a hash, then `{t}…`.
    Hash,
    /// The first argument a string holding `10`, then `1`s, `-1`s or huge
    /// numbers: commands on a key that exists, with numeric arguments.
    StrOne,
    StrNegative,
    StrHuge,
    /// A number past i64.
    Huge,
    Negative,
    Zero,
    One,
    /// A pattern with every glob metacharacter and an unclosed class.
    Glob,
    Empty,
}

const SHAPES: &[Shape] = &[
    Shape::Missing,
    Shape::Tagged,
    Shape::List,
    Shape::Hash,
    Shape::StrOne,
    Shape::StrNegative,
    Shape::StrHuge,
    Shape::Huge,
    Shape::Negative,
    Shape::Zero,
    Shape::One,
    Shape::Glob,
    Shape::Empty,
];

fn fill(shape: Shape, i: usize) -> Vec<u8> {
    let tagged = || format!("{{t}}{}", (b'a' + (i % 26) as u8) as char);
    match shape {
        Shape::Missing => format!("sweep:missing:{i}"),
        Shape::Tagged => tagged(),
        Shape::List if i == 0 => "{t}list".into(),
        Shape::Hash if i == 0 => "{t}hash".into(),
        Shape::List | Shape::Hash => tagged(),
        Shape::StrOne | Shape::StrNegative | Shape::StrHuge if i == 0 => "{t}str".into(),
        Shape::StrOne => "1".into(),
        Shape::StrNegative => "-1".into(),
        Shape::StrHuge => "99999999999999999999".into(),
        Shape::Huge => "99999999999999999999".into(),
        Shape::Negative => "-1".into(),
        Shape::Zero => "0".into(),
        Shape::One => "1".into(),
        Shape::Glob => "*?*?[".into(),
        Shape::Empty => String::new(),
    }
    .into_bytes()
}

/// Requests sent to every target before a group, so each starts equal.
fn prelude() -> Vec<Req> {
    let r = |a: &[&str]| a.iter().map(|s| s.as_bytes().to_vec()).collect::<Req>();
    vec![
        r(&["FLUSHALL"]),
        r(&["RPUSH", "{t}list", "x", "y"]),
        r(&["HSET", "{t}hash", "f", "1"]),
        r(&["SET", "{t}str", "10"]),
    ]
}

/// One row (or one subcommand of it) under one shape: every argument count.
struct Group {
    spec: &'static CommandSpec,
    label: String,
    shape: Shape,
    cases: Vec<Req>,
}

fn groups() -> Vec<Group> {
    let mut out = Vec::new();
    for spec in TABLE {
        let max = spec.arity.unsigned_abs() as usize + 2;
        let mut heads: Vec<(String, Vec<Vec<u8>>)> = vec![(spec.name.into(), Vec::new())];
        if let Some((_, subs)) = SUBCOMMANDS.iter().find(|(n, _)| *n == spec.name) {
            for sub in *subs {
                heads.push((
                    format!("{} {sub}", spec.name),
                    vec![sub.as_bytes().to_vec()],
                ));
            }
        }
        for (label, head) in heads {
            for &shape in SHAPES {
                let mut cases = Vec::new();
                for n in head.len()..=max {
                    let mut req = vec![spec.name.to_uppercase().into_bytes()];
                    req.extend(head.iter().cloned());
                    req.extend((head.len()..n).map(|i| fill(shape, i)));
                    cases.push(req);
                }
                out.push(Group {
                    spec,
                    label: label.clone(),
                    shape,
                    cases,
                });
            }
        }
    }
    out
}

fn allowed<'a>(list: &'a [(&str, &str)], label: &str) -> Option<&'a str> {
    let name = label.split(' ').next().unwrap_or("");
    list.iter()
        .find(|(n, _)| *n == label || *n == name)
        .map(|(_, why)| *why)
}

/// A documented refusal by the proxy, acceptable whatever Redis answers.
fn is_refusal(o: &Outcome) -> bool {
    o.contains("is not supported by shardis")
        || o.contains("SCAN through shardis continues only cursors it returned")
        || o.starts(b"-CROSSSLOT")
}

struct Finding {
    target: &'static str,
    req: String,
    ours: String,
    redis: String,
}

#[test]
fn every_command_answers_like_redis_through_the_proxy_and_on_the_node() {
    sweep(2);
}

/// The same in RESP3 (HELLO 3 first), where nulls, maps and doubles differ.
#[test]
fn every_command_answers_like_redis_in_resp3_too() {
    sweep(3);
}

fn sweep(proto: u8) {
    if !have_tool("redis-server") {
        return;
    }
    let t0 = Instant::now();
    let cluster = Cluster::redis(2);
    let direct = start_redis(free_port());
    let node = start_node(free_port());
    let builtin = Cluster::builtin(2);
    let mut proxy = Target::new("proxy", cluster.proxy.port, proto);
    let mut over_builtin = Target::new("proxy over built-in nodes", builtin.proxy.port, proto);
    let mut redis = Target::new("redis", direct.port, proto);
    let mut ours = Target::new("node", node.port, proto);

    let mut findings: Vec<Finding> = Vec::new();
    let mut not_implemented: BTreeSet<String> = BTreeSet::new();
    let mut skipped: BTreeSet<String> = BTreeSet::new();
    let mut proxy_only: BTreeSet<&str> = BTreeSet::new();
    let mut allowed_seen: BTreeSet<String> = BTreeSet::new();
    let (mut sent, mut compared_node) = (0usize, 0usize);
    let mut swept_over_builtin: BTreeSet<&str> = BTreeSet::new();

    for g in groups() {
        let danger = DANGEROUS.iter().find(|(n, _)| *n == g.spec.name);
        let refused = matches!(g.spec.kind, Kind::Refused(_));
        if let Some((name, why)) = danger {
            if !refused {
                skipped.insert(format!("{name}: {why}"));
                continue;
            }
        }
        if refused {
            // Only the proxy is asked: it must refuse (or reject the arity).
            proxy_only.insert(g.spec.name);
            for (req, got) in g.cases.iter().zip(proxy.run(&g.cases)) {
                sent += 1;
                if !got.starts(b"-ERR ") {
                    findings.push(Finding {
                        target: "proxy",
                        req: show(req),
                        ours: got.text(),
                        redis: "(refused by the table)".into(),
                    });
                }
            }
            continue;
        }
        let mut batch = prelude();
        batch.extend(g.cases.iter().cloned());
        let skip = prelude().len();
        let p = proxy.run(&batch);
        let r = redis.run(&batch);
        let n = ours.run(&batch);
        let b = over_builtin.run(&batch);
        sent += batch.len();
        // (d): an answer, any answer, for every request; for pub/sub, an
        // answer of Redis's class.
        let compare_b = COMPARED_OVER_BUILTIN.contains(&g.spec.name);
        if compare_b {
            swept_over_builtin.insert(g.spec.name);
        }
        for (req, (got, want)) in batch.iter().zip(b.iter().zip(&r)) {
            let differs = compare_b && got.class() != want.class() && !is_refusal(got);
            if matches!(got, Outcome::Hang | Outcome::Closed) || differs {
                findings.push(Finding {
                    target: over_builtin.name,
                    req: show(req),
                    ours: got.text(),
                    redis: if compare_b {
                        want.text()
                    } else {
                        "(any reply)".into()
                    },
                });
            }
        }
        // The node holds no list or hash while it has no such types: its
        // wrong-type cases are not comparable.
        let node_has_types = n[1].starts(b":") && n[2].starts(b":");
        let node_comparable = node_has_types || !matches!(g.shape, Shape::List | Shape::Hash);
        for (i, req) in g.cases.iter().enumerate() {
            let (po, ro, no) = (&p[skip + i], &r[skip + i], &n[skip + i]);
            // (a) against (b): the proxy.
            let same = po.class() == ro.class();
            let dead = matches!(po, Outcome::Hang | Outcome::Closed);
            if dead || (!same && !is_refusal(po)) {
                match allowed(ALLOWED, &g.label) {
                    Some(_) if !dead => {
                        allowed_seen.insert(g.label.clone());
                    }
                    _ => findings.push(Finding {
                        target: "proxy",
                        req: show(req),
                        ours: po.text(),
                        redis: ro.text(),
                    }),
                }
            }
            // (c) against (b): the node, where it implements the command.
            // The node names the backends that serve what it lacks.
            if no.starts(b"-ERR unknown command")
                || no.contains("is not served by the built-in nodes")
            {
                not_implemented.insert(g.spec.name.to_string());
                continue;
            }
            if no.starts(b"-ERR unknown subcommand") && !ro.starts(b"-ERR unknown subcommand") {
                not_implemented.insert(g.label.clone());
                continue;
            }
            if !node_comparable {
                continue;
            }
            compared_node += 1;
            let dead = matches!(no, Outcome::Hang | Outcome::Closed);
            if dead || no.class() != ro.class() {
                match allowed(ALLOWED_NODE, &g.label) {
                    Some(_) if !dead => {
                        allowed_seen.insert(format!("node {}", g.label));
                    }
                    _ => findings.push(Finding {
                        target: "node",
                        req: show(req),
                        ours: no.text(),
                        redis: ro.text(),
                    }),
                }
            }
        }
    }

    println!(
        "RESP{proto}: swept {} table rows: {sent} requests per target in {:.1?}; {compared_node} node replies compared",
        TABLE.len(),
        t0.elapsed()
    );
    println!("proxy only (refused by the table, never sent to a server): {proxy_only:?}");
    println!("skipped (dangerous and not refused): {skipped:?}");
    println!("subcommands never sent: {EXCLUDED_SUBCOMMANDS:?}");
    println!(
        "not implemented by the built-in node ({}): {not_implemented:?}",
        not_implemented.len()
    );
    println!("allowed differences seen: {allowed_seen:?}");
    let mut table = String::from("| target | request | ours | redis-server |\n|---|---|---|---|\n");
    for f in &findings {
        table.push_str(&format!(
            "| {} | `{}` | `{}` | `{}` |\n",
            f.target, f.req, f.ours, f.redis
        ));
    }
    assert_eq!(
        swept_over_builtin,
        COMPARED_OVER_BUILTIN.iter().copied().collect(),
        "pub/sub rows compared over built-in nodes"
    );
    cluster.proxy.assert_no_panic();
    builtin.proxy.assert_no_panic();
    node.assert_no_panic();
    assert!(
        findings.is_empty(),
        "{} replies differ from redis-server in class (or never came):\n{table}",
        findings.len()
    );
}
