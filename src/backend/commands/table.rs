//! The node's column of the command catalogue: the handler of every
//! command the node serves, joined to the catalogue row (name, arity,
//! flags, keys) by command id, and the lookup by name.
//!
//! `dispatch` (in `mod.rs`) reads it for every request, `COMMAND` reports
//! it, and [`not_served`] names what the catalogue knows but the node does
//! not serve. Never runs anything.

use super::*;
use crate::backend::replication;
use crate::backend::scripting;
use crate::backend::value::stream::Stream;
use crate::backend::value::zset::ZSet;
use crate::backend::value::{Hash, List, Set};
use std::ops::Deref;
use std::sync::LazyLock;

use crate::catalogue::{self, Id, Id::*};
pub use crate::catalogue::{BLOCKING, DENYOOM, FAST, READONLY, WRITE};

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
    /// A script (EVAL, FCALL): in place, with the node's gate held
    /// exclusively (see `backend::scripting`).
    Script(fn(&mut Ctx, &[&[u8]]) -> CmdResult),
}

/// One row of the node's table: a catalogue row and its handler.
pub(crate) struct Command {
    pub(crate) id: Id,
    /// The handler.
    pub(crate) run: Run,
}

impl Deref for Command {
    type Target = catalogue::Command;

    fn deref(&self) -> &catalogue::Command {
        &catalogue::TABLE[self.id as usize]
    }
}

impl Command {
    /// First key position, last (negative counts from the end), step, as
    /// Redis's COMMAND reports them.
    pub fn key_range(&self) -> (i32, i32, i32) {
        self.keys.first_last_step()
    }
}

const fn sync(id: Id, f: fn(&mut Ctx, &[&[u8]]) -> CmdResult) -> Command {
    Command {
        id,
        run: Run::Sync(f),
    }
}

const fn block(id: Id, f: fn(&mut Ctx, &[&[u8]]) -> blocking::BlockResult) -> Command {
    Command {
        id,
        run: Run::Block(f),
    }
}

const fn row(id: Id, run: Run) -> Command {
    Command { id, run }
}

/// Every command the node serves.
pub(crate) static COMMANDS: &[Command] = &[
    // connection
    sync(Ping, connection::ping),
    sync(Echo, connection::echo),
    sync(Quit, connection::quit),
    sync(Hello, connection::hello),
    sync(Select, connection::select),
    sync(Client, connection::client),
    sync(Auth, connection::auth),
    sync(Reset, connection::reset),
    // transactions
    sync(Multi, multi::multi),
    row(Exec, Run::Exec),
    sync(Discard, multi::discard),
    sync(Watch, multi::watch),
    sync(Unwatch, multi::unwatch),
    // server
    sync(Command, server::command),
    sync(Info, info::info),
    sync(Dbsize, server::dbsize),
    sync(Flushdb, server::flush),
    sync(Flushall, server::flush),
    sync(Config, config::config),
    sync(Time, server::time),
    sync(Lastsave, server::lastsave),
    // Redis does not flag WAIT as blocking (COMMAND INFO), though it waits.
    sync(Wait, replication::commands::wait),
    sync(Replicaof, replication::commands::replicaof),
    sync(Slaveof, replication::commands::replicaof),
    sync(Role, replication::commands::role),
    sync(Replconf, replication::commands::replconf),
    sync(Psync, replication::commands::psync),
    sync(Sync, replication::commands::psync),
    // strings
    sync(Get, strings::get),
    sync(Set, strings::set),
    sync(Setnx, strings::setnx),
    sync(Setex, strings::setex),
    sync(Psetex, strings::psetex),
    sync(Getset, strings::getset),
    sync(Getdel, strings::getdel),
    sync(Getex, strings::getex),
    sync(Mget, strings::mget),
    sync(Mset, strings::mset),
    sync(Msetnx, strings::msetnx),
    sync(Append, strings::append),
    sync(Strlen, strings::strlen),
    sync(Getrange, strings::getrange),
    sync(Substr, strings::getrange),
    sync(Setrange, strings::setrange),
    sync(Incr, counters::incr),
    sync(Decr, counters::decr),
    sync(Incrby, counters::incrby),
    sync(Decrby, counters::decrby),
    sync(Incrbyfloat, counters::incrbyfloat),
    sync(Lcs, lcs::lcs),
    // bitmaps
    sync(Setbit, bits::setbit),
    sync(Getbit, bits::getbit),
    sync(Bitcount, bits::bitcount),
    sync(Bitpos, bits::bitpos),
    sync(Bitop, bits::bitop),
    sync(Bitfield, bitfield::bitfield),
    sync(BitfieldRo, bitfield::bitfield_ro),
    // hyperloglog
    sync(Pfadd, hll::pfadd),
    sync(Pfcount, hll::pfcount),
    sync(Pfmerge, hll::pfmerge),
    // hashes
    sync(Hset, hashes::hset),
    sync(Hsetnx, hashes::hsetnx),
    sync(Hmset, hashes::hmset),
    sync(Hget, hashes::hget),
    sync(Hmget, hashes::hmget),
    sync(Hdel, elements::remove::<Hash>),
    sync(Hlen, elements::len::<Hash>),
    sync(Hstrlen, hashes::hstrlen),
    sync(Hincrby, hashes::hincrby),
    sync(Hincrbyfloat, hashes::hincrbyfloat),
    sync(Hkeys, hashes::hkeys),
    sync(Hvals, hashes::hvals),
    sync(Hgetall, hashes::hgetall),
    sync(Hexists, hashes::hexists),
    sync(Hrandfield, hashes::hrandfield),
    sync(Hscan, elem_scan::hscan),
    // lists
    sync(Lpush, lists::lpush),
    sync(Rpush, lists::rpush),
    sync(Lpushx, lists::lpushx),
    sync(Rpushx, lists::rpushx),
    sync(Linsert, lists::linsert),
    sync(Lindex, lists::lindex),
    sync(Llen, elements::len::<List>),
    sync(Lpop, lists::lpop),
    sync(Rpop, lists::rpop),
    sync(Lrange, lists::lrange),
    sync(Lrem, lists::lrem),
    sync(Lset, lists::lset),
    sync(Ltrim, lists::ltrim),
    sync(Lpos, lists::lpos),
    sync(Rpoplpush, lists::rpoplpush),
    sync(Lmove, lists::lmove),
    sync(Lmpop, lists::lmpop),
    block(Blpop, blocking::blpop),
    block(Brpop, blocking::brpop),
    block(Brpoplpush, blocking::brpoplpush),
    block(Blmove, blocking::blmove),
    block(Blmpop, blocking::blmpop),
    // sets
    sync(Sadd, sets::sadd),
    sync(Srem, elements::remove::<Set>),
    sync(Smembers, sets::smembers),
    sync(Sismember, sets::sismember),
    sync(Smismember, sets::smismember),
    sync(Scard, elements::len::<Set>),
    sync(Spop, sets::spop),
    sync(Srandmember, sets::srandmember),
    sync(Smove, sets::smove),
    sync(Sinter, sets::sinter),
    sync(Sinterstore, sets::sinterstore),
    sync(Sunion, sets::sunion),
    sync(Sunionstore, sets::sunionstore),
    sync(Sdiff, sets::sdiff),
    sync(Sdiffstore, sets::sdiffstore),
    sync(Sintercard, sets::sintercard),
    sync(Sscan, elem_scan::sscan),
    // sorted sets
    sync(Zadd, zsets::zadd),
    sync(Zincrby, zsets::zincrby),
    sync(Zrem, elements::remove::<ZSet>),
    sync(Zcard, elements::len::<ZSet>),
    sync(Zcount, zsets::zcount),
    sync(Zlexcount, zsets::zlexcount),
    sync(Zscore, zsets::zscore),
    sync(Zmscore, zsets::zmscore),
    sync(Zrank, zsets::zrank),
    sync(Zrevrank, zsets::zrevrank),
    sync(Zrange, zrange::zrange),
    sync(Zrangestore, zrange::zrangestore),
    sync(Zrevrange, zrange::zrevrange),
    sync(Zrangebyscore, zrange::zrangebyscore),
    sync(Zrevrangebyscore, zrange::zrevrangebyscore),
    sync(Zrangebylex, zrange::zrangebylex),
    sync(Zrevrangebylex, zrange::zrevrangebylex),
    sync(Zremrangebyrank, zrange::zremrangebyrank),
    sync(Zremrangebyscore, zrange::zremrangebyscore),
    sync(Zremrangebylex, zrange::zremrangebylex),
    sync(Zpopmin, zsets::zpopmin),
    sync(Zpopmax, zsets::zpopmax),
    sync(Zmpop, zsets::zmpop),
    block(Bzpopmin, blocking::bzpopmin),
    block(Bzpopmax, blocking::bzpopmax),
    block(Bzmpop, blocking::bzmpop),
    sync(Zrandmember, zsets::zrandmember),
    sync(Zscan, elem_scan::zscan),
    sync(Zunion, zstore::zunion),
    sync(Zinter, zstore::zinter),
    sync(Zdiff, zstore::zdiff),
    sync(Zunionstore, zstore::zunionstore),
    sync(Zinterstore, zstore::zinterstore),
    sync(Zdiffstore, zstore::zdiffstore),
    sync(Zintercard, zstore::zintercard),
    // geo (sorted sets of geohash scores)
    sync(Geoadd, geo::geoadd),
    sync(Geodist, geo::geodist),
    sync(Geohash, geo::geohash),
    sync(Geopos, geo::geopos),
    sync(Georadius, geosearch::georadius),
    sync(GeoradiusRo, geosearch::georadius_ro),
    sync(Georadiusbymember, geosearch::georadiusbymember),
    sync(GeoradiusbymemberRo, geosearch::georadiusbymember_ro),
    sync(Geosearch, geosearch::geosearch),
    sync(Geosearchstore, geosearch::geosearchstore),
    sync(Sort, sort::sort),
    sync(SortRo, sort::sort_ro),
    // streams
    sync(Xadd, streams::xadd),
    sync(Xlen, elements::len::<Stream>),
    sync(Xrange, streams::xrange),
    sync(Xrevrange, streams::xrevrange),
    sync(Xdel, streams::xdel),
    sync(Xtrim, streams::xtrim),
    sync(Xsetid, streams::xsetid),
    block(Xread, streams_read::xread),
    block(Xreadgroup, streams_read::xreadgroup),
    sync(Xgroup, streams_group::xgroup),
    sync(Xack, streams_group::xack),
    sync(Xpending, streams_group::xpending),
    sync(Xclaim, streams_claim::xclaim),
    sync(Xautoclaim, streams_claim::xautoclaim),
    sync(Xinfo, streams_info::xinfo),
    // keys
    sync(Del, keys::del),
    sync(Unlink, keys::del),
    sync(Exists, keys::exists),
    sync(Touch, keys::touch),
    sync(Type, keys::type_),
    sync(Expire, keys::expire),
    sync(Pexpire, keys::pexpire),
    sync(Expireat, keys::expireat),
    sync(Pexpireat, keys::pexpireat),
    sync(Ttl, keys::ttl),
    sync(Pttl, keys::pttl),
    sync(Expiretime, keys::expiretime),
    sync(Pexpiretime, keys::pexpiretime),
    sync(Persist, keys::persist),
    sync(Scan, keys::scan),
    sync(Keys, keys::keys),
    sync(Randomkey, keys::randomkey),
    sync(Rename, object::rename),
    sync(Renamenx, object::renamenx),
    sync(Copy, object::copy),
    sync(Object, object::object),
    sync(Memory, object::memory),
    sync(Subscribe, pubsub::subscribe),
    sync(Unsubscribe, pubsub::unsubscribe),
    sync(Psubscribe, pubsub::psubscribe),
    sync(Punsubscribe, pubsub::punsubscribe),
    sync(Ssubscribe, pubsub::ssubscribe),
    sync(Sunsubscribe, pubsub::sunsubscribe),
    sync(Publish, pubsub::publish),
    sync(Spublish, pubsub::spublish),
    sync(Pubsub, pubsub::pubsub),
    // scripting
    row(Eval, Run::Script(scripting::eval)),
    row(Evalsha, Run::Script(scripting::evalsha)),
    row(EvalRo, Run::Script(scripting::eval_ro)),
    row(EvalshaRo, Run::Script(scripting::evalsha_ro)),
    sync(Script, scripting::script),
    row(Fcall, Run::Script(scripting::fcall)),
    row(FcallRo, Run::Script(scripting::fcall_ro)),
    sync(Function, scripting::function),
    // migration
    sync(Dump, migrate::dump),
    sync(Restore, migrate::restore),
    row(Migrate, Run::Migrate),
];

/// The node's rows by command id (`None`: the node does not serve it).
static BY_ID: LazyLock<Vec<Option<&'static Command>>> = LazyLock::new(|| {
    let mut by_id = vec![None; catalogue::TABLE.len()];
    for c in COMMANDS {
        by_id[c.id as usize] = Some(c);
    }
    by_id
});

/// Looks a command up by name, any case, without allocating.
pub(crate) fn lookup(name: &[u8]) -> Option<&'static Command> {
    BY_ID[catalogue::lookup(name)?.id as usize]
}

/// A Redis command the catalogue knows (the proxy routes it) that this
/// node does not implement: its lower-case name, so the error can say which
/// backends serve it instead of calling it unknown. Derived from the two
/// tables, so it stays true as either grows; CLUSTER is the proxy's own and
/// is left to the generic error.
pub(crate) fn not_served(name: &[u8]) -> Option<&'static str> {
    let c = catalogue::lookup(name)?;
    (BY_ID[c.id as usize].is_none() && c.id != Id::Cluster).then_some(c.name)
}
