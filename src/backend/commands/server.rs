//! Server commands: COMMAND, DBSIZE, FLUSHDB/FLUSHALL, TIME, LASTSAVE.
//! INFO has its own file, `info.rs`; CONFIG is in `config.rs`.

use super::{CmdResult, Command, Ctx, Run, BLOCKING, COMMANDS, DENYOOM, FAST, READONLY, WRITE};
use crate::backend::error::CmdError;
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;

/// DBSIZE (expired keys not yet reclaimed count, as in Redis).
pub(crate) fn dbsize(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    encode::integer(ctx.out, ctx.node.store.counts().0 as i64);
    Ok(())
}

/// FLUSHDB / FLUSHALL [ASYNC|SYNC]
pub(crate) fn flush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let asynchronous = match args.get(1) {
        None => false,
        Some(a) if args.len() == 2 && eq_ignore_case(a, b"async") => true,
        Some(a) if args.len() == 2 && eq_ignore_case(a, b"sync") => false,
        _ => return Err(CmdError::Syntax),
    };
    let old = ctx.node.store.flush();
    if asynchronous {
        // Freeing millions of values takes a while; not on the event loop.
        std::thread::spawn(move || drop(old));
    } else {
        drop(old);
    }
    ctx.ok();
    Ok(())
}

/// TIME
pub(crate) fn time(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    encode::array_len(ctx.out, 2);
    encode::bulk(ctx.out, t.as_secs().to_string().as_bytes());
    encode::bulk(ctx.out, t.subsec_micros().to_string().as_bytes());
    Ok(())
}

/// LASTSAVE: the node never saves; report its start time.
pub(crate) fn lastsave(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    encode::integer(ctx.out, (ctx.node.started_ms / 1000) as i64);
    Ok(())
}

fn flag_names(c: &Command) -> Vec<&'static str> {
    [
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (FAST, "fast"),
        (BLOCKING, "blocking"),
    ]
    .into_iter()
    .filter(|(f, _)| c.flags & f != 0)
    .map(|(_, n)| n)
    .collect()
}

/// One COMMAND INFO entry in Redis 7's ten-element shape.
fn command_info(out: &mut BytesMut, c: &Command, proto: u8) {
    encode::array_len(out, 10);
    encode::bulk(out, c.name.as_bytes());
    encode::integer(out, c.arity as i64);
    let flags = flag_names(c);
    encode::set_len(out, flags.len(), proto);
    flags.iter().for_each(|f| encode::simple(out, f));
    encode::integer(out, c.key_range().0 as i64);
    encode::integer(out, c.key_range().1 as i64);
    encode::integer(out, c.key_range().2 as i64);
    encode::set_len(out, 0, proto); // ACL categories
    encode::set_len(out, 0, proto); // tips
    encode::array_len(out, 0); // key specs
    encode::array_len(out, 0); // subcommands
}

fn command_docs(out: &mut BytesMut, c: &Command, proto: u8) {
    let group = match c.name {
        n if matches!(c.run, Run::Migrate) || ["dump", "restore"].contains(&n) => "generic",
        "get" | "set" | "setnx" | "setex" | "psetex" | "getset" | "getdel" | "getex" | "mget"
        | "mset" | "msetnx" | "append" | "strlen" | "getrange" | "substr" | "setrange" | "incr"
        | "decr" | "incrby" | "decrby" | "incrbyfloat" | "lcs" => "string",
        "setbit" | "getbit" | "bitcount" | "bitpos" | "bitop" | "bitfield" | "bitfield_ro" => {
            "bitmap"
        }
        "pfadd" | "pfcount" | "pfmerge" => "hyperloglog",
        "ping" | "echo" | "quit" | "hello" | "select" | "client" | "auth" | "reset" => "connection",
        "multi" | "exec" | "discard" | "watch" | "unwatch" => "transactions",
        "command" | "info" | "dbsize" | "flushdb" | "flushall" | "config" | "time" | "lastsave" => {
            "server"
        }
        n if n.starts_with('h') => "hash",
        n if n.starts_with('z') => "sorted-set",
        "lpush" | "rpush" | "lpushx" | "rpushx" | "linsert" | "lindex" | "llen" | "lpop"
        | "rpop" | "lrange" | "lrem" | "lset" | "ltrim" | "lpos" | "rpoplpush" | "lmove"
        | "lmpop" | "blpop" | "brpop" | "brpoplpush" | "blmove" | "blmpop" => "list",
        "bzpopmin" | "bzpopmax" | "bzmpop" => "sorted-set",
        n if n.starts_with('s')
            && !matches!(
                n,
                "set"
                    | "setnx"
                    | "setex"
                    | "setrange"
                    | "sort"
                    | "sort_ro"
                    | "scan"
                    | "select"
                    | "substr"
                    | "strlen"
            ) =>
        {
            "set"
        }
        _ => "generic",
    };
    encode::bulk(out, c.name.as_bytes());
    encode::map_len(out, 2, proto);
    encode::bulk(out, b"summary");
    encode::bulk(out, c.name.to_uppercase().as_bytes());
    encode::bulk(out, b"group");
    encode::bulk(out, group.as_bytes());
}

/// COMMAND [COUNT | INFO name... | DOCS [name...] | LIST]
pub(crate) fn command(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let proto = ctx.client.proto;
    let Some(sub) = args.get(1) else {
        encode::array_len(ctx.out, COMMANDS.len());
        COMMANDS
            .iter()
            .for_each(|c| command_info(ctx.out, c, proto));
        return Ok(());
    };
    let named = || args[2..].iter().map(|n| super::lookup(n));
    if eq_ignore_case(sub, b"count") && args.len() == 2 {
        encode::integer(ctx.out, COMMANDS.len() as i64);
    } else if eq_ignore_case(sub, b"list") {
        // FILTERBY is not supported; Redis calls anything else a syntax error.
        if args.len() != 2 {
            return Err(CmdError::Syntax);
        }
        encode::array_len(ctx.out, COMMANDS.len());
        COMMANDS
            .iter()
            .for_each(|c| encode::bulk(ctx.out, c.name.as_bytes()));
    } else if eq_ignore_case(sub, b"info") {
        let cmds: Vec<_> = if args.len() == 2 {
            COMMANDS.iter().map(Some).collect()
        } else {
            named().collect()
        };
        encode::array_len(ctx.out, cmds.len());
        for c in cmds {
            match c {
                Some(c) => command_info(ctx.out, c, proto),
                None => encode::null_array(ctx.out, proto),
            }
        }
    } else if eq_ignore_case(sub, b"docs") {
        let cmds: Vec<_> = if args.len() == 2 {
            COMMANDS.iter().collect()
        } else {
            named().flatten().collect()
        };
        encode::map_len(ctx.out, cmds.len(), proto);
        cmds.into_iter()
            .for_each(|c| command_docs(ctx.out, c, proto));
    } else if eq_ignore_case(sub, b"count") {
        return Err(CmdError::WrongArity("command|count".into()));
    } else {
        return Err(CmdError::UnknownSubcommand(
            String::from_utf8_lossy(sub).into_owned(),
            "COMMAND",
        ));
    }
    Ok(())
}
