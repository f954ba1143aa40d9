//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LINSERT, LINDEX, LPOP,
//! RPOP, LRANGE, LREM, LSET, LTRIM, LPOS, RPOPLPUSH, LMOVE and LMPOP
//! (LLEN is `elements.rs`'s), checking arguments in the order Redis 7.0
//! does so the same error wins.

use super::util::{parse_mpop, parse_positive, rank_range, MUST_BE_POSITIVE};
use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::node::Node;
use crate::backend::value::{Elem, List};
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;

fn push(ctx: &mut Ctx, args: &[&[u8]], head: bool, only_existing: bool) -> CmdResult {
    ctx.reply_write_count::<List>(args[1], !only_existing, |l, t| {
        args[2..].iter().for_each(|e| l.push(e, head));
        l.settle(t);
        l.len()
    })
}

/// LPUSH key element [element ...]
pub(crate) fn lpush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    push(ctx, args, true, false)
}

/// RPUSH key element [element ...]
pub(crate) fn rpush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    push(ctx, args, false, false)
}

/// LPUSHX key element [element ...]
pub(crate) fn lpushx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    push(ctx, args, true, true)
}

/// RPUSHX key element [element ...]
pub(crate) fn rpushx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    push(ctx, args, false, true)
}

/// LEFT → true (head), RIGHT → false, else a syntax error.
pub(super) fn parse_side(b: &[u8]) -> Result<bool, CmdError> {
    if eq_ignore_case(b, b"left") {
        Ok(true)
    } else if eq_ignore_case(b, b"right") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// LINSERT key BEFORE|AFTER pivot element
pub(crate) fn linsert(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let after = if eq_ignore_case(args[2], b"after") {
        true
    } else if eq_ignore_case(args[2], b"before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let n = ctx.write::<List, _>(args[1], false, |l, t| {
        let Some(i) = l.items.iter().position(|e| &e[..] == args[3]) else {
            return -1;
        };
        l.insert(i + after as usize, args[4]);
        l.settle(t);
        l.len() as i64
    })?;
    encode::integer(ctx.out, n.unwrap_or(0));
    Ok(())
}

/// The position of a possibly negative index, if inside `len`.
fn index(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

/// LINDEX key index
pub(crate) fn lindex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    // The key is looked up before the index is parsed, as in Redis.
    let i = parse_i64(args[2]);
    let found = ctx.read::<List, _>(args[1], |l| {
        let at = i.as_ref().ok().and_then(|&i| index(i, l.len()));
        at.map(|at| l.items[at].clone())
    })?;
    let Some(v) = found else {
        encode::null(ctx.out, ctx.client.proto);
        return Ok(());
    };
    i?;
    ctx.bulk_or_null(v.as_deref());
    Ok(())
}

/// LPOP / RPOP key [count]
fn pop(ctx: &mut Ctx, args: &[&[u8]], head: bool, name: &str) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::WrongArity(name.into()));
    }
    let count = match args.get(2) {
        Some(c) => Some(parse_positive(c, MUST_BE_POSITIVE)? as usize),
        None => None,
    };
    let popped = ctx.write::<List, _>(args[1], false, |l, t| {
        let n = count.unwrap_or(1).min(l.len());
        let out: Vec<Elem> = (0..n).filter_map(|_| l.pop(head)).collect();
        l.settle(t);
        out
    })?;
    match (popped, count) {
        (None, None) => encode::null(ctx.out, ctx.client.proto),
        (None, Some(_)) => encode::null_array(ctx.out, ctx.client.proto),
        (Some(v), None) => ctx.bulk_or_null(v.first().map(|e| &e[..])),
        (Some(v), Some(_)) => {
            encode::array_len(ctx.out, v.len());
            v.iter().for_each(|e| encode::bulk(ctx.out, e));
        }
    }
    Ok(())
}

/// LPOP key [count]
pub(crate) fn lpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    pop(ctx, args, true, "lpop")
}

/// RPOP key [count]
pub(crate) fn rpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    pop(ctx, args, false, "rpop")
}

/// LRANGE key start stop
pub(crate) fn lrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (start, end) = (parse_i64(args[2])?, parse_i64(args[3])?);
    let items = ctx.read::<List, _>(args[1], |l| match rank_range(start, end, l.len()) {
        Some((a, b)) => l.items.range(a..=b).cloned().collect(),
        None => Vec::new(),
    })?;
    let items = items.unwrap_or_default();
    encode::array_len(ctx.out, items.len());
    items.iter().for_each(|e| encode::bulk(ctx.out, e));
    Ok(())
}

/// LREM key count element
pub(crate) fn lrem(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let count = parse_i64(args[2])?;
    ctx.reply_write_count::<List>(args[1], false, |l, t| {
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        let mut hits: Vec<usize> = Vec::new();
        let positions: Box<dyn Iterator<Item = usize>> = if count < 0 {
            Box::new((0..l.len()).rev())
        } else {
            Box::new(0..l.len())
        };
        for i in positions {
            if hits.len() == limit {
                break;
            }
            if &l.items[i][..] == args[3] {
                hits.push(i);
            }
        }
        hits.sort_unstable_by(|a, b| b.cmp(a));
        hits.iter().for_each(|&i| {
            l.remove(i);
        });
        l.settle(t);
        hits.len()
    })
}

/// LSET key index element
pub(crate) fn lset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let r = ctx.write::<List, _>(args[1], false, |l, t| {
        let i = parse_i64(args[2])?;
        let i = index(i, l.len()).ok_or_else(|| CmdError::err("index out of range"))?;
        l.set(i, args[3]);
        l.settle(t);
        Ok(())
    })?;
    r.ok_or_else(|| CmdError::err("no such key"))??;
    ctx.ok();
    Ok(())
}

/// LTRIM key start stop
pub(crate) fn ltrim(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (start, end) = (parse_i64(args[2])?, parse_i64(args[3])?);
    ctx.write::<List, _>(args[1], false, |l, t| {
        match rank_range(start, end, l.len()) {
            Some((a, b)) => l.keep(a, b + 1),
            None => l.keep(0, 0),
        }
        l.settle(t);
    })?;
    ctx.ok();
    Ok(())
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
pub(crate) fn lpos(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0usize);
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if eq_ignore_case(args[j], b"rank") && more {
            rank = parse_i64(args[j + 1])?;
            if rank == 0 {
                return Err(CmdError::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if eq_ignore_case(args[j], b"count") && more {
            count = Some(parse_positive(args[j + 1], "COUNT can't be negative")? as usize);
        } else if eq_ignore_case(args[j], b"maxlen") && more {
            maxlen = parse_positive(args[j + 1], "MAXLEN can't be negative")? as usize;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    let found = ctx.read::<List, _>(args[1], |l| {
        let len = l.len();
        let scan = if maxlen == 0 { len } else { maxlen.min(len) };
        let want = match count {
            Some(0) => usize::MAX,
            Some(n) => n,
            None => 1,
        };
        // Redis negates the rank, so LONG_MIN stays negative and then
        // matches from the first hit: like -1.
        let mut skip = if rank == i64::MIN {
            0
        } else {
            rank.unsigned_abs() - 1
        };
        let mut hits = Vec::new();
        for k in 0..scan {
            let i = if rank > 0 { k } else { len - 1 - k };
            if &l.items[i][..] == args[2] {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                hits.push(i as i64);
                if hits.len() >= want {
                    break;
                }
            }
        }
        hits
    })?;
    match (found, count) {
        (None, None) => encode::null(ctx.out, ctx.client.proto),
        (Some(h), None) => match h.first() {
            Some(&i) => encode::integer(ctx.out, i),
            None => encode::null(ctx.out, ctx.client.proto),
        },
        (h, Some(_)) => {
            let h = h.unwrap_or_default();
            encode::array_len(ctx.out, h.len());
            h.iter().for_each(|&i| encode::integer(ctx.out, i));
        }
    }
    Ok(())
}

/// Pops from `src` and pushes onto `dst`, atomically; the element moved.
/// WRONGTYPE if either holds another type (the source checked first);
/// `None` if the source is absent. Also serves a woken BLMOVE.
pub(super) fn move_one(
    node: &Node,
    now: u64,
    src: &[u8],
    dst: &[u8],
    from_head: bool,
    to_head: bool,
) -> Result<Option<Elem>, CmdError> {
    let t = node.thresholds();
    let mut many = super::util::Many::lock(&node.store, &[src, dst], now);
    if many.read::<List, _>(src, |_| ())?.is_none() {
        return Ok(None);
    }
    many.read::<List, _>(dst, |_| ())?;
    let (s, h) = many.shard(src);
    let v = s
        .write_coll::<List, _>(h, src, false, |l| {
            let v = l.pop(from_head);
            l.settle(&t);
            v
        })?
        .flatten();
    if let Some(v) = &v {
        let (s, h) = many.shard(dst);
        s.write_coll::<List, _>(h, dst, true, |l| {
            l.push(v, to_head);
            l.settle(&t);
        })?;
    }
    Ok(v)
}

/// RPOPLPUSH source destination
pub(crate) fn rpoplpush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let v = move_one(ctx.node, ctx.now, args[1], args[2], false, true)?;
    ctx.bulk_or_null(v.as_deref());
    Ok(())
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
pub(crate) fn lmove(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (from, to) = (parse_side(args[3])?, parse_side(args[4])?);
    let v = move_one(ctx.node, ctx.now, args[1], args[2], from, to)?;
    ctx.bulk_or_null(v.as_deref());
    Ok(())
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub(crate) fn lmpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let a = parse_mpop(args, 1, b"left", b"right")?;
    for key in &args[a.keys] {
        let popped = pop_many(ctx.node, ctx.now, key, a.first, a.count)?;
        if let Some(v) = popped {
            reply_key_and_items(ctx.out, key, &v);
            return Ok(());
        }
    }
    encode::null_array(ctx.out, ctx.client.proto);
    Ok(())
}

/// Pops up to `count` elements from the list at `key` (None if absent).
pub(super) fn pop_many(
    node: &Node,
    now: u64,
    key: &[u8],
    head: bool,
    count: usize,
) -> Result<Option<Vec<Elem>>, CmdError> {
    let t = node.thresholds();
    let store = &node.store;
    let h = store.hash(key);
    store
        .lock(h, now)
        .write_coll::<List, _>(h, key, false, |l| {
            let n = count.min(l.len());
            let v: Vec<Elem> = (0..n).filter_map(|_| l.pop(head)).collect();
            l.settle(&t);
            v
        })
}

/// `[key, [items…]]`, the reply of LMPOP and BLMPOP.
pub(super) fn reply_key_and_items(out: &mut BytesMut, key: &[u8], items: &[Elem]) {
    encode::array_len(out, 2);
    encode::bulk(out, key);
    encode::array_len(out, items.len());
    items.iter().for_each(|e| encode::bulk(out, e));
}
