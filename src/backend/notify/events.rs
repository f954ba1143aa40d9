//! Each write command's events, with Redis 7.0's names and only when Redis
//! raises them (`t_string.c`, `t_list.c`, `t_set.c`, `t_zset.c`,
//! `t_hash.c`, `t_stream.c`, `db.c`, `expire.c`, `geo.c`, `sort.c`,
//! `bitops.c`, `hyperloglog.c`): derived from the command, its arguments,
//! its reply and what `pre.rs` noted before it ran.
//!
//! Blocking pops are not here: their events are raised when they are
//! served (`served_op`), at once or later. Scripts and EXEC raise none of
//! their own; the commands they run do.

use super::pre::{exists, members, scores, store_dest, Pre};
use super::reply::Reply;
use super::{ev, Notice};
use crate::backend::blocking::Op;
use crate::backend::commands::Command;
use crate::backend::keyspace::notices::{GENERIC, HASH, LIST, NEW, SET, STREAM, STRING, ZSET};
use crate::backend::node::Node;
use crate::catalogue::Id::*;
use crate::resp::eq_ignore_case;

/// What `cmd` changed, as events in Redis's order.
pub(crate) fn derive(
    node: &Node,
    cmd: &Command,
    args: &[&[u8]],
    reply: &[u8],
    pre: &Pre,
    now: u64,
) -> Vec<Notice> {
    let r = Reply::parse(reply);
    if r.is_error() || cmd.flags & crate::catalogue::WRITE == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let key = args.get(1).copied().unwrap_or_default();
    let has = |a: &[u8]| args[2..].iter().any(|x| eq_ignore_case(x, a));
    // The key's `del` when the command emptied it.
    let gone = |out: &mut Vec<Notice>, k: &[u8]| {
        if !exists(node, k, now) {
            out.push(ev(GENERIC, "del", k));
        }
    };
    let n = r.int();
    match cmd.id {
        // Strings.
        Set => {
            let (nx, xx) = (has(b"nx"), has(b"xx"));
            let set = if has(b"get") {
                !(nx && r.is_some() || xx && !r.is_some())
            } else {
                matches!(r, Reply::Status(_))
            };
            if set {
                out.push(ev(STRING, "set", key));
                if has(b"ex") || has(b"px") || has(b"exat") || has(b"pxat") {
                    out.push(ev(GENERIC, "expire", key));
                }
            }
        }
        Setnx if n == 1 => out.push(ev(STRING, "set", key)),
        Getset => out.push(ev(STRING, "set", key)),
        Setex | Psetex => {
            out.push(ev(STRING, "set", key));
            out.push(ev(GENERIC, "expire", key));
        }
        Mset => args[1..]
            .chunks(2)
            .for_each(|p| out.push(ev(STRING, "set", p[0]))),
        Msetnx if n == 1 => args[1..]
            .chunks(2)
            .for_each(|p| out.push(ev(STRING, "set", p[0]))),
        Append => out.push(ev(STRING, "append", key)),
        Setrange if !args[3].is_empty() => out.push(ev(STRING, "setrange", key)),
        Incr | Decr | Incrby | Decrby => out.push(ev(STRING, "incrby", key)),
        Incrbyfloat => out.push(ev(STRING, "incrbyfloat", key)),
        Getdel if r.is_some() => out.push(ev(GENERIC, "del", key)),
        Getex if r.is_some() => {
            if ["ex", "px", "exat", "pxat"]
                .iter()
                .any(|o| has(o.as_bytes()))
            {
                match exists(node, key, now) {
                    true => out.push(ev(GENERIC, "expire", key)),
                    false => out.push(ev(GENERIC, "del", key)),
                }
            } else if has(b"persist") && pre.ttl {
                out.push(ev(GENERIC, "persist", key));
            }
        }
        // Only when the key was created or grown, or the bit changed.
        Setbit => {
            let grown = crate::resp::parse_i64(args[2]).is_none_or(|o| (o as usize / 8) >= pre.len);
            let on = args[3] == b"1";
            if pre.exists.first() != Some(&true) || grown || (n == 1) != on {
                out.push(ev(STRING, "setbit", key));
            }
        }
        Bitfield if bitfield_changed(args, &r) => out.push(ev(STRING, "setbit", key)),
        Bitop => store(&mut out, STRING, "set", args[2], n > 0, pre),
        Pfadd if n == 1 => out.push(ev(STRING, "pfadd", key)),
        Pfmerge => out.push(ev(STRING, "pfadd", key)),
        // Keys.
        Del | Unlink => {
            let mut seen: Vec<&[u8]> = Vec::new();
            for (k, &was) in args[1..].iter().zip(&pre.exists) {
                if was && !seen.contains(k) {
                    out.push(ev(GENERIC, "del", k));
                }
                seen.push(k);
            }
        }
        Expire | Pexpire | Expireat | Pexpireat if n == 1 => match exists(node, key, now) {
            true => out.push(ev(GENERIC, "expire", key)),
            false => out.push(ev(GENERIC, "del", key)),
        },
        Persist if n == 1 => out.push(ev(GENERIC, "persist", key)),
        Rename | Renamenx if args[1] != args[2] && (n == 1 || r.is_some() && cmd.id == Rename) => {
            // `dbAdd` of the destination, even over a key it deleted.
            out.push(ev(NEW, "new", args[2]));
            out.push(ev(GENERIC, "rename_from", key));
            out.push(ev(GENERIC, "rename_to", args[2]));
        }
        Copy if n == 1 => {
            out.push(ev(NEW, "new", args[2]));
            out.push(ev(GENERIC, "copy_to", args[2]));
        }
        // A TTL already past stores nothing: `del` if REPLACE removed a key.
        Restore if !exists(node, key, now) => store(&mut out, GENERIC, "del", key, false, pre),
        Restore => {
            out.push(ev(NEW, "new", key));
            out.push(ev(GENERIC, "restore", key));
        }
        Sort => {
            if let Some(d) = store_dest(args, 2) {
                store(&mut out, LIST, "sortstore", d, n > 0, pre);
            }
        }
        // Hashes.
        Hset | Hmset => out.push(ev(HASH, "hset", key)),
        Hsetnx if n == 1 => out.push(ev(HASH, "hset", key)),
        Hdel if n > 0 => {
            out.push(ev(HASH, "hdel", key));
            gone(&mut out, key);
        }
        Hincrby => out.push(ev(HASH, "hincrby", key)),
        Hincrbyfloat => out.push(ev(HASH, "hincrbyfloat", key)),
        // Lists.
        Lpush | Lpushx if n > 0 => out.push(ev(LIST, "lpush", key)),
        Rpush | Rpushx if n > 0 => out.push(ev(LIST, "rpush", key)),
        Linsert if n > 0 => out.push(ev(LIST, "linsert", key)),
        Lset => out.push(ev(LIST, "lset", key)),
        Lpop | Rpop if r.is_some() => {
            out.push(ev(LIST, if cmd.id == Lpop { "lpop" } else { "rpop" }, key));
            gone(&mut out, key);
        }
        Lrem if n > 0 => {
            out.push(ev(LIST, "lrem", key));
            gone(&mut out, key);
        }
        Ltrim if pre.exists.first() == Some(&true) => {
            out.push(ev(LIST, "ltrim", key));
            gone(&mut out, key);
        }
        Rpoplpush if r.is_some() => moved(node, &mut out, key, args[2], false, true, now),
        Lmove if r.is_some() => {
            let left = |a: &[u8]| eq_ignore_case(a, b"left");
            moved(
                node,
                &mut out,
                key,
                args[2],
                left(args[3]),
                left(args[4]),
                now,
            );
        }
        Lmpop | Zmpop if r.is_some() => {
            let items = r.items();
            if let Some(Reply::Bulk(k)) = items.first() {
                let keys = crate::resp::parse_i64(key).unwrap_or(0).max(0) as usize;
                let dir = args.get(2 + keys).copied().unwrap_or_default();
                let (left, min) = (eq_ignore_case(dir, b"left"), eq_ignore_case(dir, b"min"));
                let name = match (cmd.id == Lmpop, left, min) {
                    (true, true, _) => "lpop",
                    (true, false, _) => "rpop",
                    (false, _, true) => "zpopmin",
                    (false, _, false) => "zpopmax",
                };
                let class = if cmd.id == Lmpop { LIST } else { ZSET };
                out.push(ev(class, name, k));
                gone(&mut out, k);
            }
        }
        // Sets.
        Sadd if n > 0 => out.push(ev(SET, "sadd", key)),
        Srem if n > 0 => {
            out.push(ev(SET, "srem", key));
            gone(&mut out, key);
        }
        Spop if r.is_some() => {
            out.push(ev(SET, "spop", key));
            gone(&mut out, key);
        }
        Smove if n == 1 && args[1] != args[2] => {
            out.push(ev(SET, "srem", key));
            gone(&mut out, key);
            if !pre.member {
                out.push(ev(SET, "sadd", args[2]));
            }
        }
        Sinterstore => store(&mut out, SET, "sinterstore", key, n > 0, pre),
        Sunionstore => store(&mut out, SET, "sunionstore", key, n > 0, pre),
        Sdiffstore => store(&mut out, SET, "sdiffstore", key, n > 0, pre),
        // Sorted sets.
        Zadd | Geoadd => {
            let incr = cmd.id == Zadd && has(b"incr");
            if incr && r.is_some() {
                out.push(ev(ZSET, "zincr", key));
            } else if !incr {
                let ms = members(args, cmd.id == Geoadd);
                if scores(node, key, &ms, now) != pre.scores {
                    out.push(ev(ZSET, "zadd", key));
                }
            }
        }
        Zincrby => out.push(ev(ZSET, "zincr", key)),
        Zrem | Zremrangebyrank | Zremrangebyscore | Zremrangebylex if n > 0 => {
            let name = match cmd.id {
                Zrem => "zrem",
                Zremrangebyrank => "zremrangebyrank",
                Zremrangebyscore => "zremrangebyscore",
                _ => "zremrangebylex",
            };
            out.push(ev(ZSET, name, key));
            gone(&mut out, key);
        }
        Zpopmin | Zpopmax if r.is_some() => {
            let name = if cmd.id == Zpopmin {
                "zpopmin"
            } else {
                "zpopmax"
            };
            out.push(ev(ZSET, name, key));
            gone(&mut out, key);
        }
        Zunionstore => store(&mut out, ZSET, "zunionstore", key, n > 0, pre),
        Zinterstore => store(&mut out, ZSET, "zinterstore", key, n > 0, pre),
        Zdiffstore => store(&mut out, ZSET, "zdiffstore", key, n > 0, pre),
        Zrangestore => store(&mut out, ZSET, "zrangestore", key, n > 0, pre),
        Geosearchstore => store(&mut out, ZSET, "geosearchstore", key, n > 0, pre),
        Georadius | Georadiusbymember => {
            let from = if cmd.id == Georadius { 6 } else { 5 };
            if let Some(d) = store_dest(args, from) {
                store(&mut out, ZSET, "georadiusstore", d, n > 0, pre);
            }
        }
        // Streams.
        Xadd if r.is_some() => {
            out.push(ev(STREAM, "xadd", key));
            let len = super::pre::peek(node, key, now, |e| e.coll().map_or(0, |c| c.len()));
            if len.unwrap_or(0) <= pre.len {
                out.push(ev(STREAM, "xtrim", key));
            }
        }
        Xtrim if n > 0 => out.push(ev(STREAM, "xtrim", key)),
        Xdel if n > 0 => out.push(ev(STREAM, "xdel", key)),
        Xsetid => out.push(ev(STREAM, "xsetid", key)),
        Xreadgroup | Xclaim | Xautoclaim => {
            // XREADGROUP GROUP g c …, XCLAIM key g c …: the same places.
            let (g, c) = (args[2], args[3]);
            for k in &pre.no_consumer {
                if super::pre::has_consumer(node, k, g, c, now) == Some(true) {
                    out.push(ev(STREAM, "xgroup-createconsumer", k));
                }
            }
        }
        Xgroup if args.len() > 2 => {
            let sub = args[1];
            let key = args[2];
            let name = [
                ("create", "xgroup-create", true),
                ("setid", "xgroup-setid", true),
                ("destroy", "xgroup-destroy", n == 1),
                ("createconsumer", "xgroup-createconsumer", n == 1),
                ("delconsumer", "xgroup-delconsumer", pre.member),
            ]
            .into_iter()
            .find(|(s, _, _)| eq_ignore_case(sub, s.as_bytes()));
            if let Some((_, name, true)) = name {
                out.push(ev(STREAM, name, key));
            }
        }
        _ => {}
    }
    out
}

/// A STORE variant: its event when it stored something, else `del` when
/// it deleted the destination that existed.
fn store(
    out: &mut Vec<Notice>,
    class: u32,
    name: &'static str,
    dest: &[u8],
    stored: bool,
    pre: &Pre,
) {
    if stored {
        out.push(ev(class, name, dest));
    } else if pre.exists.first() == Some(&true) {
        out.push(ev(GENERIC, "del", dest));
    }
}

/// LMOVE and its kin: the push on `dst`, then the pop on `src` (and its
/// `del` when emptied), as `lmoveGenericCommand` raises them.
fn moved(
    node: &Node,
    out: &mut Vec<Notice>,
    src: &[u8],
    dst: &[u8],
    from_head: bool,
    to_head: bool,
    now: u64,
) {
    out.push(ev(LIST, if to_head { "lpush" } else { "rpush" }, dst));
    out.push(ev(LIST, if from_head { "lpop" } else { "rpop" }, src));
    if !exists(node, src, now) {
        out.push(ev(GENERIC, "del", src));
    }
}

/// Whether BITFIELD's SET or INCRBY changed anything: their results are
/// not null (an INCRBY refused by OVERFLOW FAIL is).
fn bitfield_changed(args: &[&[u8]], r: &Reply) -> bool {
    let items = r.items();
    let mut at = 0;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if eq_ignore_case(a, b"overflow") {
            i += 2;
            continue;
        }
        if eq_ignore_case(a, b"get") {
            at += 1;
            i += 3;
            continue;
        }
        if (eq_ignore_case(a, b"set") || eq_ignore_case(a, b"incrby"))
            && items.get(at).is_some_and(|x| *x != Reply::Null)
        {
            return true;
        }
        at += 1;
        i += 4;
    }
    false
}

/// A served blocked client's events: its pop (and `del` when it emptied
/// the key), BLMOVE's push before it.
pub(crate) fn served_op(node: &Node, op: &Op, key: &[u8], now: u64) -> Vec<Notice> {
    let mut out = Vec::new();
    let side = |head: bool| if head { "lpop" } else { "rpop" };
    match op {
        Op::Pop { head } | Op::MPop { head, .. } => out.push(ev(LIST, side(*head), key)),
        Op::Move {
            dst,
            from_head,
            to_head,
        } => {
            moved(node, &mut out, key, dst, *from_head, *to_head, now);
            return out;
        }
        Op::ZPop { max } | Op::ZMPop { max, .. } => {
            out.push(ev(ZSET, if *max { "zpopmax" } else { "zpopmin" }, key))
        }
        Op::XRead(_) => return out,
    }
    if !exists(node, key, now) {
        out.push(ev(GENERIC, "del", key));
    }
    out
}
