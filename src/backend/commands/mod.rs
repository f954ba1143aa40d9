//! The dispatcher of the built-in node (its command table is `table.rs`).
//!
//! `server/` hands each decoded request to [`dispatch`], which looks the
//! name up case-insensitively without allocating, checks arity, makes room
//! under `maxmemory` for commands that may grow memory, runs the handler
//! and turns any [`CmdError`] into its `-ERR` line. One file per command
//! family; handlers write their reply straight into the output buffer.

mod bitfield;
mod bits;
pub(crate) mod blocking;
mod config;
mod connection;
mod counters;
mod elem_scan;
mod elements;
mod geo;
mod geohash;
mod geosearch;
mod hashes;
mod hll;
mod hll_repr;
mod info;
mod keys;
mod lcs;
mod lists;
pub(crate) mod migrate;
mod multi;
mod object;
mod partial_sort;
pub(crate) mod pubsub;
mod server;
mod set_options;
mod sets;
mod sort;
mod streams;
mod streams_claim;
mod streams_group;
mod streams_info;
mod streams_read;
mod strings;
mod table;
pub(crate) mod timeout;
mod touch;
pub(crate) mod util;
mod zrange;
mod zsets;
mod zstore;

use super::error::CmdError;
use super::keyspace::clock::now_ms;
use super::node::Node;
use super::replication;
use crate::catalogue::Id;
use crate::resp::{encode, eq_ignore_case};
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering::Relaxed;
pub(crate) use table::{
    lookup, not_served, Command, Run, BLOCKING, COMMANDS, DENYOOM, FAST, READONLY, WRITE,
};
pub(crate) use touch::touch_written;

/// Per-connection state.
#[derive(Debug)]
pub(crate) struct Client {
    /// CLIENT ID, unique per node.
    pub(crate) id: u64,
    /// 2 or 3, chosen with HELLO.
    pub(crate) proto: u8,
    /// CLIENT SETNAME / HELLO SETNAME.
    pub(crate) name: Option<Bytes>,
    /// CLIENT SETINFO lib-name / lib-ver.
    pub(crate) lib: (Option<Bytes>, Option<Bytes>),
    /// The peer's address, for CLIENT INFO.
    pub(crate) addr: String,
    /// Our address, for CLIENT INFO.
    pub(crate) laddr: String,
    /// When the connection was accepted (ms since the epoch).
    pub(crate) since: u64,
    /// Set by QUIT: flush the replies, then close.
    pub(crate) quit: bool,
    /// Last command name, for CLIENT INFO.
    pub(crate) last_cmd: &'static str,
    /// Set while queued commands run (EXEC), like Redis's
    /// CLIENT_DENY_BLOCKING: a blocking command that finds nothing then
    /// answers as if its timeout passed, instead of blocking.
    pub(crate) never_block: bool,
    /// The client a script's `redis.call` runs on (Redis's CLIENT_SCRIPT):
    /// SORT then orders a set it would leave unsorted, so the script's
    /// result is the same on every replica.
    pub(crate) script: bool,
    /// Subscriptions and the mailbox of messages, from the first
    /// (P|S)SUBSCRIBE until RESET or disconnect; boxed, as most
    /// connections never subscribe.
    pub(crate) pubsub: Option<Box<crate::backend::pubsub::Subscriber>>,
    /// MULTI's queue and WATCH's keys.
    pub(crate) tx: multi::TxState,
    /// The primary's stream on a replica: never refused as a write to a
    /// replica, never held back by maxmemory.
    pub(crate) is_master: bool,
    /// The stream offset after this client's last write (WAIT waits for it).
    pub(crate) woff: u64,
    /// Set by REPLCONF and PSYNC: the connection is a replica's.
    pub(crate) replica: Option<Box<replication::commands::Hello>>,
    /// Set by WAIT when it has to wait: the server loop awaits it.
    pub(crate) wait: Option<replication::state::WaitFor>,
    /// False until AUTH when the node has a password.
    pub(crate) authenticated: bool,
}

impl Client {
    /// A fresh RESP2 client.
    pub(crate) fn new(id: u64, addr: String, laddr: String, since: u64) -> Client {
        Client {
            id,
            proto: 2,
            name: None,
            lib: (None, None),
            addr,
            laddr,
            since,
            quit: false,
            last_cmd: "NULL",
            never_block: false,
            script: false,
            pubsub: None,
            tx: multi::TxState::default(),
            is_master: false,
            woff: 0,
            replica: None,
            wait: None,
            authenticated: true,
        }
    }

    /// Whether the connection is in subscribe mode: subscribed to at least
    /// one channel, pattern or shard channel.
    pub(crate) fn is_subscribed(&self) -> bool {
        self.pubsub.as_ref().is_some_and(|s| s.is_active())
    }

    /// Drops the client's transaction and watches; the server loop calls
    /// this when the connection closes.
    pub(crate) fn close(&mut self, node: &Node) {
        self.tx.clear(node);
    }
}

/// What a handler works with.
pub(crate) struct Ctx<'a> {
    /// The node's shared state.
    pub(crate) node: &'a Node,
    /// This connection.
    pub(crate) client: &'a mut Client,
    /// Replies go here.
    pub(crate) out: &'a mut BytesMut,
    /// The time the command runs at, ms since the epoch.
    pub(crate) now: u64,
}

impl Ctx<'_> {
    /// A bulk string, or null when absent.
    pub(crate) fn bulk_or_null(&mut self, v: Option<&[u8]>) {
        match v {
            Some(v) => encode::bulk(self.out, v),
            None => encode::null(self.out, self.client.proto),
        }
    }

    /// `+OK`
    pub(crate) fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// A HELP reply: one status line each.
    pub(crate) fn help(&mut self, lines: &[&str]) {
        encode::array_len(self.out, lines.len());
        lines.iter().for_each(|l| encode::simple(self.out, l));
    }
}

/// A handler's result: `Ok` means it wrote its reply.
pub(crate) type CmdResult = Result<(), CmdError>;

/// What the connection must do after [`dispatch`].
pub(crate) enum Next {
    /// The reply is written; carry on.
    Done,
    /// Run MIGRATE (async) with these arguments, then write its reply.
    Migrate,
    /// Wait for the reply of a blocked command before anything else.
    Block(crate::backend::blocking::Block),
    /// Run this script (EVAL, FCALL …) on a thread of its own, holding the
    /// gate exclusively ([`run_script`]), then write its reply.
    Script(&'static Command),
    /// A script runs on another connection, not yet past
    /// `busy-reply-threshold`: wait, then dispatch this request again.
    Busy,
}

/// Runs one request and appends its reply to `out`.
///
/// Inside MULTI a command is checked and queued instead (see `multi.rs`):
/// an unknown command or a wrong arity then flags the transaction, as in
/// Redis. Every command runs with the node's gate held shared, EXEC with
/// it held exclusively, so a transaction never interleaves with another
/// client's command.
pub(crate) fn dispatch(
    node: &Node,
    client: &mut Client,
    out: &mut BytesMut,
    args: &[&[u8]],
    now: u64,
) -> Next {
    node.stats.total_commands.fetch_add(1, Relaxed);
    let Some(cmd) = lookup(args[0]) else {
        client.tx.flag();
        match not_served(args[0]) {
            Some(name) => CmdError::err(format!(
                "'{name}' is not served by the built-in nodes; use redis-server nodes (config/redis-servers.toml)"
            ))
            .write(out),
            None => CmdError::unknown_command(args[0], &args[1..]).write(out),
        }
        return Next::Done;
    };
    client.last_cmd = cmd.name;
    if !arity_ok(cmd.arity, args.len()) {
        refuse(
            node,
            client,
            out,
            cmd,
            &CmdError::WrongArity(cmd.name.to_string()),
        );
        return Next::Done;
    }
    if !client.authenticated && !matches!(cmd.name, "auth" | "hello" | "quit" | "reset") {
        client.tx.flag();
        CmdError::Other("NOAUTH Authentication required.".into()).write(out);
        return Next::Done;
    }
    let busy = &node.scripting.busy;
    if busy.is_running() {
        // Redis's `allow-busy` AUTH and HELLO: a connection may log in
        // while a script runs (a proxy opening a connection to kill the
        // script logs in first).
        if is_kill(args) || matches!(cmd.name, "auth" | "hello") {
            return run(node, client, out, cmd, args, now);
        }
        // The primary's stream on a replica waits for the script however
        // long it runs: a refusal would lose a write.
        if client.is_master || !busy.is_past(node.busy_threshold_ms()) {
            return Next::Busy;
        }
        // Redis's `allow-busy` commands besides the kills.
        if is_function_stats(args) {
            return run(node, client, out, cmd, args, now);
        }
        refuse(
            node,
            client,
            out,
            cmd,
            &CmdError::Other(busy.refusal().into()),
        );
        return Next::Done;
    }
    if !client.is_master && node.repl.is_replica() && replication::effects::is_write(cmd, args) {
        let script = matches!(cmd.run, Run::Script(_)) || cmd.id == Id::Script;
        if !script && node.settings.flag("replica-read-only") {
            client.tx.flag();
            CmdError::ReadOnly.write(out);
            return Next::Done;
        }
    }
    if matches!(cmd.run, Run::Exec) {
        replication::begin_tx(node);
        multi::exec(node, client, out, now);
        replication::end_tx(node);
        return Next::Done;
    }
    // Before queueing, as Redis checks it: MULTI itself is refused there.
    if client.proto == 2 && client.is_subscribed() {
        if let Some(e) = pubsub::refusal(cmd, args) {
            e.write(out);
            return Next::Done;
        }
    }
    // While writes feed a stream one runs at a time, so the stream's order
    // is the order they changed the keyspace in; REPLICAOF changes roles
    // between two commands, never during one. A script that started since
    // the check above holds the gate: wait for it without holding this thread.
    let exclusive = matches!(cmd.id, Id::Replicaof | Id::Slaveof)
        || (cmd.flags & WRITE != 0
            && !matches!(cmd.run, Run::Script(_))
            && replication::is_feeding(node));
    let gate = if exclusive {
        node.try_exclusive()
            .or_else(|| (!busy.is_running()).then(|| node.exclusive()))
            .map(Gate::Exclusive)
    } else {
        node.try_shared()
            .or_else(|| (!busy.is_running()).then(|| node.shared()))
            .map(Gate::Shared)
    };
    let Some(gate) = gate else {
        return Next::Busy;
    };
    if client.tx.is_queueing() && !multi::runs_immediately(cmd) {
        multi::queue(node, client, out, cmd, args, now);
        return Next::Done;
    }
    // A replica ignores maxmemory for its primary's writes, as Redis's
    // `replica-ignore-maxmemory yes`.
    if cmd.flags & DENYOOM != 0 && !client.is_master && node.make_room(now).is_err() {
        CmdError::OutOfMemory.write(out);
        return Next::Done;
    }
    // A script is checked as it runs (`scripting`), by its flags and writes.
    if cmd.flags & WRITE != 0
        && !matches!(cmd.run, Run::Script(_))
        && !client.is_master
        && replication::lacks_replicas(node)
    {
        CmdError::NoReplicas.write(out);
        return Next::Done;
    }
    if matches!(cmd.run, Run::Migrate) {
        return Next::Migrate;
    }
    if matches!(cmd.run, Run::Script(_)) {
        return Next::Script(cmd);
    }
    let next = run(node, client, out, cmd, args, now);
    drop(gate);
    next
}

/// The node's gate as a command holds it.
enum Gate<'a> {
    #[allow(dead_code)]
    Shared(std::sync::RwLockReadGuard<'a, ()>),
    #[allow(dead_code)]
    Exclusive(std::sync::RwLockWriteGuard<'a, ()>),
}

/// SCRIPT KILL or FUNCTION KILL: answered while a script runs.
/// Answers `e` instead of running `cmd`: a refused EXEC discards the
/// transaction (in MULTI or not), anything else flags it as Redis does.
fn refuse(node: &Node, client: &mut Client, out: &mut BytesMut, cmd: &Command, e: &CmdError) {
    if matches!(cmd.run, Run::Exec) {
        client.tx.clear(node);
        multi::abort_exec(out, e);
    } else {
        client.tx.flag();
        e.write(out);
    }
}

fn is_kill(args: &[&[u8]]) -> bool {
    args.len() == 2
        && (eq_ignore_case(args[0], b"script") || eq_ignore_case(args[0], b"function"))
        && eq_ignore_case(args[1], b"kill")
}

fn is_function_stats(args: &[&[u8]]) -> bool {
    args.len() == 2 && eq_ignore_case(args[0], b"function") && eq_ignore_case(args[1], b"stats")
}

/// Runs a script command (checked already by [`dispatch`]) holding the
/// node's gate exclusively, marked as the node's running script so other
/// connections wait or get `-BUSY` instead of the gate. The server calls
/// this on a thread of its own.
pub(crate) fn run_script(
    node: &Node,
    client: &mut Client,
    out: &mut BytesMut,
    cmd: &'static Command,
    args: &[&[u8]],
) {
    let eval = cmd.name.starts_with("eval");
    let running = node.scripting.busy.begin(eval, args);
    let gate = node.exclusive();
    // Its writes reach replicas as one MULTI … EXEC.
    replication::begin_tx(node);
    run(node, client, out, cmd, args, now_ms());
    replication::end_tx(node);
    drop(gate);
    drop(running);
}

/// Runs a command (checked already) and tells WATCH about the keys a write
/// command names. The caller holds the node's gate. A blocking command that
/// finds nothing returns what to wait for (never while
/// `client.never_block`, as inside EXEC).
pub(crate) fn run(
    node: &Node,
    client: &mut Client,
    out: &mut BytesMut,
    cmd: &'static Command,
    args: &[&[u8]],
    now: u64,
) -> Next {
    client.last_cmd = cmd.name;
    let (pre, start) = (
        crate::backend::notify::before(node, cmd, args, now),
        out.len(),
    );
    let mut ctx = Ctx {
        node,
        client,
        out,
        now,
    };
    let result = match cmd.run {
        Run::Sync(f) | Run::Script(f) => f(&mut ctx, args).map(|()| Next::Done),
        Run::Block(f) => f(&mut ctx, args).map(|b| b.map_or(Next::Done, Next::Block)),
        Run::Migrate | Run::Exec => Err(CmdError::err(format!("'{}' cannot run here", cmd.name))),
    };
    let done = matches!(result, Ok(Next::Done));
    let next = result.unwrap_or_else(|e| {
        e.write(ctx.out);
        Next::Done
    });
    if let Some(pre) = pre {
        crate::backend::notify::after(node, cmd, args, &ctx.out[start..], pre, now);
    }
    if cmd.flags & WRITE != 0 {
        touch_written(&node.store, cmd, args, now);
        if done && !matches!(cmd.name, "setbit" | "bitfield") {
            node.stats.dirty.fetch_add(1, Relaxed);
        }
    }
    if replication::is_feeding(node) && !node.repl.is_replica() {
        replication::effects::after_command(node, cmd, args, now);
        client.woff = node.repl.feed().end();
    }
    next
}

/// Whether `n` arguments (name included) satisfy `arity`.
pub(crate) fn arity_ok(arity: i32, n: usize) -> bool {
    if arity >= 0 {
        n == arity as usize
    } else {
        n >= (-arity) as usize
    }
}

/// Parses an integer exactly as Redis's `string2ll` (see
/// [`crate::resp::parse_i64`]).
pub(crate) fn parse_i64(b: &[u8]) -> Result<i64, CmdError> {
    crate::resp::parse_i64(b).ok_or(CmdError::NotInteger)
}

/// Parses a float as Redis's `string2ld`: no blanks, no NaN.
pub(crate) fn parse_f64(b: &[u8]) -> Result<f64, CmdError> {
    let s = std::str::from_utf8(b).map_err(|_| CmdError::NotFloat)?;
    if s.is_empty() || s.len() > 5 * 1024 || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return Err(CmdError::NotFloat);
    }
    match s.parse::<f64>() {
        Ok(v) if !v.is_nan() => Ok(v),
        _ => Err(CmdError::NotFloat),
    }
}

#[cfg(test)]
mod tests;
