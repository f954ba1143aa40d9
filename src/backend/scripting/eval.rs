//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as Redis 7.0 answers
//! them, over the node's script cache.

use super::bridge::{Caller, IGNORE_STATS};
use super::busy::Busy;
use super::convert::{lua_to_reply, write_error};
use super::engine::{Engine, Outcome};
use crate::backend::commands::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::resp::{encode, eq_ignore_case};
use crate::sha1;
use mlua::{Function, MultiValue, Value};
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The Lua state EVAL runs in and the scripts compiled in it, by SHA-1.
pub(crate) struct Scripts {
    pub(crate) engine: Engine,
    cache: HashMap<String, Script>,
}

struct Script {
    f: Function,
    /// The shebang's `no-writes`.
    no_writes: bool,
    /// Whether it has a shebang (`#!lua`): then EVAL_RO needs `no-writes`.
    shebang: bool,
}

impl Scripts {
    fn new(busy: &Arc<Busy>) -> Result<Scripts, CmdError> {
        Ok(Scripts {
            engine: Engine::new(busy.clone()).map_err(|e| CmdError::err(format!("Lua: {e}")))?,
            cache: HashMap::new(),
        })
    }

    /// Compiles `body` into the cache (unless there already) and returns
    /// its SHA-1.
    fn load(&mut self, body: &[u8], cached: &AtomicUsize) -> Result<String, CmdError> {
        let sha = self.compile(body)?;
        cached.store(self.cache.len(), Relaxed);
        Ok(sha)
    }

    fn compile(&mut self, body: &[u8]) -> Result<String, CmdError> {
        let sha = sha1::hex(body);
        if !self.cache.contains_key(&sha) {
            let (no_writes, skip) = shebang(body)?;
            let f = self
                .engine
                .compile(&body[skip..], "@user_script")
                .map_err(|m| {
                    CmdError::err(format!("Error compiling script (new function): {m}"))
                })?;
            let shebang = skip > 0;
            self.cache.insert(
                sha.clone(),
                Script {
                    f,
                    no_writes,
                    shebang,
                },
            );
        }
        Ok(sha)
    }
}

/// Reads an EVAL script's `#!lua flags=…` line: whether it says
/// `no-writes`, and how many bytes the line takes (the newline stays, so
/// line numbers match).
fn shebang(body: &[u8]) -> Result<(bool, usize), CmdError> {
    if !body.starts_with(b"#!") {
        return Ok((false, 0));
    }
    let Some(end) = memchr::memchr(b'\n', body) else {
        return Err(CmdError::err("Invalid script shebang"));
    };
    let line = String::from_utf8_lossy(&body[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(CmdError::err(format!(
            "Unexpected engine in script shebang: #!{engine}"
        )));
    }
    let mut no_writes = false;
    for p in parts {
        let Some(flags) = p.strip_prefix("flags=") else {
            return Err(CmdError::err(format!("Unknown lua shebang option: {p}")));
        };
        for f in flags.split(',').filter(|f| !f.is_empty()) {
            match f {
                "no-writes" => no_writes = true,
                "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                f => {
                    return Err(CmdError::err(format!(
                        "Unexpected flag in script shebang: {f}"
                    )))
                }
            }
        }
    }
    Ok((no_writes, end))
}

/// A script's keys and the arguments after them.
pub(crate) type KeysArgs<'a> = (&'a [&'a [u8]], &'a [&'a [u8]]);

/// The `numkeys` check shared by EVAL and FCALL: the keys and the rest.
pub(crate) fn split_keys<'a>(args: &'a [&'a [u8]]) -> Result<KeysArgs<'a>, CmdError> {
    let n = parse_i64(args[2])?;
    if n > (args.len() - 3) as i64 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    Ok(args[3..].split_at(n as usize))
}

/// Runs `f(fargs)` and writes its reply or error; `name` is what errors
/// call it (`script: <name>, on @user_script:1.`).
pub(crate) fn execute(
    ctx: &mut Ctx,
    engine: &Engine,
    f: &Function,
    fargs: MultiValue,
    name: &str,
    readonly: bool,
) -> CmdResult {
    let mut caller = Caller::new(ctx.node, ctx.now, readonly, &engine.state);
    // On its own thread the script runs until it returns or is killed;
    // in place (inside EXEC) it is stopped past the threshold.
    let limit = (!ctx.node.scripting.busy.is_running()).then(|| ctx.node.busy_threshold_ms());
    let outcome = engine.run(f, fargs, limit, |lua, args| caller.call(lua, args));
    let resp = engine.state.resp.load(Relaxed);
    let start = ctx.out.len();
    // An error a call counted already, raised by `redis.call` or returned
    // from `redis.pcall`: Redis replies it without counting it again.
    let reraised = match &outcome {
        Ok(Outcome::Value(Value::Table(t)) | Outcome::Error(Value::Table(t))) => {
            matches!(t.raw_get::<Value>(IGNORE_STATS), Ok(Value::Boolean(true)))
        }
        _ => false,
    };
    match outcome {
        Ok(Outcome::Value(v)) => lua_to_reply(ctx.out, &v, ctx.client.proto, resp, 0),
        Ok(Outcome::Error(Value::Table(t))) => {
            let text = |k: &str| match t.raw_get::<Value>(k) {
                Ok(Value::String(s)) => Some(s.as_bytes().to_vec()),
                Ok(Value::Integer(i)) => Some(i.to_string().into_bytes()),
                Ok(Value::Number(n)) => Some((n as i64).to_string().into_bytes()),
                _ => None,
            };
            let mut msg = text("err").unwrap_or_else(|| b"ERR unknown error".to_vec());
            if let (Some(source), Some(line)) = (text("source"), text("line")) {
                msg.extend_from_slice(format!(" script: {name}, on ").as_bytes());
                msg.extend_from_slice(&source);
                msg.push(b':');
                msg.extend_from_slice(&line);
                msg.push(b'.');
            }
            write_error(ctx.out, &msg);
        }
        Ok(Outcome::Error(v)) => {
            let what = match &v {
                Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                v => format!("{v:?}"),
            };
            write_error(
                ctx.out,
                format!("ERR Error running script {name}: {what}").as_bytes(),
            );
        }
        Err(e) => write_error(
            ctx.out,
            format!("ERR Error running script {name}: {e}").as_bytes(),
        ),
    }
    if reraised && ctx.out.get(start) == Some(&b'-') {
        ctx.node.scripting.stats.reraised(&ctx.out[start..]);
    }
    Ok(())
}

/// EVAL / EVALSHA and their read-only forms.
fn eval_generic(ctx: &mut Ctx, args: &[&[u8]], by_sha: bool, ro: bool) -> CmdResult {
    if by_sha && args[1].len() != 40 {
        return Err(CmdError::Other(
            "NOSCRIPT No matching script. Please use EVAL.".into(),
        ));
    }
    let (keys, argv) = split_keys(args)?;
    let mut guard = ctx.node.scripting.scripts();
    if guard.is_none() {
        *guard = Some(Scripts::new(&ctx.node.scripting.busy)?);
    }
    let scripts = guard.as_mut().expect("created above");
    let sha = if by_sha {
        let sha = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
        if sha.len() != 40 || !scripts.cache.contains_key(&sha) {
            return Err(CmdError::Other(
                "NOSCRIPT No matching script. Please use EVAL.".into(),
            ));
        }
        sha
    } else {
        scripts.load(args[1], &ctx.node.scripting.cached)?
    };
    let script = &scripts.cache[&sha];
    let engine = &scripts.engine;
    let lua_err = |e: mlua::Error| CmdError::err(format!("Lua: {e}"));
    engine
        .set_global("KEYS", engine.strings(keys).map_err(lua_err)?)
        .map_err(lua_err)?;
    engine
        .set_global("ARGV", engine.strings(argv).map_err(lua_err)?)
        .map_err(lua_err)?;
    if ro && script.shebang && !script.no_writes {
        return Err(CmdError::err(
            "Can not execute a script with write flag using *_ro command.",
        ));
    }
    // A script that declares its flags (a shebang) and may write is refused
    // before it runs when the node is out of memory, as Redis denies it
    // (one without a shebang is checked at its first write).
    // So is one while too few replicas acknowledge (`min-replicas-to-write`).
    if script.shebang && !script.no_writes && !ctx.client.is_master {
        if ctx.node.make_room(ctx.now).is_err() {
            return Err(CmdError::OutOfMemory);
        }
        if crate::backend::replication::lacks_replicas(ctx.node) {
            return Err(CmdError::NoReplicas);
        }
    }
    let f = script.f.clone();
    let readonly = ro || script.no_writes;
    execute(ctx, engine, &f, MultiValue::new(), &sha, readonly)
}

/// EVAL script numkeys [key ...] [arg ...]
pub(crate) fn eval(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, args, false, false)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
pub(crate) fn evalsha(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, args, true, false)
}

/// EVAL_RO script numkeys [key ...] [arg ...]
pub(crate) fn eval_ro(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, args, false, true)
}

/// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
pub(crate) fn evalsha_ro(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, args, true, true)
}

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

/// A subcommand's arity check: `wrong number of arguments for 'parent|sub'`.
pub(crate) fn sub_arity(parent: &str, sub: &str, ok: bool) -> Result<(), CmdError> {
    if ok {
        Ok(())
    } else {
        Err(CmdError::WrongArity(format!("{parent}|{sub}")))
    }
}

/// SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP
pub(crate) fn script(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let sub = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
    let arity = |ok: bool| sub_arity("script", &sub, ok);
    match sub.as_str() {
        "help" => {
            arity(args.len() == 2)?;
            ctx.help(SCRIPT_HELP);
        }
        "load" => {
            arity(args.len() == 3)?;
            let mut guard = ctx.node.scripting.scripts();
            if guard.is_none() {
                *guard = Some(Scripts::new(&ctx.node.scripting.busy)?);
            }
            let sha = guard
                .as_mut()
                .expect("created above")
                .load(args[2], &ctx.node.scripting.cached)?;
            encode::bulk(ctx.out, sha.as_bytes());
        }
        "exists" => {
            arity(args.len() >= 3)?;
            let guard = ctx.node.scripting.scripts();
            encode::array_len(ctx.out, args.len() - 2);
            for a in &args[2..] {
                let sha = String::from_utf8_lossy(a).to_ascii_lowercase();
                let known = guard.as_ref().is_some_and(|s| s.cache.contains_key(&sha));
                encode::integer(ctx.out, known as i64);
            }
        }
        "flush" => {
            let mode_ok = |a: &[u8]| eq_ignore_case(a, b"sync") || eq_ignore_case(a, b"async");
            if args.len() > 3 || (args.len() == 3 && !mode_ok(args[2])) {
                return Err(CmdError::err("SCRIPT FLUSH only support SYNC|ASYNC option"));
            }
            *ctx.node.scripting.scripts() = None;
            ctx.node.scripting.cached.store(0, Relaxed);
            ctx.ok();
        }
        "kill" => {
            arity(args.len() == 2)?;
            ctx.node.scripting.busy.kill(true)?;
            ctx.ok();
        }
        _ => {
            return Err(CmdError::UnknownSubcommand(
                String::from_utf8_lossy(args[1]).into_owned(),
                "SCRIPT",
            ))
        }
    }
    Ok(())
}
