//! Server commands: COMMAND, INFO, DBSIZE, FLUSHDB/FLUSHALL, CONFIG, TIME,
//! LASTSAVE. INFO reports the store's own memory accounting.

use super::connection::verbatim;
use super::{CmdResult, Command, Ctx, Run, COMMANDS, DENYOOM, FAST, READONLY, WRITE};
use crate::backend::error::CmdError;
use crate::backend::server::REDIS_VERSION;
use crate::backend::store::now_ms;
use crate::glob;
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;
use std::fmt::Write as _;
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

/// Redis's `bytesToHuman`.
pub fn human(n: u64) -> String {
    let f = n as f64;
    match n {
        n if n < 1024 => format!("{n}B"),
        n if n < 1 << 20 => format!("{:.2}K", f / 1024.0),
        n if n < 1 << 30 => format!("{:.2}M", f / (1u64 << 20) as f64),
        n if n < 1 << 40 => format!("{:.2}G", f / (1u64 << 30) as f64),
        _ => format!("{:.2}T", f / (1u64 << 40) as f64),
    }
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// The INFO text for the requested sections (empty = default set).
pub fn info_text(ctx: &Ctx, sections: &[&[u8]]) -> String {
    let node = ctx.node;
    let want = |name: &str| {
        sections.is_empty()
            || sections.iter().any(|s| {
                eq_ignore_case(s, name.as_bytes())
                    || eq_ignore_case(s, b"all")
                    || eq_ignore_case(s, b"default")
                    || eq_ignore_case(s, b"everything")
            })
    };
    let c = &node.store.counters;
    let evicted = c.evicted_keys.load(Relaxed);
    let mut parts: Vec<String> = Vec::new();
    if want("server") {
        let uptime = ctx.now.saturating_sub(node.started_ms) / 1000;
        parts.push(format!(
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n\
             redis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\n\
             run_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\n\
             uptime_in_days:{}\r\nhz:10\r\nexecutable:shardis\r\nconfig_file:\r\n",
            std::env::consts::OS,
            std::process::id(),
            node.run_id,
            node.port,
            ctx.now * 1000,
            uptime / 86400,
        ));
    }
    if want("clients") {
        parts.push(format!(
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:10000\r\nblocked_clients:0\r\n",
            node.stats.connected_clients.load(Relaxed)
        ));
    }
    if want("memory") {
        let used = node.store.used_memory() as u64;
        let max = node.maxmemory.load(Relaxed);
        let rss = rss_bytes();
        parts.push(format!(
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
             used_memory_rss_human:{}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\n\
             maxmemory_policy:allkeys-lru\r\nmem_fragmentation_ratio:{:.2}\r\nevicted_keys:{evicted}\r\n",
            human(used),
            human(rss),
            human(max),
            rss as f64 / used.max(1) as f64,
        ));
    }
    if want("stats") {
        parts.push(format!(
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nexpired_keys:{}\r\n\
             evicted_keys:{evicted}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n",
            node.stats.total_connections.load(Relaxed),
            node.stats.total_commands.load(Relaxed),
            c.expired_keys.load(Relaxed),
            c.keyspace_hits.load(Relaxed),
            c.keyspace_misses.load(Relaxed),
        ));
    }
    if want("replication") {
        parts.push("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n".into());
    }
    if want("keyspace") {
        let (keys, expires) = node.store.counts();
        let mut s = String::from("# Keyspace\r\n");
        if keys > 0 {
            let _ = write!(s, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
        }
        parts.push(s);
    }
    parts.join("\r\n")
}

/// INFO [section ...]
pub fn info(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let text = info_text(ctx, &args[1..]);
    verbatim(ctx, &text);
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
fn config_values(ctx: &Ctx) -> Vec<(&'static str, String)> {
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

    #[test]
    fn human_sizes_match_bytes_to_human() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1805984), "1.72M");
        assert_eq!(human(104_857_600), "100.00M");
    }
}
