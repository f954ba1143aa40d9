//! `redis.call` and `redis.pcall`: a script's way to the node's commands.
//!
//! Each call is checked as Redis checks it (arguments, command, arity,
//! commands scripts may not call, writes from read-only scripts), run
//! through the dispatcher's table on the script's own client (no
//! blocking, the protocol `redis.setresp` chose), and its reply read back
//! as a Lua value.

use super::convert::{error_table, reply_to_lua};
use super::engine::RunState;
use crate::backend::commands::util::fmt_double;
use crate::backend::commands::{self, arity_ok, lookup, Client, DENYOOM, WRITE};
use crate::backend::node::Node;
use bytes::BytesMut;
use mlua::{Lua, MultiValue, Value};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// Commands a script may not call (Redis's `noscript` flag).
const NOSCRIPT: &[&str] = &[
    "auth",
    "bgrewriteaof",
    "bgsave",
    "blmove",
    "blpop",
    "brpop",
    "brpoplpush",
    "bzpopmax",
    "bzpopmin",
    "client",
    "debug",
    "discard",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "exec",
    "failover",
    "fcall",
    "fcall_ro",
    "function",
    "hello",
    "migrate",
    "monitor",
    "multi",
    "psubscribe",
    "psync",
    "punsubscribe",
    "quit",
    "replconf",
    "replicaof",
    "reset",
    "role",
    "save",
    "script",
    "shutdown",
    "slaveof",
    "ssubscribe",
    "subscribe",
    "sunsubscribe",
    "sync",
    "unsubscribe",
    "unwatch",
    "wait",
    "watch",
];

/// What one script run's calls share.
pub(crate) struct Caller<'a> {
    pub(crate) node: &'a Node,
    pub(crate) client: Client,
    pub(crate) now: u64,
    /// Under EVAL_RO, FCALL_RO or the `no-writes` flag.
    pub(crate) readonly: bool,
    /// Some call wrote (SCRIPT KILL then refuses).
    pub(crate) wrote: bool,
    pub(crate) state: &'a RunState,
}

impl<'a> Caller<'a> {
    pub(crate) fn new(node: &'a Node, now: u64, readonly: bool, state: &'a RunState) -> Self {
        let mut client = Client::new(0, String::new(), String::new(), now);
        client.never_block = true;
        client.script = true;
        Caller {
            node,
            client,
            now,
            readonly,
            wrote: false,
            state,
        }
    }

    /// `bridge.call(raise, cmd, args...)`: `(true, reply)`, or
    /// `(false, {err=…})` for an error (which `redis.call` raises).
    pub(crate) fn call(&mut self, lua: &Lua, mut args: MultiValue) -> mlua::Result<(bool, Value)> {
        args.pop_front();
        // The prelude packs the arguments into one table `{n = …, …}`.
        if let Some(Value::Table(t)) = args.pop_front() {
            let n: usize = t.raw_get::<Option<usize>>("n")?.unwrap_or(0);
            for i in 1..=n {
                args.push_back(t.raw_get::<Value>(i)?);
            }
        }
        let fail = |msg: &str| Ok((false, error_table(lua, msg.as_bytes())?));
        if args.is_empty() {
            return fail("Please specify at least one argument for this redis lib call");
        }
        let mut owned: Vec<Vec<u8>> = Vec::with_capacity(args.len());
        for a in args {
            match a {
                Value::String(s) => owned.push(s.as_bytes().to_vec()),
                // Redis formats numbers with %.17g, not Lua's %.14g.
                Value::Integer(i) => owned.push(i.to_string().into_bytes()),
                Value::Number(n) => owned.push(fmt_double(n).into_bytes()),
                _ => return fail("Lua redis lib command arguments must be strings or integers"),
            }
        }
        let argv: Vec<&[u8]> = owned.iter().map(|a| a.as_slice()).collect();
        let node = self.node;
        // Refused before it ran: counted as Redis's `scriptCall` counts it
        // (the error, and the command's `rejected_calls`), and marked so
        // the script's reply does not count it again (`stats.rs`).
        let refuse = |name: Option<&'static str>, msg: &str| {
            node.scripting.stats.rejected(name, msg.as_bytes());
            Ok((false, counted(error_table(lua, msg.as_bytes())?)?))
        };
        let Some(cmd) = lookup(argv[0]) else {
            if let Some(name) = commands::not_served(argv[0]) {
                return refuse(None, &format!(
                    "'{name}' is not served by the built-in nodes; use redis-server nodes (config/redis-servers.toml)"
                ));
            }
            // Redis Cluster's commands, which a script may not call.
            if crate::resp::eq_ignore_case(argv[0], b"cluster") {
                return refuse(None, "This Redis command is not allowed from script");
            }
            return refuse(None, "Unknown Redis command called from script");
        };
        let name = Some(cmd.name);
        if !arity_ok(cmd.arity, argv.len()) {
            return refuse(
                name,
                "Wrong number of args calling Redis command from script",
            );
        }
        if NOSCRIPT.contains(&cmd.name) {
            return refuse(name, "This Redis command is not allowed from script");
        }
        if matches!(cmd.name, "xread" | "xreadgroup") && is_blocking_read(&argv) {
            return refuse(
                name,
                &format!(
                    "{} command is not allowed with BLOCK option from scripts",
                    cmd.name
                ),
            );
        }
        if cmd.flags & WRITE != 0 {
            if self.node.repl.is_replica()
                && !self.client.is_master
                && self.node.settings.flag("replica-read-only")
            {
                return refuse(
                    name,
                    "-READONLY You can't write against a read only replica.",
                );
            }
            if self.readonly {
                return refuse(
                    name,
                    "-ERR Write commands are not allowed from read-only scripts.",
                );
            }
            if !self.client.is_master && crate::backend::replication::lacks_replicas(self.node) {
                return refuse(name, "-NOREPLICAS Not enough good replicas to write.");
            }
        }
        // Out of memory refuses a script's first write (once it wrote, it
        // may go on, as Redis lets it: its writes stay whole).
        if cmd.flags & DENYOOM != 0 && !self.wrote && self.node.make_room(self.now).is_err() {
            return refuse(
                name,
                "-OOM command not allowed when used memory > 'maxmemory'.",
            );
        }
        if cmd.flags & WRITE != 0 {
            self.wrote = true;
            self.state.busy.wrote();
        }
        self.client.proto = self.state.resp.load(Relaxed);
        self.node.stats.total_commands.fetch_add(1, Relaxed);
        let mut out = BytesMut::new();
        let started = Instant::now();
        let _ = commands::run(self.node, &mut self.client, &mut out, cmd, &argv, self.now);
        let usec = started.elapsed().as_micros() as u64;
        let is_err = out.first() == Some(&b'-');
        node.scripting
            .stats
            .ran(cmd.name, usec, is_err.then_some(&out[..]));
        let mut pos = 0;
        let v = reply_to_lua(lua, &out, &mut pos)?;
        if is_err {
            return Ok((false, counted(v)?));
        }
        Ok((true, v))
    }
}

/// Marks an error table as counted already (Redis's
/// `ignore_error_stats_update` field): a script reply of it is not
/// counted again.
fn counted(v: Value) -> mlua::Result<Value> {
    if let Value::Table(t) = &v {
        t.raw_set(IGNORE_STATS, true)?;
    }
    Ok(v)
}

/// The field Redis sets in the error tables of calls it counted.
pub(crate) const IGNORE_STATS: &str = "ignore_error_stats_update";

/// XREAD / XREADGROUP with BLOCK among its options.
fn is_blocking_read(argv: &[&[u8]]) -> bool {
    let args: Vec<bytes::Bytes> = argv
        .iter()
        .map(|a| bytes::Bytes::copy_from_slice(a))
        .collect();
    crate::catalogue::is_blocking_stream_read(&args)
}
