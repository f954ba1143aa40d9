//! The node's command table: every command it knows, with its arity,
//! flags, key positions and handler, and the name lookup.
//!
//! The single source of truth for what the node serves; `dispatch` (in
//! `mod.rs`) reads it for every request, `COMMAND` reports it, and
//! [`not_served`] compares it with the proxy's table. Never runs anything.

use super::*;
use std::sync::LazyLock;

/// How a command runs.
#[derive(Clone, Copy)]
pub(crate) enum Run {
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
pub(crate) const DENYOOM: u8 = 1;
/// Changes the keyspace.
pub(crate) const WRITE: u8 = 2;
/// Only reads the keyspace.
pub(crate) const READONLY: u8 = 4;
/// O(1) or O(log n).
pub(crate) const FAST: u8 = 8;
/// May block the connection.
pub(crate) const BLOCKING: u8 = 16;

/// One row of the command table: the single source of truth for names,
/// arity (Redis convention: negative = at least), flags and key positions.
pub(crate) struct Command {
    /// Lower-case name.
    pub(crate) name: &'static str,
    /// Exact argument count including the name, or minimum if negative.
    pub(crate) arity: i32,
    /// `DENYOOM | WRITE | READONLY | FAST`
    pub(crate) flags: u8,
    /// First key position, last (negative counts from the end), step.
    pub(crate) keys: (i32, i32, i32),
    /// The handler.
    pub(crate) run: Run,
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
pub(crate) static COMMANDS: &[Command] = &[
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
    // geo (sorted sets of geohash scores)
    cmd!("geoadd", -5, RW, KEY1, geo::geoadd),
    cmd!("geodist", -4, READONLY, KEY1, geo::geodist),
    cmd!("geohash", -2, READONLY, KEY1, geo::geohash),
    cmd!("geopos", -2, READONLY, KEY1, geo::geopos),
    cmd!("georadius", -6, RW, KEY1, geosearch::georadius),
    cmd!("georadius_ro", -6, READONLY, KEY1, geosearch::georadius_ro),
    cmd!(
        "georadiusbymember",
        -5,
        RW,
        KEY1,
        geosearch::georadiusbymember
    ),
    cmd!(
        "georadiusbymember_ro",
        -5,
        READONLY,
        KEY1,
        geosearch::georadiusbymember_ro
    ),
    cmd!("geosearch", -7, READONLY, KEY1, geosearch::geosearch),
    cmd!(
        "geosearchstore",
        -8,
        RW,
        (1, 2, 1),
        geosearch::geosearchstore
    ),
    cmd!("sort", -2, RW, KEY1, sort::sort),
    cmd!("sort_ro", -2, READONLY, KEY1, sort::sort_ro),
    // streams
    cmd!("xadd", -5, RW | FAST, KEY1, streams::xadd),
    cmd!("xlen", 2, READONLY | FAST, KEY1, streams::xlen),
    cmd!("xrange", -4, READONLY, KEY1, streams::xrange),
    cmd!("xrevrange", -4, READONLY, KEY1, streams::xrevrange),
    cmd!("xdel", -3, WRITE | FAST, KEY1, streams::xdel),
    cmd!("xtrim", -4, WRITE, KEY1, streams::xtrim),
    cmd!("xsetid", -3, RW | FAST, KEY1, streams::xsetid),
    blocking!(
        "xread",
        -4,
        READONLY | BLOCKING,
        NOKEYS,
        streams_read::xread
    ),
    blocking!(
        "xreadgroup",
        -7,
        RW | BLOCKING,
        NOKEYS,
        streams_read::xreadgroup
    ),
    cmd!("xgroup", -2, RW, (2, 2, 1), streams_group::xgroup),
    cmd!("xack", -4, WRITE | FAST, KEY1, streams_group::xack),
    cmd!("xpending", -3, READONLY, KEY1, streams_group::xpending),
    cmd!("xclaim", -6, WRITE | FAST, KEY1, streams_claim::xclaim),
    cmd!(
        "xautoclaim",
        -6,
        WRITE | FAST,
        KEY1,
        streams_claim::xautoclaim
    ),
    cmd!("xinfo", -2, READONLY, (2, 2, 1), streams_info::xinfo),
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
pub(crate) fn lookup(name: &[u8]) -> Option<&'static Command> {
    BY_NAME.get(name)
}

/// A Redis command the proxy routes (it is in the proxy's command table)
/// that this node does not implement: its lower-case name, so the error can
/// say which backends serve it instead of calling it unknown. Derived from
/// the two tables, so it stays true as either grows; CLUSTER is the
/// proxy's own and is left to the generic error.
pub(crate) fn not_served(name: &[u8]) -> Option<&'static str> {
    let spec = crate::resp::lookup(name)?;
    (lookup(name).is_none() && spec.kind != crate::resp::Kind::Admin).then_some(spec.name)
}
