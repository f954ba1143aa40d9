//! The scripts `node_blocking.rs` runs on the built-in node and on a
//! redis-server: commands answered at once (errors at every argument
//! count, wrong types, data already there, short timeouts) and wake-ups
//! (clients blocked first, then the writes that serve them, or not).

/// Each blocking command in a valid form with a short timeout: the
/// argument-count sweep cuts it at every length and adds one argument.
pub const TEMPLATES: &[&[&str]] = &[
    &["BLPOP", "a", "b", "0.01"],
    &["BRPOP", "a", "b", "0.01"],
    &["BRPOPLPUSH", "a", "b", "0.01"],
    &["BLMOVE", "a", "b", "LEFT", "RIGHT", "0.01"],
    &["BLMPOP", "0.01", "2", "a", "b", "LEFT", "COUNT", "2"],
    &["BZPOPMIN", "a", "b", "0.01"],
    &["BZPOPMAX", "a", "b", "0.01"],
    &["BZMPOP", "0.01", "2", "a", "b", "MIN", "COUNT", "2"],
    &["WAIT", "1", "10"],
];

/// Commands answered without a wake-up; each list starts from an empty
/// keyspace on one connection.
pub const IMMEDIATE: &[&[&[&str]]] = &[
    // Timeouts.
    &[
        &["BLPOP", "k", "-1"],
        &["BLPOP", "k", "abc"],
        &["BLPOP", "k", "1e30"],
        &["BLPOP", "k", "inf"],
        &["BLPOP", "k", "-inf"],
        &["BLPOP", "k", "nan"],
        &["BLPOP", "k", " 1"],
        &["BLPOP", "k", "1 "],
        &["BLPOP", "k", "1e400"],
        &["BLPOP", "k", "1e5000"],
        &["BLPOP", "k", "1e-5000"],
        &["BLPOP", "k", "-0.01"],
        &["BLPOP", "k", "."],
        &["BLPOP", "k", "0x"],
        &["BLPOP", "k", "1e-5"],
        &["BLPOP", "k", "1e-400"],
        &["BLPOP", "k", "0x1p-12"],
        &["BLPOP", "k", ".01"],
        &["BLPOP", "k", "+0.01"],
        &["BLPOP", "k", "9223372036854775807"],
        &["BRPOP", "k", "0.02"],
        &["BRPOPLPUSH", "a", "b", "0.02"],
        &["BLMOVE", "a", "b", "LEFT", "LEFT", "0.02"],
        &["BLMOVE", "a", "b", "UP", "LEFT", "x"],
        &["BLMOVE", "a", "b", "LEFT", "UP", "x"],
        &["BLMOVE", "a", "b", "LEFT", "RIGHT", "x"],
        &["BLMPOP", "x", "0", "a", "LEFT"],
        &["BLMPOP", "x", "1", "a", "LEFT"],
        &["BLMPOP", "-1", "1", "a", "LEFT"],
        &["BLMPOP", "0.02", "1", "a", "RIGHT", "COUNT", "3"],
        &[
            "BLMPOP", "0.02", "1", "a", "LEFT", "COUNT", "1", "COUNT", "1",
        ],
        &["BLMPOP", "0.02", "9223372036854775807", "a", "LEFT"],
        &["BZPOPMIN", "z", "0.02"],
        &["BZPOPMAX", "z", "y", "0.02"],
        &["BZMPOP", "x", "0", "z", "MIN"],
        &["BZMPOP", "x", "1", "z", "MIN"],
        &["BZMPOP", "0.02", "1", "z", "MAX", "COUNT", "0"],
        &["BZMPOP", "0.02", "1", "z", "MAX", "COUNT", "2"],
        &["WAIT", "0", "0"],
        &["WAIT", "-5", "0"],
        &["WAIT", "1", "50"],
        &["WAIT", "x", "0"],
        &["WAIT", "1", "-1"],
        &["WAIT", "1", "1.5"],
        &["WAIT", "1", "x"],
    ],
    // Data already there.
    &[
        &["RPUSH", "l", "a", "b", "c", "d", "e"],
        &["BLPOP", "none", "l", "0"],
        &["BRPOP", "l", "none", "0"],
        &["BRPOPLPUSH", "l", "m", "0"],
        &["BLMOVE", "l", "m", "LEFT", "RIGHT", "0"],
        &["BLMOVE", "m", "m", "LEFT", "RIGHT", "0"],
        &["LRANGE", "m", "0", "-1"],
        &["BLMPOP", "0", "2", "none", "m", "RIGHT", "COUNT", "5"],
        &["EXISTS", "m"],
        &["BLMPOP", "0", "1", "l", "LEFT"],
        &["LRANGE", "l", "0", "-1"],
        &["ZADD", "z", "1", "a", "2.5", "b", "3", "c", "-inf", "d"],
        &["BZPOPMIN", "none", "z", "0"],
        &["BZPOPMAX", "z", "0"],
        &["BZMPOP", "0", "2", "none", "z", "MIN", "COUNT", "9"],
        &["EXISTS", "z"],
        &["ZADD", "z", "1e300", "x"],
        &["BZMPOP", "0", "1", "z", "MAX"],
        &["RPUSH", "l", "last"],
        &["BLPOP", "l", "0"],
        &["BLPOP", "l", "0.02"],
    ],
    // Wrong types, in key order.
    &[
        &["SET", "s", "v"],
        &["RPUSH", "l", "x", "y"],
        &["ZADD", "z", "1", "m"],
        &["BLPOP", "s", "0.02"],
        &["BLPOP", "none", "s", "0.02"],
        &["BLPOP", "l", "s", "0.02"],
        &["BLPOP", "z", "0.02"],
        &["BRPOPLPUSH", "s", "d", "0.02"],
        &["BRPOPLPUSH", "l", "s", "0.02"],
        &["BRPOPLPUSH", "none", "s", "0.02"],
        &["BLMOVE", "l", "z", "LEFT", "LEFT", "0.02"],
        &["LLEN", "l"],
        &["BLMPOP", "0.02", "2", "none", "s", "LEFT"],
        &["BZPOPMIN", "l", "0.02"],
        &["BZPOPMAX", "z", "s", "0.02"],
        &["BZMPOP", "0.02", "2", "s", "z", "MIN"],
        &["BZMPOP", "0.02", "1", "z", "MIN"],
    ],
];

/// Clients that block, in order, then writes from another connection.
pub struct Wake {
    /// Run first; `<dump>` in a later argument is the last bulk reply here.
    pub setup: &'static [&'static [&'static str]],
    /// One connection each, blocked one after the other.
    pub blocked: &'static [&'static [&'static str]],
    /// Run once all are blocked; then every blocked client's reply is read.
    pub push: &'static [&'static [&'static str]],
    /// Run after the replies.
    pub after: &'static [&'static [&'static str]],
}

const NONE: &[&[&str]] = &[];

pub const WAKES: &[Wake] = &[
    Wake {
        setup: NONE,
        blocked: &[&["BLPOP", "a", "b", "0"]],
        push: &[&["RPUSH", "b", "x", "y"]],
        after: &[&["LRANGE", "b", "0", "-1"]],
    },
    Wake {
        setup: NONE,
        blocked: &[&["BRPOP", "a", "0"]],
        push: &[&["LPUSH", "a", "x", "y"]],
        after: &[&["LRANGE", "a", "0", "-1"]],
    },
    Wake {
        setup: NONE,
        blocked: &[&["BRPOPLPUSH", "a", "d", "0"]],
        push: &[&["RPUSH", "a", "x", "y"]],
        after: &[&["LRANGE", "a", "0", "-1"], &["LRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: &[&["RPUSH", "d", "old"]],
        blocked: &[&["BLMOVE", "a", "d", "LEFT", "RIGHT", "0"]],
        push: &[&["RPUSH", "a", "x", "y"]],
        after: &[&["LRANGE", "a", "0", "-1"], &["LRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: NONE,
        blocked: &[
            &["BLMPOP", "0", "2", "a", "b", "RIGHT", "COUNT", "2"],
            &["BLPOP", "b", "0"],
        ],
        push: &[&["RPUSH", "b", "1", "2", "3", "4"]],
        after: &[&["LRANGE", "b", "0", "-1"]],
    },
    Wake {
        setup: NONE,
        blocked: &[&["BZPOPMIN", "z1", "z2", "0"], &["BZPOPMAX", "z2", "0"]],
        push: &[&["ZADD", "z2", "1.5", "m", "2", "n", "3", "o"]],
        after: &[&["ZRANGE", "z2", "0", "-1", "WITHSCORES"]],
    },
    Wake {
        setup: NONE,
        blocked: &[&["BZMPOP", "0", "1", "z", "MAX", "COUNT", "5"]],
        push: &[&["ZADD", "z", "1", "m", "2", "n"]],
        after: &[&["EXISTS", "z"]],
    },
    // Every write that makes a key a list or sorted set wakes its waiters.
    Wake {
        setup: &[&["RPUSH", "src", "x"]],
        blocked: &[&["BLPOP", "d", "0"]],
        push: &[&["LMOVE", "src", "d", "LEFT", "RIGHT"]],
        after: &[&["EXISTS", "src", "d"]],
    },
    Wake {
        setup: &[&["RPUSH", "src", "x"]],
        blocked: &[&["BLPOP", "d", "0"]],
        push: &[&["RPOPLPUSH", "src", "d"]],
        after: NONE,
    },
    Wake {
        setup: &[&["RPUSH", "src", "3", "1", "2"]],
        blocked: &[&["BRPOP", "d", "0"]],
        push: &[&["SORT", "src", "STORE", "d"]],
        after: &[&["LRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: &[&["RPUSH", "src", "x"]],
        blocked: &[&["BLPOP", "d", "0"]],
        push: &[&["RENAME", "src", "d"]],
        after: &[&["EXISTS", "src", "d"]],
    },
    Wake {
        setup: &[&["RPUSH", "src", "x", "y"]],
        blocked: &[&["BLPOP", "d", "0"]],
        push: &[&["COPY", "src", "d"]],
        after: &[&["LRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: &[&["RPUSH", "src", "x", "y"], &["DUMP", "src"]],
        blocked: &[&["BLPOP", "d", "0"]],
        push: &[&["RESTORE", "d", "0", "<dump>"]],
        after: &[&["LRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: &[&["ZADD", "s1", "1", "a", "2", "b"]],
        blocked: &[&["BZPOPMIN", "d", "0"]],
        push: &[&["ZUNIONSTORE", "d", "1", "s1"]],
        after: &[&["ZRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: &[&["ZADD", "s1", "1", "a", "2", "b"]],
        blocked: &[&["BZPOPMAX", "d", "0"]],
        push: &[&["ZINTERSTORE", "d", "1", "s1", "WEIGHTS", "3"]],
        after: &[&["ZRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: &[&["ZADD", "s1", "1", "a", "2", "b"]],
        blocked: &[&["BZPOPMIN", "d", "0"]],
        push: &[&["ZRANGESTORE", "d", "s1", "0", "-1"]],
        after: &[&["ZRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: &[&["ZADD", "s1", "1", "a", "2", "b"]],
        blocked: &[&["BZMPOP", "0", "1", "d", "MIN"]],
        push: &[&["ZDIFFSTORE", "d", "1", "s1"]],
        after: &[&["ZRANGE", "d", "0", "-1"]],
    },
    Wake {
        setup: &[&["ZADD", "src", "1", "a", "2", "b"], &["DUMP", "src"]],
        blocked: &[&["BZPOPMAX", "d", "0"]],
        push: &[&["RESTORE", "d", "0", "<dump>"]],
        after: &[&["ZRANGE", "d", "0", "-1"]],
    },
    // A key of another type wakes nobody; the client waits on.
    Wake {
        setup: NONE,
        blocked: &[&["BLPOP", "k", "0"]],
        push: &[&["SET", "k", "v"], &["DEL", "k"], &["RPUSH", "k", "x"]],
        after: &[&["EXISTS", "k"]],
    },
    Wake {
        setup: NONE,
        blocked: &[&["BLPOP", "k", "0.3"]],
        push: &[&["SET", "k", "v"]],
        after: &[&["GET", "k"]],
    },
    Wake {
        setup: NONE,
        blocked: &[&["BZPOPMIN", "k", "0.3"], &["BLPOP", "k", "0"]],
        push: &[&["RPUSH", "k", "x", "y"]],
        after: &[&["LRANGE", "k", "0", "-1"]],
    },
    // A destination of another type: WRONGTYPE, nothing popped.
    Wake {
        setup: &[&["SET", "d", "s"]],
        blocked: &[
            &["BLMOVE", "src", "d", "LEFT", "LEFT", "0"],
            &["BLPOP", "src", "0"],
        ],
        push: &[&["RPUSH", "src", "x"]],
        after: &[&["EXISTS", "src"]],
    },
    // Fewer elements than waiters: first come, first served; the rest wait.
    Wake {
        setup: NONE,
        blocked: &[
            &["BLPOP", "q", "0.3"],
            &["BRPOP", "q", "0.3"],
            &["BLPOP", "q", "0.3"],
        ],
        push: &[&["RPUSH", "q", "x", "y"]],
        after: &[&["EXISTS", "q"]],
    },
    // A chain: each move makes the next key ready.
    Wake {
        setup: NONE,
        blocked: &[
            &["BLMOVE", "a", "b", "LEFT", "RIGHT", "0"],
            &["BRPOPLPUSH", "b", "c", "0"],
            &["BLPOP", "c", "0"],
        ],
        push: &[&["RPUSH", "a", "x"]],
        after: &[&["EXISTS", "a", "b", "c"]],
    },
    Wake {
        setup: NONE,
        blocked: &[&["WAIT", "1", "200"], &["WAIT", "2", "100"]],
        push: &[&["RPUSH", "w", "x"]],
        after: NONE,
    },
];
