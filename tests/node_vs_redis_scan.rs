//! HSCAN, SSCAN and ZSCAN walks of large collections on a built-in node
//! and, when it is installed, on a redis-server with the same steps: the
//! guarantees SCAN makes (every element present for the whole walk comes
//! back at least once, MATCH keeps only matching names, cursor 0 ends the
//! walk) hold on both while elements are added, removed and rescored
//! between calls. The replies' order differs (each server walks its own
//! table), so the comparison is of what came back, not of bytes; small
//! encodings are byte-compared in `node_vs_redis`.

mod common;

use common::{free_port, have_tool, start_node, start_redis, Proc, Raw};
use std::collections::HashSet;

/// Members present for the whole walk.
const STAY: usize = 3000;

/// The cursor and the element names of one SCAN reply (`stride` 2 when
/// values or scores follow each name).
fn parse(reply: &str, stride: usize) -> (String, Vec<String>) {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    assert!(reply.starts_with("*2\r\n"), "not a SCAN reply: {reply:?}");
    let items: Vec<String> = lines[4..]
        .iter()
        .skip(1)
        .step_by(2)
        .map(|s| s.to_string())
        .collect();
    (
        lines[2].to_string(),
        items.into_iter().step_by(stride).collect(),
    )
}

/// The arguments one member `m` (the `i`-th) adds after the key.
type MemberArgs = fn(&str, usize) -> Vec<String>;

/// Fills `key` with `stay:<i>` and `gone:<i>` members of `kind`.
fn fill(c: &mut Raw, kind: &str, key: &str) {
    let (add, per): (&str, MemberArgs) = match kind {
        "hash" => ("HSET", |m, _| vec![m.into(), "v".into()]),
        "set" => ("SADD", |m, _| vec![m.into()]),
        _ => ("ZADD", |m, i| vec![i.to_string(), m.into()]),
    };
    for prefix in ["stay", "gone"] {
        for chunk in (0..STAY).collect::<Vec<_>>().chunks(500) {
            let mut args = vec![add.to_string(), key.to_string()];
            for &i in chunk {
                args.extend(per(&format!("{prefix}:{i}"), i));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            c.call(&args);
        }
    }
}

/// Changes `key` between two steps of a walk: adds fresh members, removes
/// fresh and `gone:` ones, rescores `stay:` ones of a sorted set.
fn churn(c: &mut Raw, kind: &str, key: &str, step: usize) {
    for j in 0..25 {
        let m = format!("new:{step}:{j}");
        match kind {
            "hash" => c.call(&["HSET", key, &m, "v"]),
            "set" => c.call(&["SADD", key, &m]),
            _ => c.call(&["ZADD", key, "7", &m]),
        };
    }
    let del = match kind {
        "hash" => "HDEL",
        "set" => "SREM",
        _ => "ZREM",
    };
    for j in 0..15 {
        c.call(&[del, key, &format!("new:{}:{j}", step.saturating_sub(1))]);
    }
    for j in 0..60 {
        c.call(&[del, key, &format!("gone:{}", step * 60 + j)]);
    }
    if kind == "zset" {
        let m = format!("stay:{}", (step * 37) % STAY);
        c.call(&["ZINCRBY", key, "100000", &m]);
    }
}

/// Walks `key` to cursor 0 with `extra` options, running `churn` between
/// steps when `busy`; the names returned and the number of steps.
fn walk(c: &mut Raw, kind: &str, key: &str, extra: &[&str], busy: bool) -> (Vec<String>, usize) {
    let (cmd, stride) = match kind {
        "hash" => ("HSCAN", 2),
        "set" => ("SSCAN", 1),
        _ => ("ZSCAN", 2),
    };
    let (mut cursor, mut seen, mut steps) = ("0".to_string(), Vec::new(), 0);
    loop {
        let mut args = vec![cmd, key, &cursor];
        args.extend_from_slice(extra);
        let (next, names) = parse(&c.call(&args), stride);
        seen.extend(names);
        steps += 1;
        assert!(steps < 10_000, "{cmd} on {key} does not end");
        if next == "0" {
            return (seen, steps);
        }
        if busy {
            churn(c, kind, key, steps);
        }
        cursor = next;
    }
}

fn servers() -> Vec<(&'static str, Proc)> {
    let mut s = vec![("built-in node", start_node(free_port()))];
    if have_tool("redis-server") {
        s.push(("redis-server", start_redis(free_port())));
    }
    s
}

#[test]
fn walks_return_every_member_present_throughout_while_others_come_and_go() {
    for (who, server) in servers() {
        let mut c = Raw::connect(server.port);
        for kind in ["hash", "set", "zset"] {
            let key = format!("{kind}:busy");
            fill(&mut c, kind, &key);
            let (seen, steps) = walk(&mut c, kind, &key, &["COUNT", "50"], true);
            let seen: HashSet<String> = seen.into_iter().collect();
            let missing: Vec<usize> = (0..STAY)
                .filter(|i| !seen.contains(&format!("stay:{i}")))
                .collect();
            assert!(missing.is_empty(), "{who} {kind}: missed {missing:?}");
            assert!(steps > 20, "{who} {kind}: the walk took only {steps} steps");
        }
    }
}

#[test]
fn quiet_walks_return_each_member_once_and_match_filters_names() {
    for (who, server) in servers() {
        let mut c = Raw::connect(server.port);
        for kind in ["hash", "set", "zset"] {
            let key = format!("{kind}:quiet");
            fill(&mut c, kind, &key);
            for count in ["1", "100", "100000"] {
                let (seen, _) = walk(&mut c, kind, &key, &["COUNT", count], false);
                let unique: HashSet<&String> = seen.iter().collect();
                assert_eq!(unique.len(), 2 * STAY, "{who} {kind} COUNT {count}");
            }
            let (seen, _) = walk(
                &mut c,
                kind,
                &key,
                &["MATCH", "stay:1*", "COUNT", "200"],
                false,
            );
            let got: HashSet<String> = seen.into_iter().collect();
            let want: HashSet<String> = (0..STAY)
                .map(|i| format!("stay:{i}"))
                .filter(|m| m.starts_with("stay:1"))
                .collect();
            assert_eq!(got, want, "{who} {kind} MATCH");
        }
    }
}

#[test]
fn a_cursor_beyond_the_collection_walks_it_from_the_top() {
    let n = start_node(free_port());
    let mut c = Raw::connect(n.port);
    fill(&mut c, "set", "s");
    for far in ["99999999", "18446744073709551615"] {
        let (next, names) = parse(&c.call(&["SSCAN", "s", far, "COUNT", "10"]), 1);
        assert_eq!((next.as_str(), names.len()), ("5990", 10), "cursor {far}");
    }
}
