//! Hash commands: HSET, HSETNX, HMSET, HGET, HMGET, HSTRLEN, HINCRBY,
//! HINCRBYFLOAT, HKEYS, HVALS, HGETALL, HEXISTS and HRANDFIELD (HSCAN is `elem_scan.rs`'s), with
//! Redis 7.0's argument checks, errors and reply shapes (HDEL and HLEN are
//! `elements.rs`'s, written once for every collection).

use super::counters::format_float;
use super::util::parse_random_count;
use super::{parse_f64, parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::keyspace::lfu::random;
use crate::backend::value::Hash;
use crate::resp::{encode, eq_ignore_case};

fn set_pairs(ctx: &mut Ctx, args: &[&[u8]], name: &str) -> Result<i64, CmdError> {
    if args.len() % 2 == 1 {
        return Err(CmdError::WrongArity(name.into()));
    }
    let added = ctx.write::<Hash, _>(args[1], true, |h, t| {
        args[2..]
            .chunks(2)
            .filter(|p| h.insert(p[0], p[1], t))
            .count()
    })?;
    Ok(added.unwrap_or(0) as i64)
}

/// HSET key field value [field value ...]
pub(crate) fn hset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = set_pairs(ctx, args, "hset")?;
    encode::integer(ctx.out, n);
    Ok(())
}

/// HMSET key field value [field value ...]
pub(crate) fn hmset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    set_pairs(ctx, args, "hmset")?;
    ctx.ok();
    Ok(())
}

/// HSETNX key field value
pub(crate) fn hsetnx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let set = ctx.write::<Hash, _>(args[1], true, |h, t| {
        h.get(args[2]).is_none() && h.insert(args[2], args[3], t)
    })?;
    encode::integer(ctx.out, set.unwrap_or(false) as i64);
    Ok(())
}

/// HGET key field
pub(crate) fn hget(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let v = ctx.read::<Hash, _>(args[1], |h| h.get(args[2]).map(|v| v.to_vec()))?;
    ctx.bulk_or_null(v.flatten().as_deref());
    Ok(())
}

/// HMGET key field [field ...]
pub(crate) fn hmget(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let fields = &args[2..];
    let vals = ctx.read::<Hash, _>(args[1], |h| {
        fields
            .iter()
            .map(|f| h.get(f).map(|v| v.to_vec()))
            .collect::<Vec<_>>()
    })?;
    let vals = vals.unwrap_or_else(|| vec![None; fields.len()]);
    encode::array_len(ctx.out, vals.len());
    vals.iter().for_each(|v| ctx.bulk_or_null(v.as_deref()));
    Ok(())
}

/// HSTRLEN key field
pub(crate) fn hstrlen(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ctx.reply_read_count::<Hash>(args[1], |h| h.get(args[2]).map_or(0, |v| v.len()))
}

/// HEXISTS key field
pub(crate) fn hexists(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = ctx.read::<Hash, _>(args[1], |h| h.get(args[2]).is_some())?;
    encode::integer(ctx.out, n.unwrap_or(false) as i64);
    Ok(())
}

/// HINCRBY key field increment
pub(crate) fn hincrby(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let incr = parse_i64(args[3])?;
    let r = ctx.write::<Hash, _>(args[1], true, |h, t| {
        let cur = match h.get(args[2]) {
            Some(v) => crate::resp::parse_i64(v)
                .ok_or_else(|| CmdError::err("hash value is not an integer"))?,
            None => 0,
        };
        let new = cur.checked_add(incr).ok_or(CmdError::Overflow)?;
        h.insert(args[2], new.to_string().as_bytes(), t);
        Ok(new)
    })?;
    encode::integer(ctx.out, r.unwrap_or(Ok(0))?);
    Ok(())
}

/// HINCRBYFLOAT key field increment
pub(crate) fn hincrbyfloat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let incr = parse_f64(args[3])?;
    if incr.is_infinite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let r = ctx.write::<Hash, _>(args[1], true, |h, t| {
        let cur = match h.get(args[2]) {
            Some(v) => parse_f64(v).map_err(|_| CmdError::err("hash value is not a float"))?,
            None => 0.0,
        };
        let new = cur + incr;
        if !new.is_finite() {
            return Err(CmdError::NanOrInfinity);
        }
        let text = format_float(new);
        h.insert(args[2], text.as_bytes(), t);
        Ok(text)
    })?;
    let text = r.unwrap_or(Ok(String::new()))?;
    encode::bulk(ctx.out, text.as_bytes());
    Ok(())
}

fn getall(ctx: &mut Ctx, key: &[u8], fields: bool, values: bool) -> CmdResult {
    let items = ctx.read::<Hash, _>(key, |h| {
        h.iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect::<Vec<_>>()
    })?;
    let items = items.unwrap_or_default();
    if fields && values {
        encode::map_len(ctx.out, items.len(), ctx.client.proto);
    } else {
        encode::array_len(ctx.out, items.len());
    }
    for (f, v) in &items {
        if fields {
            encode::bulk(ctx.out, f);
        }
        if values {
            encode::bulk(ctx.out, v);
        }
    }
    Ok(())
}

/// HGETALL key
pub(crate) fn hgetall(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    getall(ctx, args[1], true, true)
}

/// HKEYS key
pub(crate) fn hkeys(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    getall(ctx, args[1], true, false)
}

/// HVALS key
pub(crate) fn hvals(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    getall(ctx, args[1], false, true)
}

/// `key [count [WITH…]]` of HRANDFIELD and ZRANDMEMBER (`with` is the
/// keyword): the count if one is given, and whether pairs are asked for.
pub(crate) fn parse_random_args(
    args: &[&[u8]],
    with: &[u8],
) -> Result<(Option<i64>, bool), CmdError> {
    if args.len() < 3 {
        return Ok((None, false));
    }
    let paired = args.len() == 4 && eq_ignore_case(args[3], with);
    let count = parse_random_count(args[2], paired)?;
    if args.len() >= 4 && !paired {
        return Err(CmdError::Syntax);
    }
    Ok((Some(count), paired))
}

/// The picks HRANDFIELD and ZRANDMEMBER list. Without a count the reply is
/// the first pick's name alone (nil if the key is absent), written here,
/// and `None` is returned; a count of 0 lists none.
pub(crate) fn counted_picks<K: AsRef<[u8]>, V>(
    ctx: &mut Ctx,
    count: Option<i64>,
    picked: Option<Vec<(K, V)>>,
) -> Option<Vec<(K, V)>> {
    let Some(count) = count else {
        let first = picked.and_then(|p| p.into_iter().next());
        ctx.bulk_or_null(first.as_ref().map(|p| p.0.as_ref()));
        return None;
    };
    Some(if count == 0 {
        Vec::new()
    } else {
        picked.unwrap_or_default()
    })
}

/// Picks `count` indexes of `len` as Redis's *RANDFIELD/*RANDMEMBER do:
/// negative = |count| picks with repetition, positive = distinct picks
/// (the whole collection, in order, when count >= len).
pub(crate) fn random_picks(len: usize, count: i64) -> Vec<usize> {
    if len == 0 {
        return Vec::new();
    }
    if count < 0 {
        return (0..count.unsigned_abs())
            .map(|_| (random() % len as u64) as usize)
            .collect();
    }
    let count = count as usize;
    if count >= len {
        return (0..len).collect();
    }
    if count * 4 <= len {
        // Few picks from many: draw until `count` distinct, without an
        // index vector as long as the collection.
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let i = (random() % len as u64) as usize;
            if seen.insert(i) {
                out.push(i);
            }
        }
        return out;
    }
    // Partial Fisher–Yates over the indexes.
    let mut idx: Vec<usize> = (0..len).collect();
    for i in 0..count {
        let j = i + (random() % (len - i) as u64) as usize;
        idx.swap(i, j);
    }
    idx.truncate(count);
    idx
}

/// HRANDFIELD key [count [WITHVALUES]]
pub(crate) fn hrandfield(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (count, withvalues) = parse_random_args(args, b"withvalues")?;
    let picked = ctx.read::<Hash, _>(args[1], |h| {
        random_picks(h.len(), count.unwrap_or(1))
            .into_iter()
            .filter_map(|i| h.nth(i))
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect::<Vec<_>>()
    })?;
    let Some(picked) = counted_picks(ctx, count, picked) else {
        return Ok(());
    };
    let resp3 = ctx.client.proto >= 3;
    let per = if withvalues && !resp3 { 2 } else { 1 };
    encode::array_len(ctx.out, picked.len() * per);
    for (f, v) in &picked {
        if withvalues && resp3 {
            encode::array_len(ctx.out, 2);
        }
        encode::bulk(ctx.out, f);
        if withvalues {
            encode::bulk(ctx.out, v);
        }
    }
    Ok(())
}
