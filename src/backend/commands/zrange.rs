//! Sorted-set ranges: ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES), its
//! legacy forms ZREVRANGE, Z[REV]RANGEBYSCORE and Z[REV]RANGEBYLEX,
//! ZRANGESTORE, and ZREMRANGEBYRANK/SCORE/LEX. One parser serves all of
//! them, as in Redis 7.0's `zrangeGenericCommand`, so options, conflicts
//! and errors are checked in the same order.

use super::util::{rank_range, reply_members};
use super::{parse_f64, parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::zset::{LexBound, ScoreBound, ZSet};
use crate::backend::value::{Coll, Elem};
use crate::resp::{encode, eq_ignore_case};

fn parse_bound(b: &[u8]) -> Option<ScoreBound> {
    let (exclusive, rest) = match b.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, b),
    };
    // strtod of an empty string is 0 and Redis accepts it.
    let value = if rest.is_empty() {
        0.0
    } else {
        parse_f64(rest).ok()?
    };
    Some(ScoreBound { value, exclusive })
}

/// Parses `min max` of a score range.
pub(crate) fn parse_score_range(
    min: &[u8],
    max: &[u8],
) -> Result<(ScoreBound, ScoreBound), CmdError> {
    match (parse_bound(min), parse_bound(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(CmdError::err("min or max is not a float")),
    }
}

fn parse_lex(b: &[u8]) -> Option<LexBound> {
    match b.split_first()? {
        (b'-', []) => Some(LexBound::Min),
        (b'+', []) => Some(LexBound::Max),
        (b'[', rest) => Some(LexBound::At(rest.to_vec(), true)),
        (b'(', rest) => Some(LexBound::At(rest.to_vec(), false)),
        _ => None,
    }
}

/// Parses `min max` of a lex range.
pub(crate) fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<(LexBound, LexBound), CmdError> {
    match (parse_lex(min), parse_lex(max)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(CmdError::err("min or max not valid string range item")),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

enum Range {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// The members a range selects, in reply order.
fn select(z: &ZSet, range: &Range, rev: bool, limit: Option<(i64, i64)>) -> Vec<(Elem, f64)> {
    let owned = |it: &mut dyn Iterator<Item = (&[u8], f64)>| -> Vec<(Elem, f64)> {
        it.map(|(m, s)| (Elem::from(m), s)).collect()
    };
    let (a, b) = match range {
        Range::Rank(start, end) => {
            let Some((s, e)) = rank_range(*start, *end, z.len()) else {
                return Vec::new();
            };
            let n = z.len();
            return if rev {
                owned(&mut z.range(n - 1 - e, n - s).rev())
            } else {
                owned(&mut z.range(s, e + 1))
            };
        }
        Range::Score(min, max) => z.score_range(*min, *max),
        Range::Lex(min, max) => z.lex_range(min, max),
    };
    let (offset, count) = limit.unwrap_or((0, -1));
    if offset < 0 || offset as usize >= b - a {
        return Vec::new();
    }
    let take = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    let n = (b - a - offset as usize).min(take);
    if rev {
        let hi = b - offset as usize;
        owned(&mut z.range(hi - n, hi).rev())
    } else {
        let lo = a + offset as usize;
        owned(&mut z.range(lo, lo + n))
    }
}

/// The shared ZRANGE parser and executor. `at` is the index of the source
/// key; `dst` is ZRANGESTORE's destination.
fn range_generic(
    ctx: &mut Ctx,
    args: &[&[u8]],
    at: usize,
    mut by: By,
    rev: Option<bool>,
    dst: Option<&[u8]>,
) -> CmdResult {
    let mut dir = rev;
    let (mut withscores, mut limit) = (false, None);
    let mut j = at + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if dst.is_none() && eq_ignore_case(a, b"withscores") {
            withscores = true;
        } else if eq_ignore_case(a, b"limit") && left >= 2 {
            limit = Some((parse_i64(args[j + 1])?, parse_i64(args[j + 2])?));
            j += 2;
        } else if dir.is_none() && eq_ignore_case(a, b"rev") {
            dir = Some(true);
        } else if by == By::Auto && eq_ignore_case(a, b"bylex") {
            by = By::Lex;
        } else if by == By::Auto && eq_ignore_case(a, b"byscore") {
            by = By::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = dir.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    if limit.is_some() && by == By::Rank {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo, mut hi) = (args[at + 1], args[at + 2]);
    if rev && by != By::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let range = match by {
        By::Score => {
            let (a, b) = parse_score_range(lo, hi)?;
            Range::Score(a, b)
        }
        By::Lex => {
            let (a, b) = parse_lex_range(lo, hi)?;
            Range::Lex(a, b)
        }
        _ => Range::Rank(parse_i64(lo)?, parse_i64(hi)?),
    };
    let key = args[at];
    let Some(dst) = dst else {
        let items = ctx.read::<ZSet, _>(key, |z| select(z, &range, rev, limit))?;
        let items = items.unwrap_or_default();
        reply_members(ctx, &items, withscores);
        return Ok(());
    };
    let t = ctx.node.thresholds();
    let mut many = ctx.lock_keys(&[key, dst]);
    let items = many.read::<ZSet, _>(key, |z| select(z, &range, rev, limit))?;
    let mut out = ZSet::default();
    for (m, s) in items.iter().flatten() {
        out.insert(m, *s, &t);
    }
    let n = out.len();
    let (s, h) = many.shard(dst);
    s.put_coll(h, dst, Coll::ZSet(out), 0);
    drop(many);
    encode::integer(ctx.out, n as i64);
    Ok(())
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub(crate) fn zrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range_generic(ctx, args, 1, By::Auto, None, None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
pub(crate) fn zrangestore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range_generic(ctx, args, 2, By::Auto, None, Some(args[1]))
}

/// ZREVRANGE key start stop [WITHSCORES]
pub(crate) fn zrevrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range_generic(ctx, args, 1, By::Rank, Some(true), None)
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub(crate) fn zrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range_generic(ctx, args, 1, By::Score, Some(false), None)
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub(crate) fn zrevrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range_generic(ctx, args, 1, By::Score, Some(true), None)
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub(crate) fn zrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range_generic(ctx, args, 1, By::Lex, Some(false), None)
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub(crate) fn zrevrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range_generic(ctx, args, 1, By::Lex, Some(true), None)
}

fn remove_range(ctx: &mut Ctx, key: &[u8], range: Range) -> CmdResult {
    ctx.reply_write_count::<ZSet>(key, false, |z, _| {
        let (a, b) = match &range {
            Range::Rank(s, e) => match rank_range(*s, *e, z.len()) {
                Some((s, e)) => (s, e + 1),
                None => (0, 0),
            },
            Range::Score(min, max) => z.score_range(*min, *max),
            Range::Lex(min, max) => z.lex_range(min, max),
        };
        z.remove_range(a, b)
    })
}

/// ZREMRANGEBYRANK key start stop
pub(crate) fn zremrangebyrank(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let r = Range::Rank(parse_i64(args[2])?, parse_i64(args[3])?);
    remove_range(ctx, args[1], r)
}

/// ZREMRANGEBYSCORE key min max
pub(crate) fn zremrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (a, b) = parse_score_range(args[2], args[3])?;
    remove_range(ctx, args[1], Range::Score(a, b))
}

/// ZREMRANGEBYLEX key min max
pub(crate) fn zremrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (a, b) = parse_lex_range(args[2], args[3])?;
    remove_range(ctx, args[1], Range::Lex(a, b))
}
