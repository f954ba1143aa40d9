//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS and XINFO
//! HELP, with Redis 7.0's fields in its order (maps in RESP3).

use super::streams::{bulk_id, write_entry};
use super::streams_group::{sub_arity, sub_syntax};
use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::stream::{Group, Stream, StreamId};
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;

const XINFO_HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

fn name(out: &mut BytesMut, s: &str) {
    encode::bulk(out, s.as_bytes());
}

fn int(out: &mut BytesMut, n: u64) {
    encode::integer(out, n as i64);
}

fn opt_int(out: &mut BytesMut, n: Option<i64>, proto: u8) {
    match n {
        Some(n) => encode::integer(out, n),
        None => encode::null(out, proto),
    }
}

/// XINFO subcommand ...
pub(crate) fn xinfo(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let arity = match String::from_utf8_lossy(args[1]).to_lowercase().as_str() {
        "stream" => -3,
        "groups" => 3,
        "consumers" => 4,
        "help" => 2,
        _ => {
            let sub = String::from_utf8_lossy(args[1]).into_owned();
            return Err(CmdError::UnknownSubcommand(sub, "XINFO"));
        }
    };
    let sub = sub_arity(args, "xinfo", arity)?;
    if sub == "help" {
        ctx.help(XINFO_HELP);
        return Ok(());
    }
    let mut full = None;
    if sub == "stream" && args.len() > 3 {
        if !eq_ignore_case(args[3], b"full") {
            return Err(sub_syntax(args, "XINFO"));
        }
        let mut count = 10;
        if args.len() > 4 {
            if args.len() != 6 || !eq_ignore_case(args[4], b"count") {
                return Err(sub_syntax(args, "XINFO"));
            }
            count = parse_i64(args[5])?.max(0) as usize;
        }
        full = Some(if count == 0 { usize::MAX } else { count });
    }
    let (now, proto) = (ctx.now, ctx.client.proto);
    let out = &mut *ctx.out;
    let store = &ctx.node.store;
    let h = store.hash(args[2]);
    let mut sh = store.lock(h, now);
    let s = sh
        .read_coll::<Stream>(h, args[2])?
        .ok_or_else(|| CmdError::err("no such key"))?;
    match sub.as_str() {
        "consumers" => {
            let g = s.groups.get(args[3]).ok_or_else(|| {
                CmdError::Other(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    String::from_utf8_lossy(args[3]),
                    String::from_utf8_lossy(args[2])
                ))
            })?;
            encode::array_len(out, g.consumers.len());
            for (cname, c) in &g.consumers {
                encode::map_len(out, 3, proto);
                name(out, "name");
                encode::bulk(out, cname);
                name(out, "pending");
                int(out, c.pel.len() as u64);
                name(out, "idle");
                int(out, now.saturating_sub(c.seen_time));
            }
        }
        "groups" => {
            encode::array_len(out, s.groups.len());
            for (gname, g) in &s.groups {
                encode::map_len(out, 6, proto);
                name(out, "name");
                encode::bulk(out, gname);
                name(out, "consumers");
                int(out, g.consumers.len() as u64);
                name(out, "pending");
                int(out, g.pel.len() as u64);
                group_progress(out, s, g, proto);
            }
        }
        _ => stream(out, s, full, proto),
    }
    Ok(())
}

fn stream(out: &mut BytesMut, s: &Stream, full: Option<usize>, proto: u8) {
    encode::map_len(out, if full.is_some() { 9 } else { 10 }, proto);
    name(out, "length");
    int(out, s.len() as u64);
    name(out, "radix-tree-keys");
    int(out, s.node_count() as u64);
    name(out, "radix-tree-nodes");
    int(out, s.rax_nodes() as u64);
    name(out, "last-generated-id");
    bulk_id(out, s.last_id);
    name(out, "max-deleted-entry-id");
    bulk_id(out, s.max_deleted);
    name(out, "entries-added");
    int(out, s.entries_added);
    name(out, "recorded-first-entry-id");
    bulk_id(out, s.first_id);
    let Some(count) = full else {
        name(out, "groups");
        int(out, s.groups.len() as u64);
        for (field, last) in [("first-entry", false), ("last-entry", true)] {
            name(out, field);
            match s.edge(last) {
                Some((id, f)) => write_entry(out, id, &f),
                None => encode::null(out, proto),
            }
        }
        return;
    };
    name(out, "entries");
    let entries: Vec<_> = s
        .range(StreamId::MIN, StreamId::MAX, false)
        .take(count)
        .collect();
    encode::array_len(out, entries.len());
    entries
        .into_iter()
        .for_each(|(id, f)| write_entry(out, id, &f));
    name(out, "groups");
    encode::array_len(out, s.groups.len());
    for (gname, g) in &s.groups {
        full_group(out, s, gname, g, count, proto);
    }
}

/// A group's progress, as GROUPS and STREAM FULL give it:
/// `last-delivered-id`, `entries-read`, `lag`.
fn group_progress(out: &mut BytesMut, s: &Stream, g: &Group, proto: u8) {
    name(out, "last-delivered-id");
    bulk_id(out, g.last_id);
    name(out, "entries-read");
    opt_int(out, g.entries_read.map(|r| r as i64), proto);
    name(out, "lag");
    opt_int(out, s.lag(g), proto);
}

fn full_group(out: &mut BytesMut, s: &Stream, gname: &[u8], g: &Group, count: usize, proto: u8) {
    encode::map_len(out, 7, proto);
    name(out, "name");
    encode::bulk(out, gname);
    group_progress(out, s, g, proto);
    name(out, "pel-count");
    int(out, g.pel.len() as u64);
    name(out, "pending");
    let pel: Vec<_> = g.pel.iter().take(count).collect();
    encode::array_len(out, pel.len());
    for (id, p) in pel {
        encode::array_len(out, 4);
        bulk_id(out, *id);
        encode::bulk(out, &p.consumer);
        int(out, p.delivery_time);
        int(out, p.delivery_count);
    }
    name(out, "consumers");
    encode::array_len(out, g.consumers.len());
    for (cname, c) in &g.consumers {
        encode::map_len(out, 4, proto);
        name(out, "name");
        encode::bulk(out, cname);
        name(out, "seen-time");
        int(out, c.seen_time);
        name(out, "pel-count");
        int(out, c.pel.len() as u64);
        name(out, "pending");
        let ids: Vec<_> = c
            .pel
            .iter()
            .filter_map(|id| g.pel.get(id).map(|p| (id, p)))
            .take(count)
            .collect();
        encode::array_len(out, ids.len());
        for (id, p) in ids {
            encode::array_len(out, 3);
            bulk_id(out, *id);
            int(out, p.delivery_time);
            int(out, p.delivery_count);
        }
    }
}
