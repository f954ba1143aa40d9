//! What a few commands' events depend on that neither their arguments nor
//! their reply tell, noted before the handler runs: whether a key existed
//! (DEL, LTRIM, a STORE variant's destination), whether it had a TTL
//! (GETEX PERSIST), members' scores (ZADD, GEOADD), whether SMOVE's
//! destination held the member, a stream's length (XADD's trimming).
//! Reads only; takes one shard lock at a time.

use crate::backend::commands::Command;
use crate::backend::keyspace::entry::Entry;
use crate::backend::node::Node;
use crate::backend::value::Coll;
use crate::catalogue::Id::*;
use crate::resp::eq_ignore_case;

/// The state noted before a command.
#[derive(Default)]
pub(crate) struct Pre {
    /// Per key the rule names: whether it existed.
    pub(crate) exists: Vec<bool>,
    /// GETEX: whether the key had a TTL.
    pub(crate) ttl: bool,
    /// ZADD / GEOADD: each member's score before.
    pub(crate) scores: Vec<Option<f64>>,
    /// SMOVE: whether the destination held the member; XGROUP
    /// DELCONSUMER: whether the consumer existed.
    pub(crate) member: bool,
    /// XADD: the stream's length; SETBIT: the string's.
    pub(crate) len: usize,
    /// XREADGROUP, XCLAIM, XAUTOCLAIM: each stream whose group lacked the
    /// consumer (it may be created implicitly).
    pub(crate) no_consumer: Vec<Vec<u8>>,
}

/// Whether `group` of the stream at `key` has `consumer`; `None` when
/// there is no such stream or group.
pub(crate) fn has_consumer(
    node: &Node,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    now: u64,
) -> Option<bool> {
    peek(node, key, now, |e| match e.coll() {
        Some(Coll::Stream(s)) => s
            .groups
            .get(group)
            .map(|g| g.consumers.contains_key(consumer)),
        _ => None,
    })
    .flatten()
}

/// A group, a consumer and stream keys.
type GroupKeys<'a> = (&'a [u8], &'a [u8], Vec<&'a [u8]>);

/// XREADGROUP's group, consumer and stream keys.
pub(crate) fn readgroup_keys<'a>(args: &[&'a [u8]]) -> Option<GroupKeys<'a>> {
    let at = args.iter().position(|a| eq_ignore_case(a, b"streams"))?;
    let rest = &args[at + 1..];
    let keys = rest[..rest.len() / 2].to_vec();
    Some((args.get(2)?, args.get(3)?, keys))
}

/// Reads `key`'s live entry with `f`.
pub(crate) fn peek<R>(node: &Node, key: &[u8], now: u64, f: impl FnOnce(&Entry) -> R) -> Option<R> {
    let h = node.store.hash(key);
    node.store.lock(h, now).peek(h, key).map(f)
}

/// Whether `key` exists.
pub(crate) fn exists(node: &Node, key: &[u8], now: u64) -> bool {
    peek(node, key, now, |_| ()).is_some()
}

/// The argument after the last `STORE` / `STOREDIST` (SORT, GEORADIUS).
pub(crate) fn store_dest<'a>(args: &[&'a [u8]], from: usize) -> Option<&'a [u8]> {
    let mut dest = None;
    let mut i = from;
    while i + 1 < args.len() {
        if eq_ignore_case(args[i], b"store") || eq_ignore_case(args[i], b"storedist") {
            dest = Some(args[i + 1]);
            i += 1;
        }
        i += 1;
    }
    dest
}

/// ZADD's members (after its options) or GEOADD's.
pub(crate) fn members<'a>(args: &[&'a [u8]], geo: bool) -> Vec<&'a [u8]> {
    let mut i = 2;
    let opts: &[&[u8]] = if geo {
        &[b"nx", b"xx", b"ch"]
    } else {
        &[b"nx", b"xx", b"gt", b"lt", b"ch", b"incr"]
    };
    while i < args.len() && opts.iter().any(|o| eq_ignore_case(args[i], o)) {
        i += 1;
    }
    let step = if geo { 3 } else { 2 };
    args[i.min(args.len())..]
        .chunks(step)
        .filter(|c| c.len() == step)
        .map(|c| c[step - 1])
        .collect()
}

fn score(node: &Node, key: &[u8], m: &[u8], now: u64) -> Option<f64> {
    peek(node, key, now, |e| match e.coll() {
        Some(Coll::ZSet(z)) => z.score(m),
        _ => None,
    })
    .flatten()
}

/// Each member's score now.
pub(crate) fn scores(node: &Node, key: &[u8], ms: &[&[u8]], now: u64) -> Vec<Option<f64>> {
    ms.iter().map(|m| score(node, key, m, now)).collect()
}

/// Notes what `cmd`'s events will depend on.
pub(crate) fn capture(node: &Node, cmd: &Command, args: &[&[u8]], now: u64) -> Pre {
    let mut pre = Pre::default();
    let key = args.get(1).copied().unwrap_or_default();
    let mut dest = |k: Option<&[u8]>| {
        if let Some(k) = k {
            pre.exists.push(exists(node, k, now));
        }
    };
    match cmd.id {
        Del | Unlink => {
            for k in &args[1..] {
                pre.exists.push(exists(node, k, now));
            }
        }
        Ltrim | Restore | Sinterstore | Sunionstore | Sdiffstore | Zunionstore | Zinterstore
        | Zdiffstore | Zrangestore | Geosearchstore => dest(Some(key)),
        Bitop => dest(args.get(2).copied()),
        Sort => dest(store_dest(args, 2)),
        Georadius => dest(store_dest(args, 6)),
        Georadiusbymember => dest(store_dest(args, 5)),
        Setbit => {
            let len = peek(node, key, now, |e| e.is_string().then(|| e.value().len()));
            pre.exists.push(len.is_some());
            pre.len = len.flatten().unwrap_or(0);
        }
        Getex => pre.ttl = peek(node, key, now, |e| e.expire_at != 0).unwrap_or(false),
        Zadd => pre.scores = scores(node, key, &members(args, false), now),
        Geoadd => pre.scores = scores(node, key, &members(args, true), now),
        Smove if args.len() > 3 => {
            pre.member = peek(node, args[2], now, |e| match e.coll() {
                Some(Coll::Set(s)) => s.contains(args[3]),
                _ => false,
            })
            .unwrap_or(false)
        }
        Xreadgroup => {
            if let Some((g, c, keys)) = readgroup_keys(args) {
                for k in keys {
                    if has_consumer(node, k, g, c, now) == Some(false) {
                        pre.no_consumer.push(k.to_vec());
                    }
                }
            }
        }
        Xclaim | Xautoclaim
            if args.len() > 3 && has_consumer(node, key, args[2], args[3], now) == Some(false) =>
        {
            pre.no_consumer.push(key.to_vec());
        }
        Xgroup if args.len() > 4 && eq_ignore_case(args[1], b"delconsumer") => {
            pre.member = has_consumer(node, args[2], args[3], args[4], now) == Some(true);
        }
        Xadd => {
            pre.len = peek(node, key, now, |e| match e.coll() {
                Some(Coll::Stream(s)) => s.len(),
                _ => 0,
            })
            .unwrap_or(0)
        }
        _ => {}
    }
    pre
}
