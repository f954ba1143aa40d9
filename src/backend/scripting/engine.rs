//! One Lua 5.1 state as Redis 7.0 prepares it for scripts: the libraries
//! it loads, the `redis` table, the error handler that records where an
//! error was raised, and globals that are read-only (`prelude.lua`).
//!
//! [`Engine::run`] runs one compiled script with its `KEYS` and `ARGV`
//! and a caller-supplied `redis.call`; the node serializes runs (the
//! caller holds the node's gate exclusively).

use super::busy::{Busy, KILLED};
use super::libs;
use crate::backend::node::REDIS_VERSION;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What a script's Rust callbacks share with the caller.
#[derive(Default)]
pub(crate) struct RunState {
    /// The protocol `redis.call` replies come back in (`redis.setresp`).
    pub(crate) resp: AtomicU8,
    /// Set by the hook when it stops the script: the next check raises this
    /// (so `pcall` cannot catch its way out).
    pub(crate) kill: Mutex<Option<String>>,
    /// Set while a script runs.
    pub(crate) running: AtomicBool,
    /// When the running code started, if it runs against a clock.
    pub(crate) started: Mutex<Option<Instant>>,
    /// That clock's limit in ms, and what stopping it says.
    limit: Mutex<Option<(u64, &'static str)>>,
    /// The node's running script, which SCRIPT KILL and FUNCTION KILL mark.
    pub(crate) busy: Arc<Busy>,
}

impl RunState {
    /// Starts the clock for code that may run `limit` ms before the hook
    /// stops it with `msg`.
    fn start(&self, limit: Option<(u64, &'static str)>) {
        *self.kill.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self.started.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        *self.limit.lock().unwrap_or_else(|e| e.into_inner()) = limit;
        self.running.store(true, Relaxed);
    }

    fn stop(&self) {
        self.running.store(false, Relaxed);
        *self.started.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// What the hook raises now, if anything: a kill asked for by SCRIPT
    /// KILL / FUNCTION KILL, or the clock past its limit.
    fn interruption(&self) -> Option<String> {
        if !self.running.load(Relaxed) {
            return None;
        }
        if self.busy.is_killed() {
            return Some(KILLED.to_string());
        }
        let limit = *self.limit.lock().unwrap_or_else(|e| e.into_inner());
        let started = *self.started.lock().unwrap_or_else(|e| e.into_inner());
        match (limit, started) {
            (Some((ms, msg)), Some(t)) if t.elapsed().as_millis() as u64 > ms => {
                Some(msg.replace("{ms}", &ms.to_string()))
            }
            _ => None,
        }
    }
}

/// What stops a script that runs where no other client can be served
/// (inside EXEC) past `busy-reply-threshold`: the node would otherwise hang.
/// Writes it made before stay, as after any script error.
pub(crate) const IN_PLACE_LIMIT: &str =
    "ERR Script killed: it ran longer than {ms} ms (busy-reply-threshold) where no other client could be served; writes it made before stay";

/// Redis's limit on a library's load-time code.
const LOAD_TIMEOUT_MS: u64 = 500;

/// How often (in Lua VM instructions) a running script's clock is read.
const CLOCK_EVERY_INSTRUCTIONS: u32 = 10_000;

/// How a script ended.
pub(crate) enum Outcome {
    /// Its return value.
    Value(Value),
    /// The error table the handler built (`err`, `source`, `line`), or
    /// another value if the handler itself failed.
    Error(Value),
}

/// A Lua state with the node's prelude loaded.
pub(crate) struct Engine {
    pub(crate) lua: Lua,
    bridge: Table,
    run: Function,
    /// The hidden table `_G` reads through (where KEYS and ARGV go).
    globals: Table,
    pub(crate) state: Arc<RunState>,
}

impl Engine {
    /// A fresh state: base, table, string, math and (for the prelude
    /// only) debug libraries, plus cjson, bit, struct and cmsgpack.
    pub(crate) fn new(busy: Arc<Busy>) -> mlua::Result<Engine> {
        // Safety: the debug library is loaded for the prelude, which
        // removes it from the globals before any script runs.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        libs::install(&lua)?;
        let state = Arc::new(RunState {
            busy,
            ..Default::default()
        });
        state.resp.store(2, Relaxed);
        let bridge = lua.create_table()?;
        bridge.set(
            "sha1hex",
            lua.create_function(|lua, s: mlua::LuaString| {
                lua.create_string(crate::sha1::hex(&s.as_bytes()))
            })?,
        )?;
        bridge.set(
            "log",
            lua.create_function(|_, (level, msg): (i64, mlua::LuaString)| {
                let msg = String::from_utf8_lossy(&msg.as_bytes()).into_owned();
                match level {
                    3 => tracing::warn!(target: "script", "{msg}"),
                    2 => tracing::info!(target: "script", "{msg}"),
                    _ => tracing::debug!(target: "script", "{msg}"),
                }
                Ok(())
            })?,
        )?;
        let s = state.clone();
        bridge.set(
            "setresp",
            lua.create_function(move |_, v: u8| {
                s.resp.store(v, Relaxed);
                Ok(())
            })?,
        )?;
        let s = state.clone();
        bridge.set(
            "killed",
            lua.create_function(move |_, ()| {
                Ok(s.kill.lock().unwrap_or_else(|e| e.into_inner()).clone())
            })?,
        )?;
        bridge.set(
            "known",
            lua.create_function(|_, name: mlua::LuaString| {
                Ok(crate::backend::commands::lookup(&name.as_bytes()).is_some())
            })?,
        )?;
        for (name, f) in super::raising::ALL {
            // Safety: each is a trampoline of `raising.rs`.
            bridge.set(format!("c_{name}"), unsafe { lua.create_c_function(*f)? })?;
        }
        lua.set_named_registry_value(super::raising::BRIDGE_KEY, bridge.clone())?;
        let s = state.clone();
        lua.set_global_hook(
            mlua::HookTriggers::new().every_nth_instruction(CLOCK_EVERY_INSTRUCTIONS),
            move |_, _| match s.interruption() {
                None => Ok(mlua::VmState::Continue),
                Some(msg) => {
                    *s.kill.lock().unwrap_or_else(|e| e.into_inner()) = Some(msg.clone());
                    Err(mlua::Error::RuntimeError(msg))
                }
            },
        )?;
        bridge.set(
            "errmsg",
            lua.create_function(|_, v: Value| {
                Ok(match v {
                    Value::Error(e) => innermost(&e),
                    v => format!("{v:?}"),
                })
            })?,
        )?;
        bridge.set("version", REDIS_VERSION)?;
        bridge.set("version_num", version_num(REDIS_VERSION))?;
        lua.load(include_str!("prelude.lua"))
            .set_name("=redis")
            .call::<()>(bridge.clone())?;
        let run = bridge.get("run")?;
        let globals = bridge.get("globals")?;
        Ok(Engine {
            lua,
            bridge,
            run,
            globals,
            state,
        })
    }

    /// Compiles a script body as Redis does (chunk name `@user_script`);
    /// the error is Lua's message.
    pub(crate) fn compile(&self, body: &[u8], name: &str) -> Result<Function, String> {
        self.lua
            .load(body)
            .set_name(name)
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                e => e.to_string(),
            })
    }

    /// Sets a global the scripts read (`KEYS`, `ARGV`, a library's
    /// registry), bypassing the read-only guard.
    pub(crate) fn set_global(&self, name: &str, v: impl mlua::IntoLua) -> mlua::Result<()> {
        self.globals.raw_set(name, v)
    }

    /// A table of byte strings.
    pub(crate) fn strings(&self, items: &[&[u8]]) -> mlua::Result<Table> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, a) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(a)?)?;
        }
        Ok(t)
    }

    /// Runs `f(args...)` with `call` as `redis.call`'s way to the node;
    /// stopped past `limit_ms` when it has one, and when killed.
    pub(crate) fn run(
        &self,
        f: &Function,
        args: MultiValue,
        limit_ms: Option<u64>,
        call: impl FnMut(&Lua, MultiValue) -> mlua::Result<(bool, Value)>,
    ) -> mlua::Result<Outcome> {
        self.state.resp.store(2, Relaxed);
        self.state.start(limit_ms.map(|ms| (ms, IN_PLACE_LIMIT)));
        let result = self.lua.scope(|scope| {
            self.bridge.set("call", scope.create_function_mut(call)?)?;
            let mut all = args;
            all.push_front(Value::Function(f.clone()));
            let mut r = self.run.call::<MultiValue>(all)?.into_iter();
            let ok = matches!(r.next(), Some(Value::Boolean(true)));
            let v = r.next().unwrap_or(Value::Nil);
            Ok(if ok {
                Outcome::Value(v)
            } else {
                Outcome::Error(v)
            })
        });
        self.state.stop();
        result
    }
}

/// A function a library registered (`redis.register_function`).
pub(crate) struct Registered {
    pub(crate) name: String,
    pub(crate) callback: Function,
    pub(crate) flags: Vec<String>,
    pub(crate) description: Option<String>,
}

impl Engine {
    /// Runs a library's code (after its `#!lua` line) with the load-time
    /// globals and returns the functions it registered, or Redis's error
    /// text.
    pub(crate) fn load_library(&self, code: &[u8]) -> Result<Vec<Registered>, String> {
        let f = self
            .compile(code, "@user_function")
            .map_err(|m| format!("Error compiling function: {m}"))?;
        let loading: Function = self.bridge.get("loading").map_err(|e| e.to_string())?;
        loading.call::<()>(true).map_err(|e| e.to_string())?;
        // A library's load-time code has Redis's load timeout.
        self.state
            .start(Some((LOAD_TIMEOUT_MS, "FUNCTION LOAD timeout")));
        let ran = self.run.call::<MultiValue>(f);
        self.state.stop();
        loading.call::<()>(false).map_err(|e| e.to_string())?;
        let mut r = ran.map_err(|e| e.to_string())?.into_iter();
        if !matches!(r.next(), Some(Value::Boolean(true))) {
            let msg = match r.next() {
                Some(Value::Table(t)) => match t.raw_get::<Value>("err") {
                    Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                    _ => "ERR unknown error".into(),
                },
                v => format!("ERR {v:?}"),
            };
            return Err(format!("Error registering functions: {msg}"));
        }
        let list: Table = self.bridge.get("registered").map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for t in list.sequence_values::<Table>() {
            let t = t.map_err(|e| e.to_string())?;
            let text = |k: &str| -> Option<String> {
                match t.raw_get::<Value>(k) {
                    Ok(Value::String(s)) => {
                        Some(String::from_utf8_lossy(&s.as_bytes()).into_owned())
                    }
                    _ => None,
                }
            };
            let flags: Vec<String> = match t.raw_get::<Value>("flags") {
                Ok(Value::Table(f)) => f
                    .sequence_values::<String>()
                    .filter_map(Result::ok)
                    .collect(),
                _ => Vec::new(),
            };
            out.push(Registered {
                name: text("name").unwrap_or_default(),
                callback: t.raw_get("callback").map_err(|e| e.to_string())?,
                flags,
                description: text("description"),
            });
        }
        Ok(out)
    }
}

/// The message of a Rust callback's error, without mlua's wrapping.
fn innermost(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => innermost(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        e => e.to_string(),
    }
}

/// `REDIS_VERSION_NUM`: 0x00MMmmpp.
fn version_num(v: &str) -> i64 {
    v.split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .chain(std::iter::repeat(0))
        .take(3)
        .fold(0, |n, p| (n << 8) | p)
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_numbers_pack_like_redis() {
        assert_eq!(super::version_num("7.0.15"), 458767);
        assert_eq!(super::version_num("7.0.0"), 0x070000);
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn a_script_in_place_past_its_limit_is_stopped() {
        let e = Engine::new(Arc::default()).unwrap();
        let f = e.compile(b"while true do end", "@user_script").unwrap();
        let out = e
            .run(&f, MultiValue::new(), Some(100), |_, _| {
                Ok((true, Value::Nil))
            })
            .unwrap();
        match out {
            Outcome::Error(Value::Table(t)) => {
                let err: String = t.get("err").unwrap();
                assert!(err.starts_with("ERR Script killed"), "{err}");
            }
            _ => panic!("the script was not stopped with an error"),
        }
    }
}
