//! A replica of a built-in node beside a replica of a redis-server 7:
//! refused writes byte for byte (READONLY, also inside MULTI), and ROLE and
//! INFO replication with the same shape and field names on both sides.
//! Skips when `redis-server` is missing, unless `SHARDIS_REQUIRE_REDIS=1`.

mod common;
#[path = "node_replication/support.rs"]
mod support;

use common::{
    eventually, free_port, have_tool, redis_args, skip, spawn_redis, start_node, Proc, Raw,
};
use support::*;

/// A redis-server; a replica of `primary` when given.
fn redis(port: u16, primary: Option<u16>) -> Proc {
    let mut args = redis_args(port);
    args.extend(["--repl-diskless-sync-delay", "0"].map(String::from));
    if let Some(p) = primary {
        args.extend(["--replicaof".into(), "127.0.0.1".into(), p.to_string()]);
    }
    spawn_redis(port, &args)
}

/// A reply's structure: the type of every element, values dropped.
fn shape(reply: &str) -> String {
    let mut out = Vec::new();
    let mut skip_next = false;
    for line in reply.split("\r\n").filter(|l| !l.is_empty()) {
        if skip_next {
            skip_next = false;
            continue;
        }
        match line.as_bytes()[0] {
            b'$' => {
                out.push("$");
                skip_next = true;
            }
            b':' => out.push(":"),
            _ => out.push(line),
        }
    }
    out.join(" ")
}

/// The field names of `INFO replication`, slaveN's keys included.
fn names(port: u16) -> Vec<String> {
    let mut r = Raw::connect(port);
    let text = r.call(&["INFO", "replication"]);
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| {
            if k.starts_with("slave") && v.contains('=') {
                let keys: Vec<&str> = v
                    .split(',')
                    .filter_map(|kv| kv.split(':').next())
                    .map(|kv| kv.split('=').next().unwrap_or(""))
                    .collect();
                format!("{k}:{}", keys.join(","))
            } else {
                k.to_string()
            }
        })
        .collect()
}

#[test]
fn a_replica_answers_like_a_redis_server_replica() {
    if !have_tool("redis-server") {
        return skip(
            "redis-server is not installed",
            "apt-get install redis-server",
        );
    }
    let (rp, rr, np, nr) = (free_port(), free_port(), free_port(), free_port());
    let _redis_primary = redis(rp, None);
    let _redis_replica = redis(rr, Some(rp));
    let _node_primary = start_node(np);
    let _node_replica = start_replica(nr, &format!("127.0.0.1:{np}"));
    for (p, r) in [(rp, rr), (np, nr)] {
        Raw::connect(p).check(&["SET", "k", "v"], "+OK\r\n");
        wait_synced(p, r, 30);
        eventually(10, "the primary has the replica's ack", || {
            let mut c = Raw::connect(p);
            c.call(&["WAIT", "1", "100"]) == ":1\r\n"
        });
    }
    let (mut redis_r, mut node_r) = (Raw::connect(rr), Raw::connect(nr));
    let steps: &[&[&str]] = &[
        &["SET", "k", "w"],
        &["DEL", "k"],
        &["INCR", "n"],
        &["GET", "k"],
        &["MULTI"],
        &["SET", "k", "x"],
        &["GET", "k"],
        &["EXEC"],
        &["FLUSHALL"],
        &["WAIT", "1", "0"],
        &["REPLCONF", "nonsense", "x"],
        &["ROLE"],
    ];
    for step in steps {
        let (want, got) = (redis_r.call(step), node_r.call(step));
        if step[0] == "ROLE" {
            assert_eq!(shape(&got), shape(&want), "ROLE: {got:?} vs {want:?}");
            assert!(got.contains("$9\r\nconnected\r\n"), "{got}");
        } else {
            assert_eq!(got, want, "{step:?}");
        }
    }
    let (want, got) = (
        Raw::connect(rp).call(&["ROLE"]),
        Raw::connect(np).call(&["ROLE"]),
    );
    assert_eq!(
        shape(&got),
        shape(&want),
        "the primary's ROLE: {got:?} vs {want:?}"
    );
    for (redis_port, node_port, who) in [(rp, np, "primary"), (rr, nr, "replica")] {
        assert_eq!(
            names(node_port),
            names(redis_port),
            "INFO replication of the {who}"
        );
    }
    for name in ["sync_full", "sync_partial_ok", "sync_partial_err"] {
        // Both report them (redis-server 7.0 leaves a diskless sync of an
        // empty primary out of sync_full; ours counts every full sync).
        let _ = (field(np, "stats", name), field(rp, "stats", name));
    }
    for param in [
        "repl-backlog-size",
        "replica-read-only",
        "slave-read-only",
        "replica-priority",
    ] {
        let (want, got) = (
            Raw::connect(rp).call(&["CONFIG", "GET", param]),
            Raw::connect(np).call(&["CONFIG", "GET", param]),
        );
        assert_eq!(got, want, "CONFIG GET {param}");
    }
    let set = ["CONFIG", "SET", "repl-backlog-size", "2mb"];
    assert_eq!(Raw::connect(np).call(&set), Raw::connect(rp).call(&set));
    assert_eq!(field(np, "replication", "repl_backlog_size"), "2097152");
}
