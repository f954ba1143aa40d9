//! The command table and dispatcher of the built-in node.
//!
//! `server.rs` hands each decoded request to [`dispatch`], which looks the
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
pub(crate) mod pubsub;
mod server;
mod set_options;
mod sets;
mod sort;
mod strings;
mod timeout;
mod util;
mod zrange;
mod zsets;
mod zstore;

use super::error::CmdError;
use super::server::Node;
use crate::resp::encode;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::LazyLock;

/// Per-connection state.
#[derive(Debug)]
pub struct Client {
    /// CLIENT ID, unique per node.
    pub id: u64,
    /// 2 or 3, chosen with HELLO.
    pub proto: u8,
    /// CLIENT SETNAME / HELLO SETNAME.
    pub name: Option<Bytes>,
    /// CLIENT SETINFO lib-name / lib-ver.
    pub lib: (Option<Bytes>, Option<Bytes>),
    /// The peer's address, for CLIENT INFO.
    pub addr: String,
    /// Our address, for CLIENT INFO.
    pub laddr: String,
    /// When the connection was accepted (ms since the epoch).
    pub since: u64,
    /// Set by QUIT: flush the replies, then close.
    pub quit: bool,
    /// Last command name, for CLIENT INFO.
    pub last_cmd: &'static str,
    /// Set while queued commands run (EXEC), like Redis's
    /// CLIENT_DENY_BLOCKING: a blocking command that finds nothing then
    /// answers as if its timeout passed, instead of blocking.
    pub never_block: bool,
    /// Subscriptions and the mailbox of messages, from the first
    /// (P|S)SUBSCRIBE until RESET or disconnect; boxed, as most
    /// connections never subscribe.
    pub pubsub: Option<Box<crate::backend::pubsub::Subscriber>>,
    /// MULTI's queue and WATCH's keys.
    pub tx: multi::TxState,
}

impl Client {
    /// A fresh RESP2 client.
    pub fn new(id: u64, addr: String, laddr: String, since: u64) -> Client {
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
            pubsub: None,
            tx: multi::TxState::default(),
        }
    }

    /// Whether the connection is in subscribe mode: subscribed to at least
    /// one channel, pattern or shard channel.
    pub fn is_subscribed(&self) -> bool {
        self.pubsub.as_ref().is_some_and(|s| s.is_active())
    }

    /// Drops the client's transaction and watches; the server loop calls
    /// this when the connection closes.
    pub fn close(&mut self, node: &Node) {
        self.tx.clear(node);
    }
}

/// What a handler works with.
pub struct Ctx<'a> {
    /// The node's shared state.
    pub node: &'a Node,
    /// This connection.
    pub client: &'a mut Client,
    /// Replies go here.
    pub out: &'a mut BytesMut,
    /// The time the command runs at, ms since the epoch.
    pub now: u64,
}

impl Ctx<'_> {
    /// A bulk string, or null when absent.
    pub fn bulk_or_null(&mut self, v: Option<&[u8]>) {
        match v {
            Some(v) => encode::bulk(self.out, v),
            None => encode::null(self.out, self.client.proto),
        }
    }

    /// `+OK`
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }
}

/// A handler's result: `Ok` means it wrote its reply.
pub type CmdResult = Result<(), CmdError>;

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// In place, holding no lock across an `.await`.
    Sync(fn(&mut Ctx, &[&[u8]]) -> CmdResult),
    /// A blocking command: in place, or the connection waits (see
    /// `blocking.rs`).
    Block(fn(&mut Ctx, &[&[u8]]) -> blocking::BlockResult),
    /// MIGRATE: talks to another node, so the connection awaits it.
    Migrate,
    /// EXEC: runs the queued commands with the node's gate held exclusively.
    Exec,
}

/// May grow memory: make room under `maxmemory` first (Redis `denyoom`).
pub const DENYOOM: u8 = 1;
/// Changes the keyspace.
pub const WRITE: u8 = 2;
/// Only reads the keyspace.
pub const READONLY: u8 = 4;
/// O(1) or O(log n).
pub const FAST: u8 = 8;
/// May block the connection.
pub const BLOCKING: u8 = 16;

/// One row of the command table: the single source of truth for names,
/// arity (Redis convention: negative = at least), flags and key positions.
pub struct Command {
    /// Lower-case name.
    pub name: &'static str,
    /// Exact argument count including the name, or minimum if negative.
    pub arity: i32,
    /// `DENYOOM | WRITE | READONLY | FAST`
    pub flags: u8,
    /// First key position, last (negative counts from the end), step.
    pub keys: (i32, i32, i32),
    /// The handler.
    pub run: Run,
}

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $f:expr) => {
        Command {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: $keys,
            run: Run::Sync($f),
        }
    };
}

macro_rules! blocking {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $f:expr) => {
        Command {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: $keys,
            run: Run::Block($f),
        }
    };
}

const NOKEYS: (i32, i32, i32) = (0, 0, 0);
const KEY1: (i32, i32, i32) = (1, 1, 1);
const ALLKEYS: (i32, i32, i32) = (1, -1, 1);
const RW: u8 = WRITE | DENYOOM;

/// Every command the node knows.
pub static COMMANDS: &[Command] = &[
    // connection
    cmd!("ping", -1, FAST, NOKEYS, connection::ping),
    cmd!("echo", 2, FAST, NOKEYS, connection::echo),
    cmd!("quit", -1, FAST, NOKEYS, connection::quit),
    cmd!("hello", -1, FAST, NOKEYS, connection::hello),
    cmd!("select", 2, FAST, NOKEYS, connection::select),
    cmd!("client", -2, 0, NOKEYS, connection::client),
    cmd!("auth", -2, FAST, NOKEYS, connection::auth),
    cmd!("reset", 1, FAST, NOKEYS, connection::reset),
    // transactions
    cmd!("multi", 1, FAST, NOKEYS, multi::multi),
    Command {
        name: "exec",
        arity: 1,
        flags: 0,
        keys: NOKEYS,
        run: Run::Exec,
    },
    cmd!("discard", 1, FAST, NOKEYS, multi::discard),
    cmd!("watch", -2, FAST, ALLKEYS, multi::watch),
    cmd!("unwatch", 1, FAST, NOKEYS, multi::unwatch),
    // server
    cmd!("command", -1, 0, NOKEYS, server::command),
    cmd!("info", -1, 0, NOKEYS, info::info),
    cmd!("dbsize", 1, READONLY | FAST, NOKEYS, server::dbsize),
    cmd!("flushdb", -1, WRITE, NOKEYS, server::flush),
    cmd!("flushall", -1, WRITE, NOKEYS, server::flush),
    cmd!("config", -2, 0, NOKEYS, config::config),
    cmd!("time", 1, FAST, NOKEYS, server::time),
    cmd!("lastsave", 1, FAST, NOKEYS, server::lastsave),
    // Redis does not flag WAIT as blocking (COMMAND INFO), though it waits.
    blocking!("wait", 3, 0, NOKEYS, blocking::wait),
    // strings
    cmd!("get", 2, READONLY | FAST, KEY1, strings::get),
    cmd!("set", -3, RW, KEY1, strings::set),
    cmd!("setnx", 3, RW | FAST, KEY1, strings::setnx),
    cmd!("setex", 4, RW, KEY1, strings::setex),
    cmd!("psetex", 4, RW, KEY1, strings::psetex),
    cmd!("getset", 3, RW | FAST, KEY1, strings::getset),
    cmd!("getdel", 2, WRITE | FAST, KEY1, strings::getdel),
    cmd!("getex", -2, WRITE | FAST, KEY1, strings::getex),
    cmd!("mget", -2, READONLY | FAST, ALLKEYS, strings::mget),
    cmd!("mset", -3, RW, (1, -1, 2), strings::mset),
    cmd!("msetnx", -3, RW, (1, -1, 2), strings::msetnx),
    cmd!("append", 3, RW | FAST, KEY1, strings::append),
    cmd!("strlen", 2, READONLY | FAST, KEY1, strings::strlen),
    cmd!("getrange", 4, READONLY, KEY1, strings::getrange),
    cmd!("substr", 4, READONLY, KEY1, strings::getrange),
    cmd!("setrange", 4, RW, KEY1, strings::setrange),
    cmd!("incr", 2, RW | FAST, KEY1, counters::incr),
    cmd!("decr", 2, RW | FAST, KEY1, counters::decr),
    cmd!("incrby", 3, RW | FAST, KEY1, counters::incrby),
    cmd!("decrby", 3, RW | FAST, KEY1, counters::decrby),
    cmd!("incrbyfloat", 3, RW | FAST, KEY1, counters::incrbyfloat),
    cmd!("lcs", -3, READONLY, (1, 2, 1), lcs::lcs),
    // bitmaps
    cmd!("setbit", 4, RW, KEY1, bits::setbit),
    cmd!("getbit", 3, READONLY | FAST, KEY1, bits::getbit),
    cmd!("bitcount", -2, READONLY, KEY1, bits::bitcount),
    cmd!("bitpos", -3, READONLY, KEY1, bits::bitpos),
    cmd!("bitop", -4, RW, (2, -1, 1), bits::bitop),
    cmd!("bitfield", -2, RW, KEY1, bitfield::bitfield),
    cmd!(
        "bitfield_ro",
        -2,
        READONLY | FAST,
        KEY1,
        bitfield::bitfield_ro
    ),
    // hyperloglog
    cmd!("pfadd", -2, RW | FAST, KEY1, hll::pfadd),
    cmd!("pfcount", -2, READONLY, ALLKEYS, hll::pfcount),
    cmd!("pfmerge", -2, RW, ALLKEYS, hll::pfmerge),
    // hashes
    cmd!("hset", -4, RW | FAST, KEY1, hashes::hset),
    cmd!("hsetnx", 4, RW | FAST, KEY1, hashes::hsetnx),
    cmd!("hmset", -4, RW | FAST, KEY1, hashes::hmset),
    cmd!("hget", 3, READONLY | FAST, KEY1, hashes::hget),
    cmd!("hmget", -3, READONLY | FAST, KEY1, hashes::hmget),
    cmd!("hdel", -3, WRITE | FAST, KEY1, hashes::hdel),
    cmd!("hlen", 2, READONLY | FAST, KEY1, hashes::hlen),
    cmd!("hstrlen", 3, READONLY | FAST, KEY1, hashes::hstrlen),
    cmd!("hincrby", 4, RW | FAST, KEY1, hashes::hincrby),
    cmd!("hincrbyfloat", 4, RW | FAST, KEY1, hashes::hincrbyfloat),
    cmd!("hkeys", 2, READONLY, KEY1, hashes::hkeys),
    cmd!("hvals", 2, READONLY, KEY1, hashes::hvals),
    cmd!("hgetall", 2, READONLY, KEY1, hashes::hgetall),
    cmd!("hexists", 3, READONLY | FAST, KEY1, hashes::hexists),
    cmd!("hrandfield", -2, READONLY, KEY1, hashes::hrandfield),
    cmd!("hscan", -3, READONLY, KEY1, hashes::hscan),
    // lists
    cmd!("lpush", -3, RW | FAST, KEY1, lists::lpush),
    cmd!("rpush", -3, RW | FAST, KEY1, lists::rpush),
    cmd!("lpushx", -3, RW | FAST, KEY1, lists::lpushx),
    cmd!("rpushx", -3, RW | FAST, KEY1, lists::rpushx),
    cmd!("linsert", 5, RW, KEY1, lists::linsert),
    cmd!("lindex", 3, READONLY, KEY1, lists::lindex),
    cmd!("llen", 2, READONLY | FAST, KEY1, lists::llen),
    cmd!("lpop", -2, WRITE | FAST, KEY1, lists::lpop),
    cmd!("rpop", -2, WRITE | FAST, KEY1, lists::rpop),
    cmd!("lrange", 4, READONLY, KEY1, lists::lrange),
    cmd!("lrem", 4, WRITE, KEY1, lists::lrem),
    cmd!("lset", 4, RW, KEY1, lists::lset),
    cmd!("ltrim", 4, WRITE, KEY1, lists::ltrim),
    cmd!("lpos", -3, READONLY, KEY1, lists::lpos),
    cmd!("rpoplpush", 3, RW, (1, 2, 1), lists::rpoplpush),
    cmd!("lmove", 5, RW, (1, 2, 1), lists::lmove),
    cmd!("lmpop", -4, WRITE, NOKEYS, lists::lmpop),
    blocking!("blpop", -3, WRITE | BLOCKING, (1, -2, 1), blocking::blpop),
    blocking!("brpop", -3, WRITE | BLOCKING, (1, -2, 1), blocking::brpop),
    blocking!(
        "brpoplpush",
        4,
        RW | BLOCKING,
        (1, 2, 1),
        blocking::brpoplpush
    ),
    blocking!("blmove", 6, RW | BLOCKING, (1, 2, 1), blocking::blmove),
    blocking!("blmpop", -5, WRITE | BLOCKING, NOKEYS, blocking::blmpop),
    // sets
    cmd!("sadd", -3, RW | FAST, KEY1, sets::sadd),
    cmd!("srem", -3, WRITE | FAST, KEY1, sets::srem),
    cmd!("smembers", 2, READONLY, KEY1, sets::smembers),
    cmd!("sismember", 3, READONLY | FAST, KEY1, sets::sismember),
    cmd!("smismember", -3, READONLY | FAST, KEY1, sets::smismember),
    cmd!("scard", 2, READONLY | FAST, KEY1, sets::scard),
    cmd!("spop", -2, WRITE | FAST, KEY1, sets::spop),
    cmd!("srandmember", -2, READONLY, KEY1, sets::srandmember),
    cmd!("smove", 4, WRITE | FAST, (1, 2, 1), sets::smove),
    cmd!("sinter", -2, READONLY, ALLKEYS, sets::sinter),
    cmd!("sinterstore", -3, RW, ALLKEYS, sets::sinterstore),
    cmd!("sunion", -2, READONLY, ALLKEYS, sets::sunion),
    cmd!("sunionstore", -3, RW, ALLKEYS, sets::sunionstore),
    cmd!("sdiff", -2, READONLY, ALLKEYS, sets::sdiff),
    cmd!("sdiffstore", -3, RW, ALLKEYS, sets::sdiffstore),
    cmd!("sintercard", -3, READONLY, NOKEYS, sets::sintercard),
    cmd!("sscan", -3, READONLY, KEY1, sets::sscan),
    // sorted sets
    cmd!("zadd", -4, RW | FAST, KEY1, zsets::zadd),
    cmd!("zincrby", 4, RW | FAST, KEY1, zsets::zincrby),
    cmd!("zrem", -3, WRITE | FAST, KEY1, zsets::zrem),
    cmd!("zcard", 2, READONLY | FAST, KEY1, zsets::zcard),
    cmd!("zcount", 4, READONLY | FAST, KEY1, zsets::zcount),
    cmd!("zlexcount", 4, READONLY | FAST, KEY1, zsets::zlexcount),
    cmd!("zscore", 3, READONLY | FAST, KEY1, zsets::zscore),
    cmd!("zmscore", -3, READONLY | FAST, KEY1, zsets::zmscore),
    cmd!("zrank", -3, READONLY | FAST, KEY1, zsets::zrank),
    cmd!("zrevrank", -3, READONLY | FAST, KEY1, zsets::zrevrank),
    cmd!("zrange", -4, READONLY, KEY1, zrange::zrange),
    cmd!("zrangestore", -5, RW, (1, 2, 1), zrange::zrangestore),
    cmd!("zrevrange", -4, READONLY, KEY1, zrange::zrevrange),
    cmd!("zrangebyscore", -4, READONLY, KEY1, zrange::zrangebyscore),
    cmd!(
        "zrevrangebyscore",
        -4,
        READONLY,
        KEY1,
        zrange::zrevrangebyscore
    ),
    cmd!("zrangebylex", -4, READONLY, KEY1, zrange::zrangebylex),
    cmd!("zrevrangebylex", -4, READONLY, KEY1, zrange::zrevrangebylex),
    cmd!("zremrangebyrank", 4, WRITE, KEY1, zrange::zremrangebyrank),
    cmd!("zremrangebyscore", 4, WRITE, KEY1, zrange::zremrangebyscore),
    cmd!("zremrangebylex", 4, WRITE, KEY1, zrange::zremrangebylex),
    cmd!("zpopmin", -2, WRITE | FAST, KEY1, zsets::zpopmin),
    cmd!("zpopmax", -2, WRITE | FAST, KEY1, zsets::zpopmax),
    cmd!("zmpop", -4, WRITE, NOKEYS, zsets::zmpop),
    blocking!(
        "bzpopmin",
        -3,
        WRITE | FAST | BLOCKING,
        (1, -2, 1),
        blocking::bzpopmin
    ),
    blocking!(
        "bzpopmax",
        -3,
        WRITE | FAST | BLOCKING,
        (1, -2, 1),
        blocking::bzpopmax
    ),
    blocking!("bzmpop", -5, WRITE | BLOCKING, NOKEYS, blocking::bzmpop),
    cmd!("zrandmember", -2, READONLY, KEY1, zsets::zrandmember),
    cmd!("zscan", -3, READONLY, KEY1, zsets::zscan),
    cmd!("zunion", -3, READONLY, NOKEYS, zstore::zunion),
    cmd!("zinter", -3, READONLY, NOKEYS, zstore::zinter),
    cmd!("zdiff", -3, READONLY, NOKEYS, zstore::zdiff),
    cmd!("zunionstore", -4, RW, KEY1, zstore::zunionstore),
    cmd!("zinterstore", -4, RW, KEY1, zstore::zinterstore),
    cmd!("zdiffstore", -4, RW, KEY1, zstore::zdiffstore),
    cmd!("zintercard", -3, READONLY, NOKEYS, zstore::zintercard),
    cmd!("sort", -2, RW, KEY1, sort::sort),
    cmd!("sort_ro", -2, READONLY, KEY1, sort::sort_ro),
    // keys
    cmd!("del", -2, WRITE, ALLKEYS, keys::del),
    cmd!("unlink", -2, WRITE | FAST, ALLKEYS, keys::del),
    cmd!("exists", -2, READONLY | FAST, ALLKEYS, keys::exists),
    cmd!("touch", -2, READONLY | FAST, ALLKEYS, keys::touch),
    cmd!("type", 2, READONLY | FAST, KEY1, keys::type_),
    cmd!("expire", -3, WRITE | FAST, KEY1, keys::expire),
    cmd!("pexpire", -3, WRITE | FAST, KEY1, keys::pexpire),
    cmd!("expireat", -3, WRITE | FAST, KEY1, keys::expireat),
    cmd!("pexpireat", -3, WRITE | FAST, KEY1, keys::pexpireat),
    cmd!("ttl", 2, READONLY | FAST, KEY1, keys::ttl),
    cmd!("pttl", 2, READONLY | FAST, KEY1, keys::pttl),
    cmd!("expiretime", 2, READONLY | FAST, KEY1, keys::expiretime),
    cmd!("pexpiretime", 2, READONLY | FAST, KEY1, keys::pexpiretime),
    cmd!("persist", 2, WRITE | FAST, KEY1, keys::persist),
    cmd!("scan", -2, READONLY, NOKEYS, keys::scan),
    cmd!("keys", 2, READONLY, NOKEYS, keys::keys),
    cmd!("randomkey", 1, READONLY, NOKEYS, keys::randomkey),
    cmd!("rename", 3, WRITE, (1, 2, 1), object::rename),
    cmd!("renamenx", 3, WRITE | FAST, (1, 2, 1), object::renamenx),
    cmd!("copy", -3, RW, (1, 2, 1), object::copy),
    cmd!("object", -2, READONLY, (2, 2, 1), object::object),
    cmd!("memory", -2, READONLY, NOKEYS, object::memory),
    // pub/sub
    cmd!("subscribe", -2, 0, NOKEYS, pubsub::subscribe),
    cmd!("unsubscribe", -1, 0, NOKEYS, pubsub::unsubscribe),
    cmd!("psubscribe", -2, 0, NOKEYS, pubsub::psubscribe),
    cmd!("punsubscribe", -1, 0, NOKEYS, pubsub::punsubscribe),
    cmd!("ssubscribe", -2, 0, ALLKEYS, pubsub::ssubscribe),
    cmd!("sunsubscribe", -1, 0, ALLKEYS, pubsub::sunsubscribe),
    cmd!("publish", 3, FAST, NOKEYS, pubsub::publish),
    cmd!("spublish", 3, FAST, KEY1, pubsub::spublish),
    cmd!("pubsub", -2, 0, NOKEYS, pubsub::pubsub),
    // migration
    cmd!("dump", 2, READONLY, KEY1, migrate::dump),
    cmd!("restore", -4, RW, KEY1, migrate::restore),
    Command {
        name: "migrate",
        arity: -6,
        flags: WRITE,
        keys: (3, 3, 1),
        run: Run::Migrate,
    },
];

use crate::resp::command::NameIndex;

static BY_NAME: LazyLock<NameIndex<Command>> =
    LazyLock::new(|| NameIndex::new(COMMANDS, |c| c.name));

/// Looks a command up by name, any case, without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    BY_NAME.get(name)
}

/// A Redis command the proxy routes (it is in the proxy's command table)
/// that this node does not implement: its lower-case name, so the error can
/// say which backends serve it instead of calling it unknown. Derived from
/// the two tables, so it stays true as either grows; CLUSTER is the
/// proxy's own and is left to the generic error.
pub fn not_served(name: &[u8]) -> Option<&'static str> {
    let spec = crate::resp::lookup(name)?;
    (lookup(name).is_none() && spec.kind != crate::resp::Kind::Admin).then_some(spec.name)
}

/// What the connection must do after [`dispatch`].
pub enum Next {
    /// The reply is written; carry on.
    Done,
    /// Run MIGRATE (async) with these arguments, then write its reply.
    Migrate,
    /// Wait for the reply of a blocked command before anything else.
    Block(blocking::Block),
}

/// Runs one request and appends its reply to `out`.
///
/// Inside MULTI a command is checked and queued instead (see `multi.rs`):
/// an unknown command or a wrong arity then flags the transaction, as in
/// Redis. Every command runs with the node's gate held shared, EXEC with
/// it held exclusively, so a transaction never interleaves with another
/// client's command.
pub fn dispatch(
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
        let e = CmdError::WrongArity(cmd.name.to_string());
        if matches!(cmd.run, Run::Exec) {
            // A refused EXEC discards the transaction, in MULTI or not.
            client.tx.clear(node);
            multi::abort_exec(out, &e);
        } else {
            client.tx.flag();
            e.write(out);
        }
        return Next::Done;
    }
    if matches!(cmd.run, Run::Exec) {
        multi::exec(node, client, out, now);
        return Next::Done;
    }
    // Before queueing, as Redis checks it: MULTI itself is refused there.
    if client.proto == 2 && client.is_subscribed() {
        if let Some(e) = pubsub::refusal(cmd, args) {
            e.write(out);
            return Next::Done;
        }
    }
    let _shared = node.shared();
    if client.tx.is_queueing() && !multi::runs_immediately(cmd) {
        multi::queue(node, client, out, cmd, args, now);
        return Next::Done;
    }
    if cmd.flags & DENYOOM != 0 && node.make_room(now).is_err() {
        CmdError::OutOfMemory.write(out);
        return Next::Done;
    }
    if matches!(cmd.run, Run::Migrate) {
        return Next::Migrate;
    }
    run(node, client, out, cmd, args, now)
}

/// Runs a command (checked already) and tells WATCH about the keys a write
/// command names. The caller holds the node's gate. A blocking command that
/// finds nothing returns what to wait for (never while
/// `client.never_block`, as inside EXEC).
fn run(
    node: &Node,
    client: &mut Client,
    out: &mut BytesMut,
    cmd: &'static Command,
    args: &[&[u8]],
    now: u64,
) -> Next {
    client.last_cmd = cmd.name;
    let mut ctx = Ctx {
        node,
        client,
        out,
        now,
    };
    let result = match cmd.run {
        Run::Sync(f) => f(&mut ctx, args).map(|()| Next::Done),
        Run::Block(f) => f(&mut ctx, args).map(|b| b.map_or(Next::Done, Next::Block)),
        Run::Migrate | Run::Exec => Err(CmdError::err(format!("'{}' cannot run here", cmd.name))),
    };
    let next = result.unwrap_or_else(|e| {
        e.write(ctx.out);
        Next::Done
    });
    if cmd.flags & WRITE != 0 {
        crate::backend::watch::touch_written(&node.store, cmd, args, now);
    }
    next
}

/// Whether `n` arguments (name included) satisfy `arity`.
pub fn arity_ok(arity: i32, n: usize) -> bool {
    if arity >= 0 {
        n == arity as usize
    } else {
        n >= (-arity) as usize
    }
}

/// Parses an integer exactly as Redis's `string2ll` (see
/// [`crate::resp::parse_i64`]).
pub fn parse_i64(b: &[u8]) -> Result<i64, CmdError> {
    crate::resp::parse_i64(b).ok_or(CmdError::NotInteger)
}

/// Parses a float as Redis's `string2ld`: no blanks, no NaN.
pub fn parse_f64(b: &[u8]) -> Result<f64, CmdError> {
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
mod tests {
    use super::*;

    #[test]
    fn parse_i64_follows_redis_string2ll() {
        let cases: &[(&str, Option<i64>)] = &[
            ("0", Some(0)),
            ("1", Some(1)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("-0", None),
            ("01", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("", None),
            ("-", None),
            ("1a", None),
            ("99999999999999999999", None),
        ];
        for &(s, want) in cases {
            assert_eq!(parse_i64(s.as_bytes()).ok(), want, "{s:?}");
        }
    }

    #[test]
    fn commands_the_proxy_routes_but_the_node_lacks_are_named() {
        assert_eq!(not_served(b"XADD"), Some("xadd"));
        assert_eq!(not_served(b"get"), None, "served");
        assert_eq!(not_served(b"cluster"), None, "the proxy's own");
        assert_eq!(not_served(b"nosuchcommand"), None, "not Redis");
        for spec in crate::resp::command::TABLE {
            let served = lookup(spec.name.as_bytes()).is_some();
            let admin = spec.kind == crate::resp::Kind::Admin;
            assert_eq!(
                not_served(spec.name.as_bytes()).is_some(),
                !served && !admin,
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn every_command_is_found_in_any_case() {
        for c in COMMANDS {
            assert!(lookup(c.name.as_bytes()).is_some());
            assert!(lookup(c.name.to_uppercase().as_bytes()).is_some());
        }
        assert!(lookup(b"nosuchcommandatall").is_none());
    }
}
