//! Consumer-group commands: XGROUP (CREATE, SETID, DESTROY,
//! CREATECONSUMER, DELCONSUMER, HELP), XACK, XPENDING (summary and
//! extended), with Redis 7.0's argument order, errors and reply shapes
//! (XCLAIM and XAUTOCLAIM are in `streams_claim.rs`).

use super::streams::{bulk_id, parse_bound, parse_id, parse_strict_id};
use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::stream::{Group, Stream, StreamId};
use crate::resp::{encode, eq_ignore_case};

pub(crate) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `NOGROUP No such key '…' or consumer group '…'`
pub(crate) fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::Other(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        lossy(key),
        lossy(group)
    ))
}

/// A subcommand's arity check: `ERR wrong number of arguments for 'cmd|sub'`.
pub(crate) fn sub_arity(args: &[&[u8]], cmd: &str, arity: i32) -> Result<String, CmdError> {
    let sub = String::from_utf8_lossy(args[1]).to_lowercase();
    if !super::arity_ok(arity, args.len()) {
        return Err(CmdError::WrongArity(format!("{cmd}|{sub}")));
    }
    Ok(sub)
}

pub(crate) fn sub_syntax(args: &[&[u8]], cmd: &str) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        lossy(args[1])
    ))
}

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

/// XGROUP subcommand ...
pub(crate) fn xgroup(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let arity = match String::from_utf8_lossy(args[1]).to_lowercase().as_str() {
        "create" | "setid" => -5,
        "destroy" => 4,
        "createconsumer" | "delconsumer" => 5,
        "help" => 2,
        _ => {
            return Err(CmdError::UnknownSubcommand(lossy(args[1]), "XGROUP"));
        }
    };
    let sub = sub_arity(args, "xgroup", arity)?;
    if sub == "help" {
        ctx.help(XGROUP_HELP);
        return Ok(());
    }
    let (mut mkstream, mut entries_read) = (false, None::<u64>);
    if sub == "create" || sub == "setid" {
        let mut i = 5;
        while i < args.len() {
            if sub == "create" && eq_ignore_case(args[i], b"mkstream") {
                mkstream = true;
                i += 1;
            } else if eq_ignore_case(args[i], b"entriesread") && i + 1 < args.len() {
                let n = parse_i64(args[i + 1])?;
                if n < -1 {
                    return Err(CmdError::err(
                        "value for ENTRIESREAD must be positive or -1",
                    ));
                }
                entries_read = (n >= 0).then_some(n as u64);
                i += 2;
            } else {
                return Err(sub_syntax(args, "XGROUP"));
            }
        }
    }
    let (key, gname) = (args[2], args[3]);
    let now = ctx.now;
    let exists = ctx.read::<Stream, _>(key, |s| s.groups.contains_key(gname))?;
    match exists {
        None if !(sub == "create" && mkstream) => {
            return Err(CmdError::err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."));
        }
        Some(false) if sub != "create" && sub != "destroy" => {
            return Err(CmdError::Other(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                lossy(gname),
                lossy(key)
            )));
        }
        _ => {}
    }
    match sub.as_str() {
        "create" if args.len() <= 8 => {
            let id = if args[4] == b"$" {
                None
            } else {
                Some(parse_strict_id(args[4], 0)?)
            };
            let made = ctx.write::<Stream, _>(key, true, |s, _| {
                let id = id.unwrap_or(s.last_id);
                if s.groups.contains_key(gname) {
                    return false;
                }
                s.groups.insert(gname.into(), Group::new(id, entries_read));
                true
            })?;
            if made != Some(true) {
                return Err(CmdError::Other(
                    "BUSYGROUP Consumer Group name already exists".into(),
                ));
            }
            ctx.ok();
        }
        "setid" if args.len() == 5 || args.len() == 7 => {
            let id = if args[4] == b"$" {
                None
            } else {
                Some(parse_id(args[4], 0)?)
            };
            ctx.write::<Stream, _>(key, false, |s, _| {
                let id = id.unwrap_or(s.last_id);
                if let Some(g) = s.groups.get_mut(gname) {
                    g.last_id = id;
                    g.entries_read = entries_read;
                }
            })?;
            ctx.ok();
        }
        "destroy" => {
            let gone =
                ctx.write::<Stream, _>(key, false, |s, _| s.groups.remove(gname).is_some())?;
            let gone = gone.unwrap_or(false);
            if gone {
                ctx.node.store.ready.signal(key);
            }
            encode::integer(ctx.out, gone as i64);
        }
        "createconsumer" => {
            let made = ctx.write::<Stream, _>(key, false, |s, _| {
                s.groups
                    .get_mut(gname)
                    .is_some_and(|g| g.consumer(args[4], now).1)
            })?;
            encode::integer(ctx.out, made.unwrap_or(false) as i64);
        }
        "delconsumer" => {
            let n = ctx.write::<Stream, _>(key, false, |s, _| {
                s.groups
                    .get_mut(gname)
                    .and_then(|g| g.delete_consumer(args[4]))
            })?;
            encode::integer(ctx.out, n.flatten().unwrap_or(0) as i64);
        }
        _ => return Err(sub_syntax(args, "XGROUP")),
    }
    Ok(())
}

/// XACK key group id [id ...]
pub(crate) fn xack(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let present = ctx.read::<Stream, _>(args[1], |s| s.groups.contains_key(args[2]))?;
    // Redis 7.0 answers 0 for a missing key or group before it looks at the IDs.
    if present != Some(true) {
        encode::integer(ctx.out, 0);
        return Ok(());
    }
    let ids = args[3..]
        .iter()
        .map(|a| parse_strict_id(a, 0))
        .collect::<Result<Vec<_>, _>>()?;
    ctx.reply_write_count::<Stream>(args[1], false, |s, _| {
        // The group may have gone since the check: then nothing is acked.
        s.groups
            .get_mut(args[2])
            .map_or(0, |g| ids.iter().filter(|id| g.ack(**id)).count())
    })
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub(crate) fn xpending(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = args.len();
    if n != 3 && !(6..=9).contains(&n) {
        return Err(CmdError::Syntax);
    }
    let (mut minidle, mut range) = (0i64, None);
    if n >= 6 {
        let mut at = 3;
        if eq_ignore_case(args[3], b"idle") {
            minidle = parse_i64(args[4])?;
            if n < 8 {
                return Err(CmdError::Syntax);
            }
            at = 5;
        }
        let count = parse_i64(args[at + 2])?.max(0) as usize;
        let (mut start, ex) = parse_bound(args[at], 0)?;
        if ex {
            start = start
                .incr()
                .ok_or_else(|| CmdError::err("invalid start ID for the interval"))?;
        }
        let (mut end, ex) = parse_bound(args[at + 1], u64::MAX)?;
        if ex {
            end = end
                .decr()
                .ok_or_else(|| CmdError::err("invalid end ID for the interval"))?;
        }
        range = Some((start, end, count, args.get(at + 3).copied()));
    }
    let (now, proto) = (ctx.now, ctx.client.proto);
    let out = &mut *ctx.out;
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let mut sh = store.lock(h, now);
    let g = sh
        .read_coll::<Stream>(h, args[1])?
        .and_then(|s| s.groups.get(args[2]))
        .ok_or_else(|| nogroup(args[1], args[2]))?;
    let Some((start, end, count, consumer)) = range else {
        encode::array_len(out, 4);
        encode::integer(out, g.pel.len() as i64);
        let (Some(first), Some(last)) = (g.pel.keys().next(), g.pel.keys().next_back()) else {
            encode::null(out, proto);
            encode::null(out, proto);
            encode::null_array(out, proto);
            return Ok(());
        };
        bulk_id(out, *first);
        bulk_id(out, *last);
        let owners: Vec<_> = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .collect();
        encode::array_len(out, owners.len());
        for (name, c) in owners {
            encode::array_len(out, 2);
            encode::bulk(out, name);
            encode::bulk(out, c.pel.len().to_string().as_bytes());
        }
        return Ok(());
    };
    let ids: Vec<StreamId> = match consumer {
        Some(c) => match g.consumers.get(c) {
            Some(c) => c.pel.range(start..).copied().collect(),
            None => Vec::new(),
        },
        None => g.pel.range(start..).map(|(id, _)| *id).collect(),
    };
    let rows: Vec<_> = ids
        .into_iter()
        .take_while(|id| *id <= end)
        .filter_map(|id| g.pel.get(&id).map(|p| (id, p)))
        .filter(|(_, p)| minidle == 0 || (now as i64 - p.delivery_time as i64) >= minidle)
        .take(count)
        .collect();
    encode::array_len(out, rows.len());
    for (id, p) in rows {
        encode::array_len(out, 4);
        bulk_id(out, id);
        encode::bulk(out, &p.consumer);
        encode::integer(out, (now as i64 - p.delivery_time as i64).max(0));
        encode::integer(out, p.delivery_count as i64);
    }
    Ok(())
}
