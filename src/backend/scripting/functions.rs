//! FUNCTION LOAD|LIST|DELETE|FLUSH|DUMP|RESTORE|STATS|KILL|HELP, FCALL and
//! FCALL_RO, as Redis 7.0 answers them.

use super::eval::{execute, sub_arity};
use super::library::{name_of, undump, Libraries};
use crate::backend::commands::{CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::resp::{encode, eq_ignore_case};
use mlua::MultiValue;

const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

/// Runs `f` on the node's libraries, creating them at first use.
fn with_libs<R>(
    ctx: &Ctx,
    f: impl FnOnce(&mut Libraries) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    let mut guard = ctx.node.scripting.functions();
    if guard.is_none() {
        *guard = Some(Libraries::new(&ctx.node.scripting.busy)?);
    }
    f(guard.as_mut().expect("created above"))
}

/// FCALL / FCALL_RO function numkeys [key ...] [arg ...]
fn fcall_generic(ctx: &mut Ctx, args: &[&[u8]], ro: bool) -> CmdResult {
    let mut guard = ctx.node.scripting.functions();
    let name = String::from_utf8_lossy(args[1]).into_owned();
    let Some(f) = guard.as_ref().and_then(|l| l.find(&name)) else {
        return Err(CmdError::err("Function not found"));
    };
    let n = crate::resp::parse_i64(args[2])
        .ok_or_else(|| CmdError::err("Bad number of keys provided"))?;
    if n > (args.len() - 3) as i64 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let no_writes = f.flags.iter().any(|f| f == "no-writes");
    if ro && !no_writes {
        return Err(CmdError::err(
            "Can not execute a script with write flag using *_ro command.",
        ));
    }
    let callback = f.callback.clone();
    let libs = guard.as_mut().expect("found above");
    ctx.node.scripting.note_counts(libs);
    let engine = &libs.engine;
    let (keys, argv) = args[3..].split_at(n as usize);
    let lua_err = |e: mlua::Error| CmdError::err(format!("Lua: {e}"));
    let mut fargs = MultiValue::new();
    fargs.push_back(mlua::Value::Table(engine.strings(keys).map_err(lua_err)?));
    fargs.push_back(mlua::Value::Table(engine.strings(argv).map_err(lua_err)?));
    execute(ctx, engine, &callback, fargs, &name, no_writes)
}

/// FCALL function numkeys [key ...] [arg ...]
pub(crate) fn fcall(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    fcall_generic(ctx, args, false)
}

/// FCALL_RO function numkeys [key ...] [arg ...]
pub(crate) fn fcall_ro(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    fcall_generic(ctx, args, true)
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
fn list(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (mut pattern, mut code) = (None, false);
    let mut i = 2;
    while i < args.len() {
        if eq_ignore_case(args[i], b"withcode") && !code {
            code = true;
        } else if eq_ignore_case(args[i], b"libraryname") && pattern.is_none() {
            i += 1;
            pattern = Some(
                *args
                    .get(i)
                    .ok_or_else(|| CmdError::err("library name argument was not given"))?,
            );
        } else {
            return Err(CmdError::err(format!(
                "Unknown argument {}",
                String::from_utf8_lossy(args[i])
            )));
        }
        i += 1;
    }
    let proto = ctx.client.proto;
    let guard = ctx.node.scripting.functions();
    let libs: Vec<_> = guard
        .iter()
        .flat_map(|l| l.libs.iter())
        .filter(|(name, _)| pattern.is_none_or(|p| crate::glob::matches(p, name.as_bytes())))
        .collect();
    encode::array_len(ctx.out, libs.len());
    for (name, lib) in libs {
        encode::map_len(ctx.out, 3 + code as usize, proto);
        encode::bulk(ctx.out, b"library_name");
        encode::bulk(ctx.out, name.as_bytes());
        encode::bulk(ctx.out, b"engine");
        encode::bulk(ctx.out, b"LUA");
        encode::bulk(ctx.out, b"functions");
        encode::array_len(ctx.out, lib.functions.len());
        for f in lib.functions.values() {
            encode::map_len(ctx.out, 3, proto);
            encode::bulk(ctx.out, b"name");
            encode::bulk(ctx.out, f.name.as_bytes());
            encode::bulk(ctx.out, b"description");
            match &f.description {
                Some(d) => encode::bulk(ctx.out, d.as_bytes()),
                None => encode::null(ctx.out, proto),
            }
            encode::bulk(ctx.out, b"flags");
            encode::set_len(ctx.out, f.flags.len(), proto);
            for flag in &f.flags {
                encode::simple(ctx.out, flag);
            }
        }
        if code {
            encode::bulk(ctx.out, b"library_code");
            encode::bulk(ctx.out, &lib.code);
        }
    }
    Ok(())
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]
fn restore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let policy = match args.get(3) {
        None => "append",
        Some(p) if eq_ignore_case(p, b"append") => "append",
        Some(p) if eq_ignore_case(p, b"replace") => "replace",
        Some(p) if eq_ignore_case(p, b"flush") => "flush",
        Some(_) => {
            return Err(CmdError::err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
    };
    let codes = undump(args[2])?;
    let names = codes
        .iter()
        .map(|c| name_of(c))
        .collect::<Result<Vec<_>, _>>()?;
    if policy == "flush" {
        *ctx.node.scripting.functions() = None;
    }
    with_libs(ctx, |libs| {
        if policy == "append" {
            if let Some(n) = names.iter().find(|n| libs.libs.contains_key(*n)) {
                return Err(CmdError::err(format!("Library {n} already exists")));
            }
        }
        for code in &codes {
            libs.load(code, true)?;
        }
        Ok(())
    })?;
    ctx.ok();
    Ok(())
}

/// FUNCTION <subcommand> ...
pub(crate) fn function(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
    let arity = |ok: bool| sub_arity("function", &sub, ok);
    match sub.as_str() {
        "help" => {
            arity(args.len() == 2)?;
            ctx.help(FUNCTION_HELP);
        }
        "load" => {
            arity(args.len() >= 3)?;
            let replace = args.len() > 3;
            if replace && (args.len() > 4 || !eq_ignore_case(args[2], b"replace")) {
                return Err(CmdError::err(format!(
                    "Unknown option given: {}",
                    String::from_utf8_lossy(args[2])
                )));
            }
            let code = args[args.len() - 1];
            let name = with_libs(ctx, |libs| libs.load(code, replace))?;
            encode::bulk(ctx.out, name.as_bytes());
        }
        "list" => list(ctx, args)?,
        "delete" => {
            arity(args.len() == 3)?;
            let name = String::from_utf8_lossy(args[2]).into_owned();
            let mut guard = ctx.node.scripting.functions();
            if guard.as_mut().and_then(|l| l.libs.remove(&name)).is_none() {
                return Err(CmdError::err("Library not found"));
            }
            drop(guard);
            ctx.ok();
        }
        "flush" => {
            if args.len() > 3 {
                return Err(CmdError::err(format!(
                    "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
                    String::from_utf8_lossy(args[1])
                )));
            }
            if args.len() == 3
                && !eq_ignore_case(args[2], b"sync")
                && !eq_ignore_case(args[2], b"async")
            {
                return Err(CmdError::err(
                    "FUNCTION FLUSH only supports SYNC|ASYNC option",
                ));
            }
            *ctx.node.scripting.functions() = None;
            ctx.ok();
        }
        "dump" => {
            arity(args.len() == 2)?;
            let payload = with_libs(ctx, |libs| Ok(libs.dump()))?;
            encode::bulk(ctx.out, &payload);
        }
        "restore" => {
            arity(args.len() >= 3)?;
            if args.len() > 4 {
                return Err(CmdError::err(format!(
                    "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
                    String::from_utf8_lossy(args[1])
                )));
            }
            restore(ctx, args)?;
        }
        "stats" => {
            arity(args.len() == 2)?;
            let busy = &ctx.node.scripting.busy;
            // Redis refuses it while an EVAL runs, as any other command.
            if busy.is_eval() {
                return Err(CmdError::Other(super::busy::BUSY_EVAL.into()));
            }
            let (libs, fns) = ctx.node.scripting.function_counts();
            let proto = ctx.client.proto;
            encode::map_len(ctx.out, 2, proto);
            encode::bulk(ctx.out, b"running_script");
            match busy.function() {
                Some((call, ms)) => {
                    encode::map_len(ctx.out, 3, proto);
                    encode::bulk(ctx.out, b"name");
                    encode::bulk(ctx.out, call.get(1).map_or(&b""[..], |n| n));
                    encode::bulk(ctx.out, b"command");
                    encode::array_len(ctx.out, call.len());
                    for a in &call {
                        encode::bulk(ctx.out, a);
                    }
                    encode::bulk(ctx.out, b"duration_ms");
                    encode::integer(ctx.out, ms as i64);
                }
                None => encode::null(ctx.out, proto),
            }
            encode::bulk(ctx.out, b"engines");
            encode::map_len(ctx.out, 1, proto);
            encode::bulk(ctx.out, b"LUA");
            encode::map_len(ctx.out, 2, proto);
            encode::bulk(ctx.out, b"libraries_count");
            encode::integer(ctx.out, libs as i64);
            encode::bulk(ctx.out, b"functions_count");
            encode::integer(ctx.out, fns as i64);
        }
        "kill" => {
            arity(args.len() == 2)?;
            ctx.node.scripting.busy.kill(false)?;
            ctx.ok();
        }
        _ => {
            return Err(CmdError::UnknownSubcommand(
                String::from_utf8_lossy(args[1]).into_owned(),
                "FUNCTION",
            ))
        }
    }
    Ok(())
}
