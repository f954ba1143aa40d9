//! CONFIG GET | SET | RESETSTAT | REWRITE | HELP on the node. The parameters, their
//! validation and their live effects are in `backend/config/`; this file
//! parses the subcommands and renders Redis's replies and error texts.

use super::{CmdResult, Ctx};
use crate::backend::config::SetError;
use crate::backend::error::CmdError;
use crate::resp::{encode, eq_ignore_case};
use std::sync::atomic::Ordering::Relaxed;

/// CONFIG GET pattern... | SET name value... | RESETSTAT | REWRITE | HELP
pub(crate) fn config(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let sub = args[1];
    if eq_ignore_case(sub, b"get") {
        if args.len() < 3 {
            return Err(CmdError::WrongArity("config|get".into()));
        }
        let mut hits: Vec<(String, String)> = Vec::new();
        for pat in &args[2..] {
            for (name, value) in ctx.node.settings.get(pat) {
                if !hits.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                    hits.push((name, value));
                }
            }
        }
        encode::map_len(ctx.out, hits.len(), ctx.client.proto);
        for (name, value) in hits {
            encode::bulk(ctx.out, name.as_bytes());
            encode::bulk(ctx.out, value.as_bytes());
        }
    } else if eq_ignore_case(sub, b"set") {
        if args.len() < 4 {
            return Err(CmdError::WrongArity("config|set".into()));
        }
        if !args.len().is_multiple_of(2) {
            return Err(CmdError::Syntax);
        }
        let pairs: Vec<(&[u8], &[u8])> = args[2..].chunks(2).map(|p| (p[0], p[1])).collect();
        ctx.node.settings.set(&pairs).map_err(|e| match e {
            SetError::Unknown(name) => CmdError::err(format!(
                "Unknown option or number of arguments for CONFIG SET - '{name}'"
            )),
            SetError::Failed(name, why) => set_failed(&name, why),
            SetError::FailedOwned(name, why) => set_failed(&name, &why),
        })?;
        ctx.node.sync_lfu();
        let notify = ctx.node.settings.notify_flags.load(Relaxed);
        ctx.node.store.hooks.notices.set_flags(notify);
        ctx.node.repl.refresh(&ctx.node.settings);
        // Like Redis, lowering the limit evicts at once (best effort: a
        // policy that cannot evict leaves writes refused with OOM).
        let _ = ctx.node.make_room(ctx.now);
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
        ctx.node.scripting.stats.reset();
        ctx.ok();
    } else if eq_ignore_case(sub, b"help") {
        if args.len() != 2 {
            return Err(CmdError::WrongArity("config|help".into()));
        }
        // Redis 7.0's text, line for line.
        let lines = [
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
            "HELP",
            "    Prints this help.",
        ];
        ctx.help(&lines);
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

fn set_failed(name: &str, why: &str) -> CmdError {
    CmdError::err(format!(
        "CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}
