//! The command table: the single source of truth for what the proxy does with
//! each command — its arity, where its keys are, and whether it is routed by
//! key, split across nodes and merged, fanned out to every node, answered
//! locally, an admin command, or refused with a reason.
//!
//! Looked up once per request, case-insensitively and without allocating.
//! The README's command list is tested equal to [`TABLE`].

use std::sync::OnceLock;

use bytes::Bytes;

use super::keywords::Keywords;
use super::parse_i64;

/// How the proxy handles a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Routed to the node owning its key; several keys must share one node.
    Keyed,
    /// Split by owner node and merged in key order.
    Split(Merge),
    /// Sent to every node, replies aggregated.
    FanOut(Aggregate),
    /// Answered by the proxy itself.
    Local,
    /// Topology administration (`CLUSTER …`).
    Admin,
    /// Needs a dedicated upstream connection for a while (see
    /// `proxy::pinned`): transactions, blocking commands.
    Pinned(Pinned),
    /// Pub/sub (see `proxy::pubsub`).
    PubSub(PubSub),
    /// Known, but refused; the reason is part of the error.
    Refused(&'static str),
}

/// What a command pins a dedicated connection for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinned {
    /// MULTI, EXEC, DISCARD, WATCH, UNWATCH.
    Transaction,
    /// BLPOP and the like: the connection is held while the command blocks.
    Blocking,
}

/// The pub/sub commands' three routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PubSub {
    /// (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE: on the client's subscriber
    /// connection to one node.
    Subscribe,
    /// PUBLISH, SPUBLISH: to every node, counts summed.
    Publish,
    /// PUBSUB …: to every node, lists and counts merged.
    Introspect,
}

/// How the fragments of a split command are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// MGET: one array, values in the order the keys were asked.
    Values,
    /// MSET: `+OK` once every fragment said OK.
    AllOk,
    /// DEL, UNLINK, EXISTS, TOUCH: the sum of the fragments' integers.
    Sum,
}

/// How the replies of a fanned-out command are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    /// DBSIZE: sum of integers.
    Sum,
    /// FLUSHALL, FLUSHDB: `+OK` once every node said OK.
    AllOk,
    /// KEYS: concatenation of arrays.
    Concat,
    /// SCAN: a cursor that walks node after node.
    Scan,
    /// RANDOMKEY: the first non-nil reply from nodes tried in random order.
    AnyNonNil,
    /// SCRIPT …: the first node's reply, unless any node failed.
    First,
}

/// Where a command's keys are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpec {
    /// No keys.
    None,
    /// Keys at `first`, `first + step`, … up to `last` (negative counts from the end).
    Range { first: u8, last: i8, step: u8 },
    /// A count of keys at `count_at`, the keys right after it, plus an
    /// optional destination key at `dest` (ZUNIONSTORE dest numkeys k1 k2).
    NumKeys { count_at: u8, dest: Option<u8> },
    /// Found by keyword (SORT … STORE dest, XREAD … STREAMS k1 k2 id1 id2).
    Keyword(Keywords),
}

/// One row of the command table.
#[derive(Clone, Copy, Debug)]
pub struct CommandSpec {
    /// Lower-case name, as Redis prints it in errors.
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    pub kind: Kind,
    pub keys: KeySpec,
    /// Changes data (relevant to migration and replicas).
    pub write: bool,
}

impl CommandSpec {
    /// True when `argc` (name included) fits the arity.
    pub(crate) fn is_arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// Positions of the keys in `args`, or an error text when a key count is
    /// malformed (Redis's wording). Every position returned indexes `args`,
    /// whatever the argument count: a form shorter than the key position
    /// (`OBJECT HELP`, `OBJECT ENCODING` without its key) has no keys.
    pub fn key_positions(&self, args: &[Bytes]) -> Result<Vec<usize>, String> {
        match self.keys {
            KeySpec::None => Ok(Vec::new()),
            KeySpec::Range { first, last, step } => {
                let first = first as i64;
                let end = args.len() as i64 - 1;
                let last = if last < 0 {
                    args.len() as i64 + last as i64
                } else {
                    (last as i64).min(end)
                };
                if first > last {
                    return Ok(Vec::new());
                }
                // A zero step would never advance; the table has none, but a
                // row must not be able to hang or panic a client's task.
                let step = (step as usize).max(1);
                Ok((first as usize..=last as usize).step_by(step).collect())
            }
            KeySpec::NumKeys { count_at, dest } => {
                let count_at = count_at as usize;
                let n = args
                    .get(count_at)
                    .and_then(|a| parse_i64(a))
                    .ok_or_else(|| "ERR value is not an integer or out of range".to_string())?;
                if n < 0 {
                    return Err("ERR Number of keys can't be negative".into());
                }
                if n as usize > args.len().saturating_sub(count_at + 1) {
                    return Err("ERR Number of keys can't be greater than number of args".into());
                }
                let mut pos: Vec<usize> = dest.map(|d| d as usize).into_iter().collect();
                pos.extend(count_at + 1..count_at + 1 + n as usize);
                Ok(pos)
            }
            // A form shorter than its first key has none (the arity check
            // refuses it before anything is routed).
            KeySpec::Keyword(_) if args.len() < 2 => Ok(Vec::new()),
            KeySpec::Keyword(k) => k.positions(self.name, args),
        }
    }
}

const fn row(
    name: &'static str,
    arity: i32,
    kind: Kind,
    keys: KeySpec,
    write: bool,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        kind,
        keys,
        write,
    }
}

const K1: KeySpec = KeySpec::Range {
    first: 1,
    last: 1,
    step: 1,
};
const K12: KeySpec = KeySpec::Range {
    first: 1,
    last: 2,
    step: 1,
};
const KALL: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};
const KALL2: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 2,
};
const K2ALL: KeySpec = KeySpec::Range {
    first: 2,
    last: -1,
    step: 1,
};
const NK1: KeySpec = KeySpec::NumKeys {
    count_at: 1,
    dest: None,
};
const NK2: KeySpec = KeySpec::NumKeys {
    count_at: 2,
    dest: None,
};
const NK2D: KeySpec = KeySpec::NumKeys {
    count_at: 2,
    dest: Some(1),
};
const K2: KeySpec = KeySpec::Range {
    first: 2,
    last: 2,
    step: 1,
};
const NONE: KeySpec = KeySpec::None;

const KEYED: Kind = Kind::Keyed;
const LOCAL: Kind = Kind::Local;
const TX: Kind = Kind::Pinned(Pinned::Transaction);
const SUBSCRIBE: Kind = Kind::PubSub(PubSub::Subscribe);
const PUBLISH: Kind = Kind::PubSub(PubSub::Publish);
const BLOCKING: Kind = Kind::Pinned(Pinned::Blocking);
const SERVER: Kind = Kind::Refused(
    "server administration is not available through the proxy; connect to a node directly",
);

/// Every command the proxy knows. Anything else is an unknown command.
pub const TABLE: &[CommandSpec] = &[
    // strings
    row("get", 2, KEYED, K1, false),
    row("set", -3, KEYED, K1, true),
    row("setnx", 3, KEYED, K1, true),
    row("setex", 4, KEYED, K1, true),
    row("psetex", 4, KEYED, K1, true),
    row("getset", 3, KEYED, K1, true),
    row("getdel", 2, KEYED, K1, true),
    row("getex", -2, KEYED, K1, true),
    row("append", 3, KEYED, K1, true),
    row("strlen", 2, KEYED, K1, false),
    row("getrange", 4, KEYED, K1, false),
    row("substr", 4, KEYED, K1, false),
    row("setrange", 4, KEYED, K1, true),
    row("incr", 2, KEYED, K1, true),
    row("decr", 2, KEYED, K1, true),
    row("incrby", 3, KEYED, K1, true),
    row("decrby", 3, KEYED, K1, true),
    row("incrbyfloat", 3, KEYED, K1, true),
    row("lcs", -3, KEYED, K12, false),
    row("mget", -2, Kind::Split(Merge::Values), KALL, false),
    row("mset", -3, Kind::Split(Merge::AllOk), KALL2, true),
    row("msetnx", -3, KEYED, KALL2, true),
    // keys
    row("del", -2, Kind::Split(Merge::Sum), KALL, true),
    row("unlink", -2, Kind::Split(Merge::Sum), KALL, true),
    row("exists", -2, Kind::Split(Merge::Sum), KALL, false),
    row("touch", -2, Kind::Split(Merge::Sum), KALL, false),
    row("type", 2, KEYED, K1, false),
    row("expire", -3, KEYED, K1, true),
    row("pexpire", -3, KEYED, K1, true),
    row("expireat", -3, KEYED, K1, true),
    row("pexpireat", -3, KEYED, K1, true),
    row("expiretime", 2, KEYED, K1, false),
    row("pexpiretime", 2, KEYED, K1, false),
    row("ttl", 2, KEYED, K1, false),
    row("pttl", 2, KEYED, K1, false),
    row("persist", 2, KEYED, K1, true),
    row("rename", 3, KEYED, K12, true),
    row("renamenx", 3, KEYED, K12, true),
    row("copy", -3, KEYED, K12, true),
    row("dump", 2, KEYED, K1, false),
    row("restore", -4, KEYED, K1, true),
    row("sort", -2, KEYED, KeySpec::Keyword(Keywords::Sort), true),
    row("sort_ro", -2, KEYED, KeySpec::Keyword(Keywords::Sort), false),
    row("object", -2, KEYED, K2, false),
    // bitmaps
    row("setbit", 4, KEYED, K1, true),
    row("getbit", 3, KEYED, K1, false),
    row("bitcount", -2, KEYED, K1, false),
    row("bitpos", -3, KEYED, K1, false),
    row("bitfield", -2, KEYED, K1, true),
    row("bitfield_ro", -2, KEYED, K1, false),
    row("bitop", -4, KEYED, K2ALL, true),
    // hyperloglog
    row("pfadd", -2, KEYED, K1, true),
    row("pfcount", -2, KEYED, KALL, false),
    row("pfmerge", -2, KEYED, KALL, true),
    // hashes
    row("hset", -4, KEYED, K1, true),
    row("hsetnx", 4, KEYED, K1, true),
    row("hget", 3, KEYED, K1, false),
    row("hmset", -4, KEYED, K1, true),
    row("hmget", -3, KEYED, K1, false),
    row("hdel", -3, KEYED, K1, true),
    row("hlen", 2, KEYED, K1, false),
    row("hstrlen", 3, KEYED, K1, false),
    row("hincrby", 4, KEYED, K1, true),
    row("hincrbyfloat", 4, KEYED, K1, true),
    row("hkeys", 2, KEYED, K1, false),
    row("hvals", 2, KEYED, K1, false),
    row("hgetall", 2, KEYED, K1, false),
    row("hexists", 3, KEYED, K1, false),
    row("hrandfield", -2, KEYED, K1, false),
    row("hscan", -3, KEYED, K1, false),
    row("hexpire", -6, KEYED, K1, true),
    row("hpexpire", -6, KEYED, K1, true),
    row("hexpireat", -6, KEYED, K1, true),
    row("hpexpireat", -6, KEYED, K1, true),
    row("hpersist", -5, KEYED, K1, true),
    row("httl", -5, KEYED, K1, false),
    row("hpttl", -5, KEYED, K1, false),
    row("hexpiretime", -5, KEYED, K1, false),
    row("hpexpiretime", -5, KEYED, K1, false),
    // lists
    row("lpush", -3, KEYED, K1, true),
    row("rpush", -3, KEYED, K1, true),
    row("lpushx", -3, KEYED, K1, true),
    row("rpushx", -3, KEYED, K1, true),
    row("linsert", 5, KEYED, K1, true),
    row("lindex", 3, KEYED, K1, false),
    row("llen", 2, KEYED, K1, false),
    row("lpop", -2, KEYED, K1, true),
    row("rpop", -2, KEYED, K1, true),
    row("lrange", 4, KEYED, K1, false),
    row("lrem", 4, KEYED, K1, true),
    row("lset", 4, KEYED, K1, true),
    row("ltrim", 4, KEYED, K1, true),
    row("lpos", -3, KEYED, K1, false),
    row("rpoplpush", 3, KEYED, K12, true),
    row("lmove", 5, KEYED, K12, true),
    row("lmpop", -4, KEYED, NK1, true),
    // sets
    row("sadd", -3, KEYED, K1, true),
    row("srem", -3, KEYED, K1, true),
    row("smembers", 2, KEYED, K1, false),
    row("sismember", 3, KEYED, K1, false),
    row("smismember", -3, KEYED, K1, false),
    row("scard", 2, KEYED, K1, false),
    row("spop", -2, KEYED, K1, true),
    row("srandmember", -2, KEYED, K1, false),
    row("smove", 4, KEYED, K12, true),
    row("sinter", -2, KEYED, KALL, false),
    row("sinterstore", -3, KEYED, KALL, true),
    row("sunion", -2, KEYED, KALL, false),
    row("sunionstore", -3, KEYED, KALL, true),
    row("sdiff", -2, KEYED, KALL, false),
    row("sdiffstore", -3, KEYED, KALL, true),
    row("sintercard", -3, KEYED, NK1, false),
    row("sscan", -3, KEYED, K1, false),
    // sorted sets
    row("zadd", -4, KEYED, K1, true),
    row("zincrby", 4, KEYED, K1, true),
    row("zrem", -3, KEYED, K1, true),
    row("zcard", 2, KEYED, K1, false),
    row("zcount", 4, KEYED, K1, false),
    row("zlexcount", 4, KEYED, K1, false),
    row("zscore", 3, KEYED, K1, false),
    row("zmscore", -3, KEYED, K1, false),
    row("zrank", -3, KEYED, K1, false),
    row("zrevrank", -3, KEYED, K1, false),
    row("zrange", -4, KEYED, K1, false),
    row("zrangebyscore", -4, KEYED, K1, false),
    row("zrevrangebyscore", -4, KEYED, K1, false),
    row("zrangebylex", -4, KEYED, K1, false),
    row("zrevrangebylex", -4, KEYED, K1, false),
    row("zrevrange", -4, KEYED, K1, false),
    row("zremrangebyrank", 4, KEYED, K1, true),
    row("zremrangebyscore", 4, KEYED, K1, true),
    row("zremrangebylex", 4, KEYED, K1, true),
    row("zpopmin", -2, KEYED, K1, true),
    row("zpopmax", -2, KEYED, K1, true),
    row("zrandmember", -2, KEYED, K1, false),
    row("zscan", -3, KEYED, K1, false),
    row("zrangestore", -5, KEYED, K12, true),
    row("zunionstore", -4, KEYED, NK2D, true),
    row("zinterstore", -4, KEYED, NK2D, true),
    row("zdiffstore", -4, KEYED, NK2D, true),
    row("zunion", -3, KEYED, NK1, false),
    row("zinter", -3, KEYED, NK1, false),
    row("zdiff", -3, KEYED, NK1, false),
    row("zintercard", -3, KEYED, NK1, false),
    row("zmpop", -4, KEYED, NK1, true),
    // geo
    row("geoadd", -5, KEYED, K1, true),
    row("geodist", -4, KEYED, K1, false),
    row("geohash", -2, KEYED, K1, false),
    row("geopos", -2, KEYED, K1, false),
    row("geosearch", -7, KEYED, K1, false),
    row("geosearchstore", -8, KEYED, K12, true),
    row("georadius", -6, KEYED, KeySpec::Keyword(Keywords::GeoRadius { options_at: 6 }), true),
    row("georadiusbymember", -5, KEYED, KeySpec::Keyword(Keywords::GeoRadius { options_at: 5 }), true),
    row("georadius_ro", -6, KEYED, K1, false),
    row("georadiusbymember_ro", -5, KEYED, K1, false),
    // streams (XGROUP and XINFO: subcommand first, key second)
    row("xadd", -5, KEYED, K1, true),
    row("xlen", 2, KEYED, K1, false),
    row("xrange", -4, KEYED, K1, false),
    row("xrevrange", -4, KEYED, K1, false),
    row("xdel", -3, KEYED, K1, true),
    row("xtrim", -4, KEYED, K1, true),
    row("xack", -4, KEYED, K1, true),
    row("xclaim", -6, KEYED, K1, true),
    row("xautoclaim", -6, KEYED, K1, true),
    row("xpending", -3, KEYED, K1, false),
    row("xsetid", -3, KEYED, K1, true),
    row("xgroup", -2, KEYED, K2, true),
    row("xinfo", -2, KEYED, K2, false),
    row("xread", -4, KEYED, KeySpec::Keyword(Keywords::Streams), false),
    row("xreadgroup", -7, KEYED, KeySpec::Keyword(Keywords::Streams), true),
    // scripting: routed by the keys it declares
    row("eval", -3, KEYED, NK2, true),
    row("evalsha", -3, KEYED, NK2, true),
    row("eval_ro", -3, KEYED, NK2, false),
    row("evalsha_ro", -3, KEYED, NK2, false),
    row("fcall", -3, KEYED, NK2, true),
    row("fcall_ro", -3, KEYED, NK2, false),
    row("script", -2, Kind::FanOut(Aggregate::First), NONE, true),
    row("function", -2, Kind::FanOut(Aggregate::First), NONE, true),
    // fan-out
    row("dbsize", 1, Kind::FanOut(Aggregate::Sum), NONE, false),
    row("flushall", -1, Kind::FanOut(Aggregate::AllOk), NONE, true),
    row("flushdb", -1, Kind::FanOut(Aggregate::AllOk), NONE, true),
    row("keys", 2, Kind::FanOut(Aggregate::Concat), NONE, false),
    row("scan", -2, Kind::FanOut(Aggregate::Scan), NONE, false),
    row("randomkey", 1, Kind::FanOut(Aggregate::AnyNonNil), NONE, false),
    // answered by the proxy
    row("ping", -1, LOCAL, NONE, false),
    row("echo", 2, LOCAL, NONE, false),
    row("quit", -1, LOCAL, NONE, false),
    row("hello", -1, LOCAL, NONE, false),
    row("auth", -2, LOCAL, NONE, false),
    row("select", 2, LOCAL, NONE, false),
    row("client", -2, LOCAL, NONE, false),
    row("command", -1, LOCAL, NONE, false),
    row("info", -1, LOCAL, NONE, false),
    row("config", -2, LOCAL, NONE, false),
    row("time", 1, LOCAL, NONE, false),
    row("readonly", 1, LOCAL, NONE, false),
    row("readwrite", 1, LOCAL, NONE, false),
    row("asking", 1, LOCAL, NONE, false),
    row("reset", 1, LOCAL, NONE, false),
    row("monitor", 1, LOCAL, NONE, false),
    row("memory", -2, LOCAL, NONE, false),
    // administration
    row("cluster", -2, Kind::Admin, NONE, false),
    // transactions
    row("multi", 1, TX, NONE, false),
    row("exec", 1, TX, NONE, false),
    row("discard", 1, TX, NONE, false),
    row("watch", -2, TX, KALL, false),
    row("unwatch", 1, TX, NONE, false),
    // pub/sub
    row("subscribe", -2, SUBSCRIBE, NONE, false),
    row("unsubscribe", -1, SUBSCRIBE, NONE, false),
    row("psubscribe", -2, SUBSCRIBE, NONE, false),
    row("punsubscribe", -1, SUBSCRIBE, NONE, false),
    row("ssubscribe", -2, SUBSCRIBE, NONE, false),
    row("sunsubscribe", -1, SUBSCRIBE, NONE, false),
    row("publish", 3, PUBLISH, NONE, false),
    row("spublish", 3, PUBLISH, NONE, false),
    row("pubsub", -2, Kind::PubSub(PubSub::Introspect), NONE, false),
    row("blpop", -3, BLOCKING, KeySpec::Range { first: 1, last: -2, step: 1 }, true),
    row("brpop", -3, BLOCKING, KeySpec::Range { first: 1, last: -2, step: 1 }, true),
    row("brpoplpush", 4, BLOCKING, K12, true),
    row("blmove", 6, BLOCKING, K12, true),
    row("blmpop", -5, BLOCKING, KeySpec::NumKeys { count_at: 2, dest: None }, true),
    row("bzpopmin", -3, BLOCKING, KeySpec::Range { first: 1, last: -2, step: 1 }, true),
    row("bzpopmax", -3, BLOCKING, KeySpec::Range { first: 1, last: -2, step: 1 }, true),
    row("bzmpop", -5, BLOCKING, KeySpec::NumKeys { count_at: 2, dest: None }, true),
    row("wait", 3, BLOCKING, NONE, false),
    row("move", 3, Kind::Refused("MOVE is not supported: the proxy serves database 0 only"), NONE, false),
    row("swapdb", 3, Kind::Refused("SWAPDB is not supported: the proxy serves database 0 only"), NONE, false),
    row("migrate", -6, Kind::Refused("MIGRATE is not available through the proxy; use CLUSTER ADDNODE / REMOVENODE to move keys"), NONE, false),
    row("save", 1, SERVER, NONE, false),
    row("bgsave", -1, SERVER, NONE, false),
    row("bgrewriteaof", 1, SERVER, NONE, false),
    row("lastsave", 1, SERVER, NONE, false),
    row("shutdown", -1, SERVER, NONE, false),
    row("debug", -2, SERVER, NONE, false),
    row("slaveof", 3, SERVER, NONE, false),
    row("replicaof", 3, SERVER, NONE, false),
    row("sync", 1, SERVER, NONE, false),
    row("psync", -3, SERVER, NONE, false),
    row("failover", -1, SERVER, NONE, false),
    row("slowlog", -2, LOCAL, NONE, false),
    row("latency", -2, SERVER, NONE, false),
    row("acl", -2, SERVER, NONE, false),
    row("module", -2, SERVER, NONE, false),
    row("role", 1, SERVER, NONE, false),
    row("lolwut", -1, SERVER, NONE, false),
    row("pfdebug", 3, SERVER, NONE, false),
    row("pfselftest", 1, SERVER, NONE, false),
    row("replconf", -1, SERVER, NONE, false),
    row("restore-asking", -4, SERVER, NONE, false),
];

/// Longest command name in the table, so lookups can upper-case on the stack.
const MAX_NAME: usize = 24;

/// A command name, lower-cased and zero-padded, as three words: hashed and
/// compared a word at a time.
type Name = [u64; MAX_NAME / 8];

/// A table of commands by name, case-insensitive: open addressing over a
/// power-of-two size at least four times the table's length, linear probing.
/// A lookup hashes three words and usually compares one slot. The proxy's
/// command table and the built-in node's both use it.
pub(crate) struct NameIndex<T: 'static> {
    slots: Vec<Option<(Name, &'static T)>>,
    mask: usize,
}

impl<T> NameIndex<T> {
    /// Indexes `items` by `name(item)`; names must be at most 24 bytes and unique.
    pub(crate) fn new(items: &'static [T], name: impl Fn(&T) -> &str) -> NameIndex<T> {
        let size = (items.len() * 4).next_power_of_two();
        let mut index = NameIndex {
            slots: (0..size).map(|_| None).collect(),
            mask: size - 1,
        };
        for item in items {
            let key = fold(name(item).as_bytes()).expect("command names are short");
            let mut i = index.slot(&key);
            while index.slots[i].is_some() {
                i = (i + 1) & index.mask;
            }
            index.slots[i] = Some((key, item));
        }
        index
    }

    fn slot(&self, name: &Name) -> usize {
        let h = (name[0] ^ name[1].rotate_left(21) ^ name[2].rotate_left(42))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize & self.mask
    }

    /// The item named `name` in any case, without allocating.
    pub(crate) fn get(&self, name: &[u8]) -> Option<&'static T> {
        let name = fold(name)?;
        let mut i = self.slot(&name);
        loop {
            match &self.slots[i] {
                Some((n, item)) if *n == name => return Some(item),
                Some(_) => i = (i + 1) & self.mask,
                None => return None,
            }
        }
    }
}

fn index() -> &'static NameIndex<CommandSpec> {
    static INDEX: OnceLock<NameIndex<CommandSpec>> = OnceLock::new();
    INDEX.get_or_init(|| NameIndex::new(TABLE, |spec| spec.name))
}

fn fold(name: &[u8]) -> Option<Name> {
    if name.len() > MAX_NAME {
        return None;
    }
    let mut key = [0u8; MAX_NAME];
    for (k, &c) in key.iter_mut().zip(name) {
        // Zero pads the name: a NUL inside one would alias a shorter name.
        if c == 0 {
            return None;
        }
        *k = c.to_ascii_lowercase();
    }
    let word = |i: usize| u64::from_le_bytes(key[i * 8..i * 8 + 8].try_into().unwrap());
    Some([word(0), word(1), word(2)])
}

/// Finds a command by name, case-insensitively, without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    index().get(name)
}

/// Redis 7's reply text for an unknown command (without the leading '-').
pub(crate) fn unknown_command_error(args: &[Bytes]) -> String {
    let name = String::from_utf8_lossy(&args[0]);
    let name: String = name.chars().take(128).collect();
    let mut rest = String::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        let a = String::from_utf8_lossy(a);
        let a: String = a.chars().take(room).collect();
        rest.push('\'');
        rest.push_str(&a);
        rest.push_str("' ");
    }
    format!("ERR unknown command '{name}', with args beginning with: {rest}")
}

/// The README's command table, generated from [`TABLE`] (a test keeps the
/// README equal to it).
pub fn markdown_table() -> String {
    let names = |pred: &dyn Fn(&CommandSpec) -> bool| {
        TABLE
            .iter()
            .filter(|s| pred(s))
            .map(|s| format!("`{}`", s.name))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = String::from("| how the proxy handles it | commands |\n|---|---|\n");
    out.push_str(&format!(
        "| routed to the key's node (several keys must share a node: use a `{{hash tag}}`) | {} |\n",
        names(&|s| s.kind == Kind::Keyed)
    ));
    out.push_str(&format!(
        "| split by node, merged in key order | {} |\n",
        names(&|s| matches!(s.kind, Kind::Split(_)))
    ));
    out.push_str(&format!(
        "| sent to every node, replies aggregated | {} |\n",
        names(&|s| matches!(s.kind, Kind::FanOut(_)))
    ));
    out.push_str(&format!(
        "| answered by the proxy | {} |\n",
        names(&|s| s.kind == Kind::Local)
    ));
    for (pin, what) in [
        (
            Pinned::Transaction,
            "transactions: every key on one node, run on a connection pinned to it (see below)",
        ),
        (
            Pinned::Blocking,
            "blocking: each blocked client holds its own pinned connection to the key's node",
        ),
    ] {
        let list = names(&|s| s.kind == Kind::Pinned(pin));
        out.push_str(&format!("| {what} | {list} |\n"));
    }
    for (kind, what) in [
        (
            PubSub::Subscribe,
            "pub/sub subscriptions: each subscriber holds one pinned connection to one node (see below)",
        ),
        (
            PubSub::Publish,
            "pub/sub publishing: sent to every node, receiver counts summed",
        ),
        (
            PubSub::Introspect,
            "pub/sub introspection: sent to every node, channel lists merged, subscriber counts summed",
        ),
    ] {
        let list = names(&|s| s.kind == Kind::PubSub(kind));
        out.push_str(&format!("| {what} | {list} |\n"));
    }
    out.push_str(&format!(
        "| topology administration | {} |\n",
        names(&|s| s.kind == Kind::Admin)
    ));
    let mut reasons: Vec<&str> = Vec::new();
    for spec in TABLE {
        if let Kind::Refused(why) = spec.kind {
            if !reasons.contains(&why) {
                reasons.push(why);
            }
        }
    }
    for why in reasons {
        out.push_str(&format!(
            "| refused: {why} | {} |\n",
            names(&|s| s.kind == Kind::Refused(why))
        ));
    }
    out
}

/// Redis's arity error text for `spec`.
pub(crate) fn arity_error(spec: &CommandSpec) -> String {
    format!("ERR wrong number of arguments for '{}' command", spec.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn lookup_ignores_case_and_rejects_unknown() {
        assert_eq!(lookup(b"GET").unwrap().name, "get");
        assert_eq!(lookup(b"gEt").unwrap().name, "get");
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(&[b'a'; 100]).is_none());
        assert!(lookup(b"get\0").is_none());
        assert!(lookup(b"").is_none());
        // Every name in the table is found, in either case.
        for spec in TABLE {
            assert_eq!(lookup(spec.name.as_bytes()).unwrap().name, spec.name);
            let upper = spec.name.to_ascii_uppercase();
            assert_eq!(lookup(upper.as_bytes()).unwrap().name, spec.name);
        }
    }

    #[test]
    fn table_has_no_duplicates_and_names_fit() {
        let mut seen = std::collections::HashSet::new();
        for spec in TABLE {
            assert!(seen.insert(spec.name), "duplicate {}", spec.name);
            assert!(spec.name.len() <= MAX_NAME);
            assert_eq!(spec.name, spec.name.to_lowercase());
        }
    }

    #[test]
    fn key_positions_follow_each_spec() {
        type Case<'a> = (&'a [&'a str], Result<Vec<usize>, &'a str>);
        let cases: &[Case] = &[
            (&["get", "k"], Ok(vec![1])),
            (&["mset", "a", "1", "b", "2"], Ok(vec![1, 3])),
            (&["del", "a", "b", "c"], Ok(vec![1, 2, 3])),
            (&["bitop", "and", "d", "s1", "s2"], Ok(vec![2, 3, 4])),
            (
                &["zunionstore", "d", "2", "a", "b", "weights", "1", "2"],
                Ok(vec![1, 3, 4]),
            ),
            (&["eval", "return 1", "0"], Ok(vec![])),
            (&["eval", "return 1", "1", "k", "arg"], Ok(vec![3])),
            (
                &["eval", "s", "3", "k"],
                Err("ERR Number of keys can't be greater than number of args"),
            ),
            (
                &["eval", "s", "-1"],
                Err("ERR Number of keys can't be negative"),
            ),
            (
                &["eval", "s", "x"],
                Err("ERR value is not an integer or out of range"),
            ),
            (&["object", "encoding", "k"], Ok(vec![2])),
            (&["object", "help"], Ok(vec![])),
            (&["xgroup", "create", "s", "g", "$"], Ok(vec![2])),
            (&["xinfo", "stream", "s", "full"], Ok(vec![2])),
            (&["xgroup", "help"], Ok(vec![])),
            (&["sort", "k"], Ok(vec![1])),
            (&["sort", "k", "limit", "0", "store", "store", "d"], Ok(vec![1, 6])),
            (&["sort", "k", "STORE", "d1", "alpha", "store", "d2"], Ok(vec![1, 6])),
            (&["sort", "k", "by", "nosort", "get", "#", "get", "x"], Ok(vec![1])),
            (&["sort", "{u}k", "by", "{u}w_*", "get", "{u}:*->f", "store", "{u}d"], Ok(vec![1, 3, 5, 7])),
            (
                &["sort", "k", "by", "w_*"],
                Err("ERR BY option of SORT denied by shardis when keys formed by the pattern may be on different nodes: put a {hash tag} before the '*' that keeps them with the sorted key"),
            ),
            (
                &["sort_ro", "k", "get", "*{u}"],
                Err("ERR GET option of SORT denied by shardis when keys formed by the pattern may be on different nodes: put a {hash tag} before the '*' that keeps them with the sorted key"),
            ),
            (
                &["sort", "k", "get", "{}*"],
                Err("ERR GET option of SORT denied by shardis when keys formed by the pattern may be on different nodes: put a {hash tag} before the '*' that keeps them with the sorted key"),
            ),
            (&["georadius", "g", "0", "0", "1", "km", "store", "d"], Ok(vec![1, 7])),
            (
                &["georadius", "g", "0", "0", "1", "km", "store", "d", "storedist", "e"],
                Ok(vec![1, 9]),
            ),
            (&["georadiusbymember", "g", "m", "1", "km", "STOREDIST", "d"], Ok(vec![1, 6])),
            (&["georadius", "g", "0", "0", "1", "km", "count", "3"], Ok(vec![1])),
            (&["geosearchstore", "d", "s", "frommember", "m", "byradius", "1", "km"], Ok(vec![1, 2])),
            (&["xread", "count", "2", "streams", "a", "b", "0", "0"], Ok(vec![4, 5])),
            (
                &["xreadgroup", "group", "streams", "c", "noack", "streams", "streams", ">"],
                Ok(vec![6]),
            ),
            (
                &["xread", "block", "0", "streams", "a", "$"],
                Ok(vec![4]),
            ),
            (
                &["xread", "streams", "a", "b", "0"],
                Err("ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified."),
            ),
            (
                &["xreadgroup", "group", "g", "c", "streams", "a"],
                Err("ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."),
            ),
            (&["xread", "count", "1", "a", "0"], Err("ERR syntax error")),
            (&["object"], Ok(vec![])),
            (&["get"], Ok(vec![])),
            (&["mset"], Ok(vec![])),
            (&["ping"], Ok(vec![])),
        ];
        for (a, want) in cases {
            let spec = lookup(a[0].as_bytes()).unwrap();
            let got = spec.key_positions(&args(a));
            assert_eq!(got, want.clone().map_err(|e| e.to_string()), "{a:?}");
        }
    }

    /// Every row, at every argument count a client can send (arity
    /// checks come after routing for some paths, and a row's key positions
    /// may exceed its minimum arity), yields only positions inside the
    /// arguments, with or without a parsable key count.
    #[test]
    fn key_positions_stay_inside_the_arguments_for_every_row_and_count() {
        for spec in TABLE {
            for argc in 0..spec.arity.unsigned_abs() as usize + 4 {
                for fill in ["k", "1", "0", "-1", "99999999999999999999", "2"] {
                    let mut a = vec![Bytes::from(spec.name)];
                    a.extend((1..argc).map(|_| Bytes::from(fill)));
                    a.truncate(argc);
                    if let Ok(ps) = spec.key_positions(&a) {
                        assert!(
                            ps.iter().all(|&p| p < a.len() && p > 0),
                            "{} with {argc} args of {fill:?}: {ps:?}",
                            spec.name
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn arity_follows_redis_rules() {
        let get = lookup(b"get").unwrap();
        assert!(get.is_arity_ok(2) && !get.is_arity_ok(1) && !get.is_arity_ok(3));
        let set = lookup(b"set").unwrap();
        assert!(set.is_arity_ok(3) && set.is_arity_ok(6) && !set.is_arity_ok(2));
        assert_eq!(
            arity_error(get),
            "ERR wrong number of arguments for 'get' command"
        );
    }

    #[test]
    fn unknown_command_text_matches_redis_7() {
        assert_eq!(
            unknown_command_error(&args(&["FOO", "a", "b"])),
            "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            unknown_command_error(&args(&["x"])),
            "ERR unknown command 'x', with args beginning with: "
        );
    }
}
