//! Random sequences of list, set, sorted-set and hash commands give the
//! same replies on a built-in node and on redis-server (a bounded property
//! test). Keys are shared between types so WRONGTYPE paths are exercised.
//! Where Redis's reply order is its hash-table order the elements are
//! compared as a multiset; random picks (SRANDMEMBER, HRANDFIELD,
//! ZRANDMEMBER) are compared by count, and each pick must be a member.

mod common;

use common::{free_port, have_tool, start_node, start_redis, Raw};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// How a step's replies are compared.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    Exact,
    Unordered,
    /// Count only; every element must be in the node's collection read by
    /// the given command.
    Picks(&'static str),
}

type Step = (Vec<String>, Cmp);

fn key() -> impl Strategy<Value = String> {
    prop_oneof![Just("k0"), Just("k1"), Just("k2")].prop_map(String::from)
}

fn member() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a"),
        Just("b"),
        Just("c"),
        Just("1"),
        Just("2"),
        Just("10"),
        Just("-3")
    ]
    .prop_map(String::from)
}

fn int() -> impl Strategy<Value = String> {
    (-4i64..6).prop_map(|i| i.to_string())
}

fn score() -> impl Strategy<Value = String> {
    prop_oneof![
        (-3i64..4).prop_map(|i| i.to_string()),
        Just("1.5".to_string()),
        Just("-inf".to_string()),
        Just("+inf".to_string()),
        Just("(1".to_string()),
    ]
}

fn cmd(parts: Vec<String>, how: Cmp) -> Step {
    (parts, how)
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn list_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            prop_oneof![Just("LPUSH"), Just("RPUSH"), Just("LPUSHX")],
            key(),
            member(),
            member()
        )
            .prop_map(|(c, k, a, b)| cmd(s(&[c, &k, &a, &b]), Cmp::Exact)),
        (prop_oneof![Just("LPOP"), Just("RPOP")], key(), 0i64..4)
            .prop_map(|(c, k, n)| cmd(s(&[c, &k, &n.to_string()]), Cmp::Exact)),
        (key(), int(), int()).prop_map(|(k, a, b)| cmd(s(&["LRANGE", &k, &a, &b]), Cmp::Exact)),
        (key(), int(), member()).prop_map(|(k, n, m)| cmd(s(&["LREM", &k, &n, &m]), Cmp::Exact)),
        (key(), int(), member()).prop_map(|(k, n, m)| cmd(s(&["LSET", &k, &n, &m]), Cmp::Exact)),
        (key(), int(), int()).prop_map(|(k, a, b)| cmd(s(&["LTRIM", &k, &a, &b]), Cmp::Exact)),
        (key(), int()).prop_map(|(k, i)| cmd(s(&["LINDEX", &k, &i]), Cmp::Exact)),
        (key(), member(), member())
            .prop_map(|(k, p, m)| cmd(s(&["LINSERT", &k, "BEFORE", &p, &m]), Cmp::Exact)),
        (key(), member(), 1i64..3).prop_map(|(k, m, r)| {
            cmd(
                s(&["LPOS", &k, &m, "RANK", &(-r).to_string(), "COUNT", "0"]),
                Cmp::Exact,
            )
        }),
        (key(), key()).prop_map(|(a, b)| cmd(s(&["LMOVE", &a, &b, "LEFT", "RIGHT"]), Cmp::Exact)),
        (key(), key()).prop_map(|(a, b)| cmd(
            s(&["LMPOP", "2", &a, &b, "RIGHT", "COUNT", "2"]),
            Cmp::Exact
        )),
        key().prop_map(|k| cmd(s(&["LLEN", &k]), Cmp::Exact)),
    ]
}

fn set_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (key(), member(), member()).prop_map(|(k, a, b)| cmd(s(&["SADD", &k, &a, &b]), Cmp::Exact)),
        (key(), member()).prop_map(|(k, a)| cmd(s(&["SREM", &k, &a]), Cmp::Exact)),
        (key(), member()).prop_map(|(k, a)| cmd(s(&["SISMEMBER", &k, &a]), Cmp::Exact)),
        key().prop_map(|k| cmd(s(&["SMEMBERS", &k]), Cmp::Unordered)),
        key().prop_map(|k| cmd(s(&["SCARD", &k]), Cmp::Exact)),
        (
            prop_oneof![Just("SINTER"), Just("SUNION"), Just("SDIFF")],
            key(),
            key()
        )
            .prop_map(|(c, a, b)| cmd(s(&[c, &a, &b]), Cmp::Unordered)),
        (
            prop_oneof![Just("SINTERSTORE"), Just("SUNIONSTORE"), Just("SDIFFSTORE")],
            key(),
            key(),
            key()
        )
            .prop_map(|(c, d, a, b)| cmd(s(&[c, &d, &a, &b]), Cmp::Exact)),
        (key(), key(), member()).prop_map(|(a, b, m)| cmd(s(&["SMOVE", &a, &b, &m]), Cmp::Exact)),
        key().prop_map(|k| cmd(s(&["SPOP", &k, "100"]), Cmp::Unordered)),
        (key(), -4i64..5).prop_map(|(k, n)| cmd(
            s(&["SRANDMEMBER", &k, &n.to_string()]),
            Cmp::Picks("SMEMBERS")
        )),
        (key(), key()).prop_map(|(a, b)| cmd(s(&["SINTERCARD", "2", &a, &b]), Cmp::Exact)),
    ]
}

fn zset_step() -> impl Strategy<Value = Step> {
    let flag = prop_oneof![
        Just(""),
        Just("NX"),
        Just("XX"),
        Just("GT"),
        Just("LT"),
        Just("CH")
    ];
    prop_oneof![
        (key(), flag, (-3i64..4), member()).prop_map(|(k, f, sc, m)| {
            let mut v = s(&["ZADD", &k]);
            if !f.is_empty() {
                v.push(f.into());
            }
            v.extend(s(&[&sc.to_string(), &m]));
            cmd(v, Cmp::Exact)
        }),
        (key(), member()).prop_map(|(k, m)| cmd(s(&["ZINCRBY", &k, "1.5", &m]), Cmp::Exact)),
        (key(), member()).prop_map(|(k, m)| cmd(s(&["ZREM", &k, &m]), Cmp::Exact)),
        (key(), member()).prop_map(|(k, m)| cmd(s(&["ZSCORE", &k, &m]), Cmp::Exact)),
        (key(), member()).prop_map(|(k, m)| cmd(s(&["ZREVRANK", &k, &m]), Cmp::Exact)),
        (key(), int(), int())
            .prop_map(|(k, a, b)| cmd(s(&["ZRANGE", &k, &a, &b, "WITHSCORES"]), Cmp::Exact)),
        (key(), score(), score()).prop_map(|(k, a, b)| {
            cmd(
                s(&["ZRANGE", &k, &a, &b, "BYSCORE", "LIMIT", "0", "3"]),
                Cmp::Exact,
            )
        }),
        (key(), score(), score())
            .prop_map(|(k, a, b)| cmd(s(&["ZREVRANGEBYSCORE", &k, &b, &a]), Cmp::Exact)),
        (key(), score(), score()).prop_map(|(k, a, b)| cmd(s(&["ZCOUNT", &k, &a, &b]), Cmp::Exact)),
        (key(), score(), score())
            .prop_map(|(k, a, b)| cmd(s(&["ZREMRANGEBYSCORE", &k, &a, &b]), Cmp::Exact)),
        (key(), 0i64..3).prop_map(|(k, n)| cmd(s(&["ZPOPMIN", &k, &n.to_string()]), Cmp::Exact)),
        (
            prop_oneof![Just("ZUNIONSTORE"), Just("ZINTERSTORE")],
            key(),
            key(),
            key(),
            prop_oneof![Just("SUM"), Just("MIN"), Just("MAX")]
        )
            .prop_map(|(c, d, a, b, agg)| {
                cmd(
                    s(&[c, &d, "2", &a, &b, "WEIGHTS", "2", "1", "AGGREGATE", agg]),
                    Cmp::Exact,
                )
            }),
        (key(), key()).prop_map(|(a, b)| cmd(s(&["ZDIFF", "2", &a, &b, "WITHSCORES"]), Cmp::Exact)),
        (key(), -4i64..5).prop_map(|(k, n)| {
            cmd(
                s(&["ZRANDMEMBER", &k, &n.to_string()]),
                Cmp::Picks("ZRANGE 0 -1"),
            )
        }),
    ]
}

fn hash_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (key(), member(), member(), member())
            .prop_map(|(k, f, v, g)| cmd(s(&["HSET", &k, &f, &v, &g, &v]), Cmp::Exact)),
        (key(), member()).prop_map(|(k, f)| cmd(s(&["HDEL", &k, &f]), Cmp::Exact)),
        (key(), member(), int()).prop_map(|(k, f, n)| cmd(s(&["HINCRBY", &k, &f, &n]), Cmp::Exact)),
        key().prop_map(|k| cmd(s(&["HGETALL", &k]), Cmp::Exact)),
        (key(), member(), member())
            .prop_map(|(k, a, b)| cmd(s(&["HMGET", &k, &a, &b]), Cmp::Exact)),
        key().prop_map(|k| cmd(s(&["HLEN", &k]), Cmp::Exact)),
        (key(), -4i64..5)
            .prop_map(|(k, n)| cmd(s(&["HRANDFIELD", &k, &n.to_string()]), Cmp::Picks("HKEYS"))),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        list_step(),
        set_step(),
        zset_step(),
        hash_step(),
        key().prop_map(|k| cmd(s(&["TYPE", &k]), Cmp::Exact)),
        key().prop_map(|k| cmd(s(&["DEL", &k]), Cmp::Exact)),
    ]
}

/// The elements of an aggregate reply, after its header line.
fn elements(reply: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let eol = reply.windows(2).position(|w| w == b"\r\n").unwrap_or(0);
    let header = reply[..eol + 2].to_vec();
    if !matches!(reply.first(), Some(b'*' | b'~')) {
        return (reply.to_vec(), Vec::new());
    }
    let n: i64 = std::str::from_utf8(&reply[1..eol])
        .unwrap()
        .parse()
        .unwrap();
    let mut rest = &reply[eol + 2..];
    let mut out = Vec::new();
    for _ in 0..n.max(0) {
        let len = shardis::resp::reply_len(rest).unwrap().unwrap();
        out.push(rest[..len].to_vec());
        rest = &rest[len..];
    }
    (header, out)
}

fn call(c: &mut Raw, args: &[String]) -> Vec<u8> {
    let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    c.call_bytes(&a)
}

#[test]
fn random_collection_commands_reply_as_redis_server_does() {
    if !have_tool("redis-server") {
        return;
    }
    let (node, redis) = (start_node(free_port()), start_redis(free_port()));
    // The runner takes a `Fn`; the connections are used by one case at a time.
    let conns = std::cell::RefCell::new((Raw::connect(node.port), Raw::connect(redis.port)));
    let config = Config {
        cases: 200,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&prop::collection::vec(step(), 1..40), |steps| {
        let mut guard = conns.borrow_mut();
        let (ours, theirs) = &mut *guard;
        call(ours, &s(&["FLUSHALL"]));
        call(theirs, &s(&["FLUSHALL"]));
        for (args, how) in &steps {
            let (a, b) = (call(ours, args), call(theirs, args));
            let shown = |r: &[u8]| String::from_utf8_lossy(r).into_owned();
            match how {
                Cmp::Exact => prop_assert_eq!(shown(&a), shown(&b), "{:?}", args),
                Cmp::Unordered => {
                    let ((ha, mut ea), (hb, mut eb)) = (elements(&a), elements(&b));
                    ea.sort();
                    eb.sort();
                    prop_assert_eq!((ha, ea), (hb, eb), "{:?}", args);
                }
                Cmp::Picks(read) => {
                    let ((ha, ea), (hb, _)) = (elements(&a), elements(&b));
                    prop_assert_eq!(shown(&ha), shown(&hb), "{:?}", args);
                    let mut q = vec![read.split(' ').next().unwrap().to_string(), args[1].clone()];
                    q.extend(read.split(' ').skip(1).map(String::from));
                    let (_, all) = elements(&call(ours, &q));
                    for e in &ea {
                        prop_assert!(
                            all.contains(e),
                            "{:?} picked {} not in {:?}",
                            args,
                            shown(e),
                            q
                        );
                    }
                }
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
