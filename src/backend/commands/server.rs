//! Server commands: COMMAND, DBSIZE, FLUSHDB/FLUSHALL, CONFIG, TIME,
//! LASTSAVE. INFO has its own file, `info.rs`.

use super::{CmdResult, Command, Ctx, Run, COMMANDS, DENYOOM, FAST, READONLY, WRITE};
use crate::backend::error::CmdError;
use crate::backend::store::now_ms;
use crate::glob;
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;
use std::sync::atomic::Ordering::Relaxed;

/// DBSIZE (expired keys not yet reclaimed count, as in Redis).
pub fn dbsize(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    encode::integer(ctx.out, ctx.node.store.counts().0 as i64);
    Ok(())
}

/// FLUSHDB / FLUSHALL [ASYNC|SYNC]
pub fn flush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
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
pub fn time(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    encode::array_len(ctx.out, 2);
    encode::bulk(ctx.out, t.as_secs().to_string().as_bytes());
    encode::bulk(ctx.out, t.subsec_micros().to_string().as_bytes());
    Ok(())
}

/// LASTSAVE: the node never saves; report its start time.
pub fn lastsave(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    encode::integer(ctx.out, (ctx.node.started_ms / 1000) as i64);
    Ok(())
}

fn flag_names(c: &Command) -> Vec<&'static str> {
    [
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (FAST, "fast"),
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
    encode::integer(out, c.keys.0 as i64);
    encode::integer(out, c.keys.1 as i64);
    encode::integer(out, c.keys.2 as i64);
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
        | "decr" | "incrby" | "decrby" | "incrbyfloat" => "string",
        "ping" | "echo" | "quit" | "hello" | "select" | "client" | "auth" | "reset" => "connection",
        "command" | "info" | "dbsize" | "flushdb" | "flushall" | "config" | "time" | "lastsave" => {
            "server"
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
pub fn command(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
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

/// Parses a Redis memory value: bytes with an optional k/kb/m/mb/g/gb unit.
pub fn parse_memory(b: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(b).ok()?.to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// What CONFIG GET reports; enough for redis-benchmark, redis-cli and
/// client libraries that probe settings.
pub(super) fn config_values(ctx: &Ctx) -> Vec<(&'static str, String)> {
    let node = ctx.node;
    vec![
        ("maxmemory", node.maxmemory.load(Relaxed).to_string()),
        ("maxmemory-policy", "allkeys-lru".into()),
        (
            "maxmemory-samples",
            crate::backend::evict::EVICTION_SAMPLES.to_string(),
        ),
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("databases", "1".into()),
        ("port", node.port.to_string()),
        ("bind", "127.0.0.1".into()),
        ("timeout", "0".into()),
        ("hz", "10".into()),
        ("maxclients", "10000".into()),
        ("proto-max-bulk-len", node.limits.max_bulk_len.to_string()),
        (
            "client-query-buffer-limit",
            node.limits.max_query_buffer.to_string(),
        ),
        ("cluster-enabled", "no".into()),
    ]
}

/// CONFIG GET pattern... | SET name value... | RESETSTAT
pub fn config(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let sub = &args[1];
    if eq_ignore_case(sub, b"get") {
        if args.len() < 3 {
            return Err(CmdError::WrongArity("config|get".into()));
        }
        let values = config_values(ctx);
        let hits: Vec<_> = values
            .iter()
            .filter(|(name, _)| {
                args[2..]
                    .iter()
                    .any(|p| glob::matches_nocase(p, name.as_bytes()))
            })
            .collect();
        encode::map_len(ctx.out, hits.len(), ctx.client.proto);
        for (name, value) in hits {
            encode::bulk(ctx.out, name.as_bytes());
            encode::bulk(ctx.out, value.as_bytes());
        }
    } else if eq_ignore_case(sub, b"set") {
        if args.len() < 4 || !args.len().is_multiple_of(2) {
            return Err(CmdError::WrongArity("config|set".into()));
        }
        for pair in args[2..].chunks(2) {
            let name = String::from_utf8_lossy(pair[0]).to_ascii_lowercase();
            match name.as_str() {
                "maxmemory" => {
                    let v = parse_memory(pair[1]).ok_or_else(|| {
                        CmdError::err("CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value")
                    })?;
                    ctx.node.maxmemory.store(v, Relaxed);
                }
                "maxmemory-policy" if eq_ignore_case(pair[1], b"allkeys-lru") => {}
                "save" | "appendonly" | "maxmemory-samples" | "hz" | "timeout" => {}
                _ => {
                    return Err(CmdError::err(format!(
                        "Unknown option or number of arguments for CONFIG SET - '{name}'"
                    )))
                }
            }
        }
        let max = ctx.node.maxmemory.load(Relaxed);
        // Like Redis, lowering the limit evicts at once.
        let _ = ctx.node.store.evict_to_fit(max, now_ms());
        ctx.ok();
    } else if eq_ignore_case(sub, b"resetstat") {
        if args.len() != 2 {
            return Err(CmdError::WrongArity("config|resetstat".into()));
        }
        let c = &ctx.node.store.counters;
        for a in [
            &c.expired_keys,
            &c.evicted_keys,
            &c.keyspace_hits,
            &c.keyspace_misses,
            &ctx.node.stats.total_commands,
        ] {
            a.store(0, Relaxed);
        }
        ctx.ok();
    } else if eq_ignore_case(sub, b"rewrite") {
        return Err(CmdError::err("The server is running without a config file"));
    } else {
        return Err(CmdError::UnknownSubcommand(
            String::from_utf8_lossy(sub).into_owned(),
            "CONFIG",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_values_parse_like_redis() {
        let cases: &[(&str, Option<u64>)] = &[
            ("0", Some(0)),
            ("100", Some(100)),
            ("1k", Some(1000)),
            ("1kb", Some(1024)),
            ("100mb", Some(104_857_600)),
            ("2GB", Some(2 << 30)),
            ("abc", None),
            ("-1", None),
            ("1tb", None),
        ];
        for &(s, want) in cases {
            assert_eq!(parse_memory(s.as_bytes()), want, "{s}");
        }
    }
}
