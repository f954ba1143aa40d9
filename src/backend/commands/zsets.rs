//! Sorted-set commands on one key: ZADD, ZINCRBY, ZCOUNT, ZLEXCOUNT,
//! ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZPOPMIN, ZPOPMAX, ZMPOP and ZRANDMEMBER
//! (ZREM and ZCARD are `elements.rs`'s, ZSCAN `elem_scan.rs`'s). Ranges live in
//! `zrange.rs`, the multi-key set algebra in `zstore.rs`. Scores are replied as Redis 7.0 does (`%.17g`).

use super::hashes::{counted_picks, parse_random_args, random_picks};
use super::util::{
    double, parse_mpop, parse_positive, parse_score, reply_members, reply_pairs, MUST_BE_POSITIVE,
};
use super::zrange::{parse_lex_range, parse_score_range};
use super::{CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::node::Node;
use crate::backend::value::zset::ZSet;
use crate::backend::value::Elem;
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;

#[derive(Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What ZADD did to one element.
enum Outcome {
    Added(f64),
    Updated(f64),
    Same(f64),
    Nop,
}

fn add_one(
    z: &mut ZSet,
    m: &[u8],
    score: f64,
    f: &AddFlags,
    t: &crate::backend::value::Thresholds,
) -> Result<Outcome, CmdError> {
    match z.score(m) {
        Some(cur) => {
            if f.nx {
                return Ok(Outcome::Nop);
            }
            let new = if f.incr { cur + score } else { score };
            if new.is_nan() {
                return Err(CmdError::err("resulting score is not a number (NaN)"));
            }
            if (f.lt && new >= cur) || (f.gt && new <= cur) {
                return Ok(Outcome::Nop);
            }
            if new == cur {
                return Ok(Outcome::Same(new));
            }
            z.insert(m, new, t);
            Ok(Outcome::Updated(new))
        }
        None if f.xx => Ok(Outcome::Nop),
        None => {
            z.insert(m, score, t);
            Ok(Outcome::Added(score))
        }
    }
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
pub(crate) fn zadd(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut f = AddFlags::default();
    let mut j = 2;
    while j < args.len() {
        let a = args[j];
        match () {
            _ if eq_ignore_case(a, b"nx") => f.nx = true,
            _ if eq_ignore_case(a, b"xx") => f.xx = true,
            _ if eq_ignore_case(a, b"gt") => f.gt = true,
            _ if eq_ignore_case(a, b"lt") => f.lt = true,
            _ if eq_ignore_case(a, b"ch") => f.ch = true,
            _ if eq_ignore_case(a, b"incr") => f.incr = true,
            _ => break,
        }
        j += 1;
    }
    let pairs = &args[j..];
    if pairs.is_empty() || pairs.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    if f.incr && pairs.len() > 2 {
        return Err(CmdError::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    if f.nx && f.xx {
        return Err(CmdError::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    let scores: Vec<f64> = pairs
        .chunks(2)
        .map(|p| parse_score(p[0]))
        .collect::<Result<_, _>>()?;
    let r = ctx.write::<ZSet, _>(args[1], !f.xx, |z, t| {
        let (mut added, mut updated, mut last) = (0, 0, None);
        for (p, &score) in pairs.chunks(2).zip(&scores) {
            match add_one(z, p[1], score, &f, t)? {
                Outcome::Added(s) => (added, last) = (added + 1, Some(s)),
                Outcome::Updated(s) => (updated, last) = (updated + 1, Some(s)),
                Outcome::Same(s) => last = Some(s),
                Outcome::Nop => last = None,
            }
        }
        Ok((added, updated, last))
    })?;
    let (added, updated, last) = r.unwrap_or(Ok((0, 0, None)))?;
    if f.incr {
        match last {
            Some(s) => ctx.double(s),
            None => encode::null(ctx.out, ctx.client.proto),
        }
    } else {
        encode::integer(ctx.out, if f.ch { added + updated } else { added });
    }
    Ok(())
}

/// ZINCRBY key increment member
pub(crate) fn zincrby(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let incr = parse_score(args[2])?;
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    let r = ctx.write::<ZSet, _>(args[1], true, |z, t| add_one(z, args[3], incr, &f, t))?;
    match r.unwrap_or(Ok(Outcome::Nop))? {
        Outcome::Added(s) | Outcome::Updated(s) | Outcome::Same(s) => ctx.double(s),
        Outcome::Nop => encode::null(ctx.out, ctx.client.proto),
    }
    Ok(())
}

/// ZCOUNT key min max
pub(crate) fn zcount(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (min, max) = parse_score_range(args[2], args[3])?;
    ctx.reply_read_count::<ZSet>(args[1], |z| {
        let (a, b) = z.score_range(min, max);
        b - a
    })
}

/// ZLEXCOUNT key min max
pub(crate) fn zlexcount(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (min, max) = parse_lex_range(args[2], args[3])?;
    ctx.reply_read_count::<ZSet>(args[1], |z| {
        let (a, b) = z.lex_range(&min, &max);
        b - a
    })
}

/// ZSCORE key member
pub(crate) fn zscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match ctx
        .read::<ZSet, _>(args[1], |z| z.score(args[2]))?
        .flatten()
    {
        Some(s) => ctx.double(s),
        None => encode::null(ctx.out, ctx.client.proto),
    }
    Ok(())
}

/// ZMSCORE key member [member ...]
pub(crate) fn zmscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let ms = &args[2..];
    let scores = ctx.read::<ZSet, _>(args[1], |z| {
        ms.iter().map(|m| z.score(m)).collect::<Vec<_>>()
    })?;
    let scores = scores.unwrap_or_else(|| vec![None; ms.len()]);
    encode::array_len(ctx.out, scores.len());
    for s in scores {
        match s {
            Some(s) => ctx.double(s),
            None => encode::null(ctx.out, ctx.client.proto),
        }
    }
    Ok(())
}

fn rank(ctx: &mut Ctx, args: &[&[u8]], rev: bool, name: &str) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::WrongArity(name.into()));
    }
    let withscore = match args.get(3) {
        Some(a) if eq_ignore_case(a, b"withscore") => true,
        Some(_) => return Err(CmdError::Syntax),
        None => false,
    };
    let found = ctx.read::<ZSet, _>(args[1], |z| {
        z.rank(args[2]).map(|r| {
            let (_, score) = z.at(r);
            let r = if rev { z.len() - 1 - r } else { r };
            (r as i64, score)
        })
    })?;
    match (found, withscore) {
        (None, false) => encode::null(ctx.out, ctx.client.proto),
        (None, true) => encode::null_array(ctx.out, ctx.client.proto),
        (Some(None), false) => encode::null(ctx.out, ctx.client.proto),
        (Some(None), true) => encode::null_array(ctx.out, ctx.client.proto),
        (Some(Some((r, _))), false) => encode::integer(ctx.out, r),
        (Some(Some((r, s))), true) => {
            encode::array_len(ctx.out, 2);
            encode::integer(ctx.out, r);
            ctx.double(s);
        }
    }
    Ok(())
}

/// ZRANK key member [WITHSCORE]
pub(crate) fn zrank(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    rank(ctx, args, false, "zrank")
}

/// ZREVRANK key member [WITHSCORE]
pub(crate) fn zrevrank(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    rank(ctx, args, true, "zrevrank")
}

fn pop_from(z: &mut ZSet, count: usize, max: bool) -> Vec<(Elem, f64)> {
    (0..count.min(z.len()))
        .map(|_| z.remove_at(if max { z.len() - 1 } else { 0 }))
        .collect()
}

fn zpop(ctx: &mut Ctx, args: &[&[u8]], max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(c) => Some(parse_positive(c, MUST_BE_POSITIVE)? as usize),
        None => None,
    };
    let popped =
        ctx.write::<ZSet, _>(args[1], false, |z, _| pop_from(z, count.unwrap_or(1), max))?;
    reply_pairs(ctx, &popped.unwrap_or_default(), count.is_some());
    Ok(())
}

/// ZPOPMIN key [count]
pub(crate) fn zpopmin(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zpop(ctx, args, false)
}

/// ZPOPMAX key [count]
pub(crate) fn zpopmax(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zpop(ctx, args, true)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
pub(crate) fn zmpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let a = parse_mpop(args, 1, b"min", b"max")?;
    for key in &args[a.keys] {
        if let Some(p) = zpop_many(ctx.node, ctx.now, key, !a.first, a.count)? {
            reply_key_and_pairs(ctx.out, key, &p, ctx.client.proto);
            return Ok(());
        }
    }
    encode::null_array(ctx.out, ctx.client.proto);
    Ok(())
}

/// Pops up to `count` members from the sorted set at `key`, lowest scores
/// first unless `max` (None if absent).
pub(super) fn zpop_many(
    node: &Node,
    now: u64,
    key: &[u8],
    max: bool,
    count: usize,
) -> Result<Option<Vec<(Elem, f64)>>, CmdError> {
    let store = &node.store;
    let h = store.hash(key);
    store
        .lock(h, now)
        .write_coll::<ZSet, _>(h, key, false, |z| pop_from(z, count, max))
}

/// `[key, [[member, score]…]]`, the reply of ZMPOP and BZMPOP (nested in
/// both protocols).
pub(super) fn reply_key_and_pairs(out: &mut BytesMut, key: &[u8], p: &[(Elem, f64)], proto: u8) {
    encode::array_len(out, 2);
    encode::bulk(out, key);
    encode::array_len(out, p.len());
    for (m, s) in p {
        encode::array_len(out, 2);
        encode::bulk(out, m);
        double(out, *s, proto);
    }
}

/// ZRANDMEMBER key [count [WITHSCORES]]
pub(crate) fn zrandmember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (count, withscores) = parse_random_args(args, b"withscores")?;
    let picked = ctx.read::<ZSet, _>(args[1], |z| {
        let mut picks = random_picks(z.len(), count.unwrap_or(1));
        if count.is_some_and(|c| c >= z.len() as i64) {
            // Redis 7.0 returns the whole set from the highest score down.
            picks.reverse();
        }
        picks
            .into_iter()
            .map(|i| {
                let (m, s) = z.at(i);
                (Elem::from(m), s)
            })
            .collect::<Vec<_>>()
    })?;
    let Some(picked) = counted_picks(ctx, count, picked) else {
        return Ok(());
    };
    reply_members(ctx, &picked, withscores);
    Ok(())
}
