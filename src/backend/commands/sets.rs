//! Set commands: SADD, SMEMBERS, SISMEMBER, SMISMEMBER, SPOP, SRANDMEMBER,
//! SMOVE, SINTER/SUNION/SDIFF and their STORE forms, SINTERCARD
//! (SREM and SCARD are `elements.rs`'s, SSCAN `elem_scan.rs`'s). Multi-key commands lock every key's shard first,
//! so they read and write all keys atomically.

use super::hashes::random_picks;
use super::util::{parse_at_least_one, parse_count, parse_positive, MUST_BE_POSITIVE};
use super::{CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::{Coll, Elem, Set};
use crate::resp::{encode, eq_ignore_case};

fn reply_members(ctx: &mut Ctx, members: &[Elem], as_set: bool) {
    if as_set {
        encode::set_len(ctx.out, members.len(), ctx.client.proto);
    } else {
        encode::array_len(ctx.out, members.len());
    }
    members.iter().for_each(|m| encode::bulk(ctx.out, m));
}

/// SADD key member [member ...]
pub(crate) fn sadd(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ctx.reply_write_count::<Set>(args[1], true, |s, t| {
        args[2..].iter().filter(|m| s.insert(m, t)).count()
    })
}

/// SMEMBERS key
pub(crate) fn smembers(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let m = ctx.read::<Set, _>(args[1], |s| s.members())?;
    reply_members(ctx, &m.unwrap_or_default(), true);
    Ok(())
}

/// SISMEMBER key member
pub(crate) fn sismember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = ctx.read::<Set, _>(args[1], |s| s.contains(args[2]))?;
    encode::integer(ctx.out, n.unwrap_or(false) as i64);
    Ok(())
}

/// SMISMEMBER key member [member ...]
pub(crate) fn smismember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let ms = &args[2..];
    let hits = ctx.read::<Set, _>(args[1], |s| {
        ms.iter().map(|m| s.contains(m)).collect::<Vec<_>>()
    })?;
    let hits = hits.unwrap_or_else(|| vec![false; ms.len()]);
    encode::array_len(ctx.out, hits.len());
    hits.iter()
        .for_each(|&h| encode::integer(ctx.out, h as i64));
    Ok(())
}

/// SPOP key [count]
pub(crate) fn spop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(c) => Some(parse_positive(c, MUST_BE_POSITIVE)?),
        None => None,
    };
    let popped = ctx.write::<Set, _>(args[1], false, |s, _| {
        let picks = random_picks(s.len(), count.unwrap_or(1));
        let chosen: Vec<Elem> = picks.iter().filter_map(|&i| s.nth(i)).collect();
        chosen.iter().for_each(|m| {
            s.remove(m);
        });
        chosen
    })?;
    match count {
        None => ctx.bulk_or_null(popped.as_ref().and_then(|p| p.first()).map(|m| &m[..])),
        Some(_) => reply_members(ctx, &popped.unwrap_or_default(), true),
    }
    Ok(())
}

/// SRANDMEMBER key [count]
pub(crate) fn srandmember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(c) => Some(parse_count(c)?),
        None => None,
    };
    let picked = ctx.read::<Set, _>(args[1], |s| {
        let picks = random_picks(s.len(), count.unwrap_or(1));
        (
            picks.iter().filter_map(|&i| s.nth(i)).collect::<Vec<_>>(),
            (),
        )
    })?;
    match (count, picked) {
        (None, p) => ctx.bulk_or_null(p.as_ref().and_then(|p| p.0.first()).map(|m| &m[..])),
        (Some(0), _) | (Some(_), None) => encode::array_len(ctx.out, 0),
        (Some(_), Some((m, _))) => reply_members(ctx, &m, false),
    }
    Ok(())
}

/// SMOVE source destination member
pub(crate) fn smove(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (src, dst, m) = (args[1], args[2], args[3]);
    let t = ctx.node.thresholds();
    let mut many = ctx.lock_keys(&[src, dst]);
    let (s, h) = many.shard(src);
    let src_kind = s.kind_of(h, src);
    let (d, hd) = many.shard(dst);
    let dst_kind = d.kind_of(hd, dst);
    use crate::backend::value::Kind;
    let mut added = false;
    let moved = match (src_kind, dst_kind) {
        (None, _) => false,
        (Some(k), _) if k != Kind::Set => return Err(CmdError::WrongType),
        (_, Some(k)) if k != Kind::Set => return Err(CmdError::WrongType),
        _ if src == dst => many
            .read::<Set, _>(src, |s| s.contains(m))?
            .unwrap_or(false),
        _ => {
            let (s, h) = many.shard(src);
            let removed = s.write_coll::<Set, _>(h, src, false, |s| s.remove(m))?;
            if removed == Some(true) {
                let (d, hd) = many.shard(dst);
                added = d.write_coll::<Set, _>(hd, dst, true, |s| s.insert(m, &t))? == Some(true);
            }
            removed == Some(true)
        }
    };
    drop(many);
    // WATCH sees the source change, and the destination only when the
    // member was added to it (Redis signals exactly these; the dispatcher
    // leaves SMOVE's keys to this handler).
    if moved && src != dst {
        ctx.node.store.touch(src, ctx.now);
        if added {
            ctx.node.store.touch(dst, ctx.now);
        }
    }
    encode::integer(ctx.out, moved as i64);
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The members of each key (None = missing), all read under one lock.
fn inputs(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    dst: Option<&[u8]>,
) -> Result<Vec<Option<Vec<Elem>>>, CmdError> {
    let mut all: Vec<&[u8]> = keys.to_vec();
    all.extend(dst);
    let mut many = ctx.lock_keys(&all);
    keys.iter()
        .map(|k| many.read::<Set, _>(k, |s| s.members()))
        .collect()
}

/// Computes the operation into a new set.
fn compute(ctx: &Ctx, sets: Vec<Option<Vec<Elem>>>, op: Op, limit: usize) -> Set {
    let t = ctx.node.thresholds();
    let mut out = Set::default();
    match op {
        Op::Union => sets.iter().flatten().flatten().for_each(|m| {
            out.insert(m, &t);
        }),
        Op::Diff => {
            let others: Vec<Set> = sets[1..].iter().flatten().map(|v| to_set(v, &t)).collect();
            for m in sets[0].iter().flatten() {
                if !others.iter().any(|o| o.contains(m)) {
                    out.insert(m, &t);
                }
            }
        }
        Op::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return out;
            }
            let mut sets: Vec<Vec<Elem>> = sets.into_iter().flatten().collect();
            sets.sort_by_key(|s| s.len());
            let others: Vec<Set> = sets[1..].iter().map(|v| to_set(v, &t)).collect();
            for m in &sets[0] {
                if limit != 0 && out.len() >= limit {
                    break;
                }
                if others.iter().all(|o| o.contains(m)) {
                    out.insert(m, &t);
                }
            }
        }
    }
    out
}

fn to_set(v: &[Elem], t: &crate::backend::value::Thresholds) -> Set {
    let mut s = Set::default();
    v.iter().for_each(|m| {
        s.insert(m, t);
    });
    s
}

fn op_reply(ctx: &mut Ctx, args: &[&[u8]], op: Op) -> CmdResult {
    let sets = inputs(ctx, &args[1..], None)?;
    let out = compute(ctx, sets, op, 0);
    reply_members(ctx, &out.members(), true);
    Ok(())
}

fn op_store(ctx: &mut Ctx, args: &[&[u8]], op: Op) -> CmdResult {
    let (dst, keys) = (args[1], &args[2..]);
    let sets = inputs(ctx, keys, Some(dst))?;
    let out = compute(ctx, sets, op, 0);
    let n = out.len();
    let store = &ctx.node.store;
    let h = store.hash(dst);
    store.lock(h, ctx.now).put_coll(h, dst, Coll::Set(out), 0);
    encode::integer(ctx.out, n as i64);
    Ok(())
}

/// SINTER key [key ...]
pub(crate) fn sinter(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    op_reply(ctx, args, Op::Inter)
}

/// SUNION key [key ...]
pub(crate) fn sunion(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    op_reply(ctx, args, Op::Union)
}

/// SDIFF key [key ...]
pub(crate) fn sdiff(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    op_reply(ctx, args, Op::Diff)
}

/// SINTERSTORE destination key [key ...]
pub(crate) fn sinterstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    op_store(ctx, args, Op::Inter)
}

/// SUNIONSTORE destination key [key ...]
pub(crate) fn sunionstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    op_store(ctx, args, Op::Union)
}

/// SDIFFSTORE destination key [key ...]
pub(crate) fn sdiffstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    op_store(ctx, args, Op::Diff)
}

/// Parses `numkeys key... [LIMIT n]` of SINTERCARD and ZINTERCARD.
pub(crate) fn parse_intercard<'a>(args: &[&'a [u8]]) -> Result<(Vec<&'a [u8]>, usize), CmdError> {
    let n = parse_at_least_one(args[1], "numkeys should be greater than 0")?;
    if n > args.len() - 2 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let mut limit = 0;
    let mut j = 2 + n;
    while j < args.len() {
        if eq_ignore_case(args[j], b"limit") && j + 1 < args.len() {
            limit = parse_positive(args[j + 1], "LIMIT can't be negative")? as usize;
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((args[2..2 + n].to_vec(), limit))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub(crate) fn sintercard(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (keys, limit) = parse_intercard(args)?;
    let sets = inputs(ctx, &keys, None)?;
    let out = compute(ctx, sets, Op::Inter, limit);
    encode::integer(ctx.out, out.len() as i64);
    Ok(())
}
