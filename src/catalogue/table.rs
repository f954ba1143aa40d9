//! The catalogue's rows: one per command, in the order the README lists
//! them (a command's [`Id`] is its place here). Pure data.

use super::*;

macro_rules! catalogue {
    ($($(#[$doc:meta])* $id:ident = $name:literal, $arity:expr, $keys:expr, $flags:expr;)*) => {
        /// A command's identity: its row in [`TABLE`]. Other tables (the
        /// proxy's policy, the built-in node's handlers) join on it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Id { $($id),* }

        /// Every command shardis knows. Anything else is an unknown command.
        pub static TABLE: &[Command] = &[
            $(Command { id: Id::$id, name: $name, arity: $arity, keys: $keys, flags: $flags }),*
        ];
    };
}

catalogue! {
    // strings
    Get = "get", 2, K1, READONLY | FAST;
    Set = "set", -3, K1, RW;
    Setnx = "setnx", 3, K1, RW | FAST;
    Setex = "setex", 4, K1, RW;
    Psetex = "psetex", 4, K1, RW;
    Getset = "getset", 3, K1, RW | FAST;
    Getdel = "getdel", 2, K1, WRITE | FAST;
    Getex = "getex", -2, K1, WRITE | FAST;
    Append = "append", 3, K1, RW | FAST;
    Strlen = "strlen", 2, K1, READONLY | FAST;
    Getrange = "getrange", 4, K1, READONLY;
    Substr = "substr", 4, K1, READONLY;
    Setrange = "setrange", 4, K1, RW;
    Incr = "incr", 2, K1, RW | FAST;
    Decr = "decr", 2, K1, RW | FAST;
    Incrby = "incrby", 3, K1, RW | FAST;
    Decrby = "decrby", 3, K1, RW | FAST;
    Incrbyfloat = "incrbyfloat", 3, K1, RW | FAST;
    Lcs = "lcs", -3, K12, READONLY;
    Mget = "mget", -2, KALL, READONLY | FAST;
    Mset = "mset", -3, KALL2, RW;
    Msetnx = "msetnx", -3, KALL2, RW;
    // keys
    Del = "del", -2, KALL, WRITE;
    Unlink = "unlink", -2, KALL, WRITE | FAST;
    Exists = "exists", -2, KALL, READONLY | FAST;
    Touch = "touch", -2, KALL, READONLY | FAST;
    Type = "type", 2, K1, READONLY | FAST;
    Expire = "expire", -3, K1, WRITE | FAST;
    Pexpire = "pexpire", -3, K1, WRITE | FAST;
    Expireat = "expireat", -3, K1, WRITE | FAST;
    Pexpireat = "pexpireat", -3, K1, WRITE | FAST;
    Expiretime = "expiretime", 2, K1, READONLY | FAST;
    Pexpiretime = "pexpiretime", 2, K1, READONLY | FAST;
    Ttl = "ttl", 2, K1, READONLY | FAST;
    Pttl = "pttl", 2, K1, READONLY | FAST;
    Persist = "persist", 2, K1, WRITE | FAST;
    Rename = "rename", 3, K12, WRITE;
    Renamenx = "renamenx", 3, K12, WRITE | FAST;
    Copy = "copy", -3, K12, RW;
    Dump = "dump", 2, K1, READONLY;
    Restore = "restore", -4, K1, RW;
    Sort = "sort", -2, KeySpec::Keyword(Keywords::Sort), RW;
    SortRo = "sort_ro", -2, KeySpec::Keyword(Keywords::Sort), READONLY;
    Object = "object", -2, K2, READONLY;
    // bitmaps
    Setbit = "setbit", 4, K1, RW;
    Getbit = "getbit", 3, K1, READONLY | FAST;
    Bitcount = "bitcount", -2, K1, READONLY;
    Bitpos = "bitpos", -3, K1, READONLY;
    Bitfield = "bitfield", -2, K1, RW;
    BitfieldRo = "bitfield_ro", -2, K1, READONLY | FAST;
    Bitop = "bitop", -4, K2ALL, RW;
    // hyperloglog
    Pfadd = "pfadd", -2, K1, RW | FAST;
    Pfcount = "pfcount", -2, KALL, READONLY;
    Pfmerge = "pfmerge", -2, KALL, RW;
    // hashes
    Hset = "hset", -4, K1, RW | FAST;
    Hsetnx = "hsetnx", 4, K1, RW | FAST;
    Hget = "hget", 3, K1, READONLY | FAST;
    Hmset = "hmset", -4, K1, RW | FAST;
    Hmget = "hmget", -3, K1, READONLY | FAST;
    Hdel = "hdel", -3, K1, WRITE | FAST;
    Hlen = "hlen", 2, K1, READONLY | FAST;
    Hstrlen = "hstrlen", 3, K1, READONLY | FAST;
    Hincrby = "hincrby", 4, K1, RW | FAST;
    Hincrbyfloat = "hincrbyfloat", 4, K1, RW | FAST;
    Hkeys = "hkeys", 2, K1, READONLY;
    Hvals = "hvals", 2, K1, READONLY;
    Hgetall = "hgetall", 2, K1, READONLY;
    Hexists = "hexists", 3, K1, READONLY | FAST;
    Hrandfield = "hrandfield", -2, K1, READONLY;
    Hscan = "hscan", -3, K1, READONLY;
    Hexpire = "hexpire", -6, K1, WRITE;
    Hpexpire = "hpexpire", -6, K1, WRITE;
    Hexpireat = "hexpireat", -6, K1, WRITE;
    Hpexpireat = "hpexpireat", -6, K1, WRITE;
    Hpersist = "hpersist", -5, K1, WRITE;
    Httl = "httl", -5, K1, 0;
    Hpttl = "hpttl", -5, K1, 0;
    Hexpiretime = "hexpiretime", -5, K1, 0;
    Hpexpiretime = "hpexpiretime", -5, K1, 0;
    // lists
    Lpush = "lpush", -3, K1, RW | FAST;
    Rpush = "rpush", -3, K1, RW | FAST;
    Lpushx = "lpushx", -3, K1, RW | FAST;
    Rpushx = "rpushx", -3, K1, RW | FAST;
    Linsert = "linsert", 5, K1, RW;
    Lindex = "lindex", 3, K1, READONLY;
    Llen = "llen", 2, K1, READONLY | FAST;
    Lpop = "lpop", -2, K1, WRITE | FAST;
    Rpop = "rpop", -2, K1, WRITE | FAST;
    Lrange = "lrange", 4, K1, READONLY;
    Lrem = "lrem", 4, K1, WRITE;
    Lset = "lset", 4, K1, RW;
    Ltrim = "ltrim", 4, K1, WRITE;
    Lpos = "lpos", -3, K1, READONLY;
    Rpoplpush = "rpoplpush", 3, K12, RW;
    Lmove = "lmove", 5, K12, RW;
    Lmpop = "lmpop", -4, NK1, WRITE;
    // sets
    Sadd = "sadd", -3, K1, RW | FAST;
    Srem = "srem", -3, K1, WRITE | FAST;
    Smembers = "smembers", 2, K1, READONLY;
    Sismember = "sismember", 3, K1, READONLY | FAST;
    Smismember = "smismember", -3, K1, READONLY | FAST;
    Scard = "scard", 2, K1, READONLY | FAST;
    Spop = "spop", -2, K1, WRITE | FAST;
    Srandmember = "srandmember", -2, K1, READONLY;
    Smove = "smove", 4, K12, WRITE | FAST;
    Sinter = "sinter", -2, KALL, READONLY;
    Sinterstore = "sinterstore", -3, KALL, RW;
    Sunion = "sunion", -2, KALL, READONLY;
    Sunionstore = "sunionstore", -3, KALL, RW;
    Sdiff = "sdiff", -2, KALL, READONLY;
    Sdiffstore = "sdiffstore", -3, KALL, RW;
    Sintercard = "sintercard", -3, NK1, READONLY;
    Sscan = "sscan", -3, K1, READONLY;
    // sorted sets
    Zadd = "zadd", -4, K1, RW | FAST;
    Zincrby = "zincrby", 4, K1, RW | FAST;
    Zrem = "zrem", -3, K1, WRITE | FAST;
    Zcard = "zcard", 2, K1, READONLY | FAST;
    Zcount = "zcount", 4, K1, READONLY | FAST;
    Zlexcount = "zlexcount", 4, K1, READONLY | FAST;
    Zscore = "zscore", 3, K1, READONLY | FAST;
    Zmscore = "zmscore", -3, K1, READONLY | FAST;
    Zrank = "zrank", -3, K1, READONLY | FAST;
    Zrevrank = "zrevrank", -3, K1, READONLY | FAST;
    Zrange = "zrange", -4, K1, READONLY;
    Zrangebyscore = "zrangebyscore", -4, K1, READONLY;
    Zrevrangebyscore = "zrevrangebyscore", -4, K1, READONLY;
    Zrangebylex = "zrangebylex", -4, K1, READONLY;
    Zrevrangebylex = "zrevrangebylex", -4, K1, READONLY;
    Zrevrange = "zrevrange", -4, K1, READONLY;
    Zremrangebyrank = "zremrangebyrank", 4, K1, WRITE;
    Zremrangebyscore = "zremrangebyscore", 4, K1, WRITE;
    Zremrangebylex = "zremrangebylex", 4, K1, WRITE;
    Zpopmin = "zpopmin", -2, K1, WRITE | FAST;
    Zpopmax = "zpopmax", -2, K1, WRITE | FAST;
    Zrandmember = "zrandmember", -2, K1, READONLY;
    Zscan = "zscan", -3, K1, READONLY;
    Zrangestore = "zrangestore", -5, K12, RW;
    Zunionstore = "zunionstore", -4, NK2D, RW;
    Zinterstore = "zinterstore", -4, NK2D, RW;
    Zdiffstore = "zdiffstore", -4, NK2D, RW;
    Zunion = "zunion", -3, NK1, READONLY;
    Zinter = "zinter", -3, NK1, READONLY;
    Zdiff = "zdiff", -3, NK1, READONLY;
    Zintercard = "zintercard", -3, NK1, READONLY;
    Zmpop = "zmpop", -4, NK1, WRITE;
    // geo
    Geoadd = "geoadd", -5, K1, RW;
    Geodist = "geodist", -4, K1, READONLY;
    Geohash = "geohash", -2, K1, READONLY;
    Geopos = "geopos", -2, K1, READONLY;
    Geosearch = "geosearch", -7, K1, READONLY;
    Geosearchstore = "geosearchstore", -8, K12, RW;
    Georadius = "georadius", -6, KeySpec::Keyword(Keywords::GeoRadius { options_at: 6 }), RW;
    Georadiusbymember = "georadiusbymember", -5, KeySpec::Keyword(Keywords::GeoRadius { options_at: 5 }), RW;
    GeoradiusRo = "georadius_ro", -6, K1, READONLY;
    GeoradiusbymemberRo = "georadiusbymember_ro", -5, K1, READONLY;
    // streams (XGROUP and XINFO: subcommand first, key second)
    Xadd = "xadd", -5, K1, RW | FAST;
    Xlen = "xlen", 2, K1, READONLY | FAST;
    Xrange = "xrange", -4, K1, READONLY;
    Xrevrange = "xrevrange", -4, K1, READONLY;
    Xdel = "xdel", -3, K1, WRITE | FAST;
    Xtrim = "xtrim", -4, K1, WRITE;
    Xack = "xack", -4, K1, WRITE | FAST;
    Xclaim = "xclaim", -6, K1, WRITE | FAST;
    Xautoclaim = "xautoclaim", -6, K1, WRITE | FAST;
    Xpending = "xpending", -3, K1, READONLY;
    Xsetid = "xsetid", -3, K1, RW | FAST;
    Xgroup = "xgroup", -2, K2, RW;
    Xinfo = "xinfo", -2, K2, READONLY;
    Xread = "xread", -4, KeySpec::Keyword(Keywords::Streams), READONLY | BLOCKING;
    Xreadgroup = "xreadgroup", -7, KeySpec::Keyword(Keywords::Streams), RW | BLOCKING;
    // scripting: routed by the keys it declares
    Eval = "eval", -3, NK2, WRITE;
    Evalsha = "evalsha", -3, NK2, WRITE;
    EvalRo = "eval_ro", -3, NK2, 0;
    EvalshaRo = "evalsha_ro", -3, NK2, 0;
    Fcall = "fcall", -3, NK2, WRITE;
    FcallRo = "fcall_ro", -3, NK2, 0;
    Script = "script", -2, NONE, WRITE;
    // fan-out
    Dbsize = "dbsize", 1, NONE, READONLY | FAST;
    Flushall = "flushall", -1, NONE, WRITE;
    Flushdb = "flushdb", -1, NONE, WRITE;
    Keys = "keys", 2, NONE, READONLY;
    Scan = "scan", -2, NONE, READONLY;
    Randomkey = "randomkey", 1, NONE, READONLY;
    // answered by the proxy
    Ping = "ping", -1, NONE, FAST;
    Echo = "echo", 2, NONE, FAST;
    Quit = "quit", -1, NONE, FAST;
    Hello = "hello", -1, NONE, FAST;
    Auth = "auth", -2, NONE, FAST;
    Select = "select", 2, NONE, FAST;
    Client = "client", -2, NONE, 0;
    Command = "command", -1, NONE, 0;
    Info = "info", -1, NONE, 0;
    Config = "config", -2, NONE, 0;
    Time = "time", 1, NONE, FAST;
    Readonly = "readonly", 1, NONE, 0;
    Readwrite = "readwrite", 1, NONE, 0;
    Asking = "asking", 1, NONE, 0;
    Reset = "reset", 1, NONE, FAST;
    Monitor = "monitor", 1, NONE, 0;
    Memory = "memory", -2, NONE, READONLY;
    // administration
    Cluster = "cluster", -2, NONE, 0;
    // transactions
    Multi = "multi", 1, NONE, FAST;
    Exec = "exec", 1, NONE, 0;
    Discard = "discard", 1, NONE, FAST;
    Watch = "watch", -2, KALL, FAST;
    Unwatch = "unwatch", 1, NONE, FAST;
    // pub/sub
    Subscribe = "subscribe", -2, NONE, 0;
    Unsubscribe = "unsubscribe", -1, NONE, 0;
    Psubscribe = "psubscribe", -2, NONE, 0;
    Punsubscribe = "punsubscribe", -1, NONE, 0;
    Ssubscribe = "ssubscribe", -2, KALL, 0;
    Sunsubscribe = "sunsubscribe", -1, KALL, 0;
    Publish = "publish", 3, NONE, FAST;
    Spublish = "spublish", 3, K1, FAST;
    Pubsub = "pubsub", -2, NONE, 0;
    Blpop = "blpop", -3, KeySpec::Range { first: 1, last: -2, step: 1 }, WRITE | BLOCKING;
    Brpop = "brpop", -3, KeySpec::Range { first: 1, last: -2, step: 1 }, WRITE | BLOCKING;
    Brpoplpush = "brpoplpush", 4, K12, RW | BLOCKING;
    Blmove = "blmove", 6, K12, RW | BLOCKING;
    Blmpop = "blmpop", -5, KeySpec::NumKeys { count_at: 2, dest: None }, WRITE | BLOCKING;
    Bzpopmin = "bzpopmin", -3, KeySpec::Range { first: 1, last: -2, step: 1 }, WRITE | FAST | BLOCKING;
    Bzpopmax = "bzpopmax", -3, KeySpec::Range { first: 1, last: -2, step: 1 }, WRITE | FAST | BLOCKING;
    Bzmpop = "bzmpop", -5, KeySpec::NumKeys { count_at: 2, dest: None }, WRITE | BLOCKING;
    Wait = "wait", 3, NONE, 0;
    Move = "move", 3, NONE, 0;
    Swapdb = "swapdb", 3, NONE, 0;
    Migrate = "migrate", -6, K3, WRITE;
    Save = "save", 1, NONE, 0;
    Bgsave = "bgsave", -1, NONE, 0;
    Bgrewriteaof = "bgrewriteaof", 1, NONE, 0;
    Lastsave = "lastsave", 1, NONE, FAST;
    Shutdown = "shutdown", -1, NONE, 0;
    Debug = "debug", -2, NONE, 0;
    Slaveof = "slaveof", 3, NONE, 0;
    Replicaof = "replicaof", 3, NONE, 0;
    Sync = "sync", 1, NONE, 0;
    Psync = "psync", -3, NONE, 0;
    Failover = "failover", -1, NONE, 0;
    Slowlog = "slowlog", -2, NONE, 0;
    Latency = "latency", -2, NONE, 0;
    Acl = "acl", -2, NONE, 0;
    Module = "module", -2, NONE, 0;
    Function = "function", -2, NONE, 0;
    Role = "role", 1, NONE, 0;
    Lolwut = "lolwut", -1, NONE, 0;
    Pfdebug = "pfdebug", 3, NONE, 0;
    Pfselftest = "pfselftest", 1, NONE, 0;
    Replconf = "replconf", -1, NONE, 0;
    RestoreAsking = "restore-asking", -4, NONE, 0;
}
