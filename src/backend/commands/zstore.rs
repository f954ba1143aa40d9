//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms and
//! ZINTERCARD, over sorted sets and plain sets (members scoring 1), with
//! WEIGHTS and AGGREGATE SUM|MIN|MAX. Every input (and the destination) is
//! locked together, and inputs are looked up before options are parsed,
//! as in Redis 7.0, so a WRONGTYPE wins over a syntax error.

use super::util::{parse_positive, reply_members};
use super::{parse_f64, parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::zset::ZSet;
use crate::backend::value::{Coll, Elem, Kind, Set};
use crate::resp::{encode, eq_ignore_case};
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

type Input = Option<Vec<(Elem, f64)>>;

/// Reads every input key (None = missing) under the locks of `keys` and `dst`.
fn inputs(ctx: &mut Ctx, keys: &[&[u8]], dst: Option<&[u8]>) -> Result<Vec<Input>, CmdError> {
    let mut all = keys.to_vec();
    all.extend(dst);
    let mut many = ctx.lock_keys(&all);
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let (s, h) = many.shard(k);
        let items = match s.kind_of(h, k) {
            None => None,
            Some(Kind::ZSet) => {
                many.read::<ZSet, _>(k, |z| z.iter().map(|(m, s)| (Elem::from(m), s)).collect())?
            }
            Some(Kind::Set) => {
                many.read::<Set, _>(k, |s| s.members().into_iter().map(|m| (m, 1.0)).collect())?
            }
            Some(_) => return Err(CmdError::WrongType),
        };
        out.push(items);
    }
    Ok(out)
}

fn aggregate(acc: &mut f64, v: f64, agg: Agg) {
    match agg {
        Agg::Sum => {
            *acc += v;
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        Agg::Min => *acc = acc.min(v),
        Agg::Max => *acc = acc.max(v),
    }
}

fn weighted(s: f64, w: f64) -> f64 {
    let v = s * w;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Computes the result as (member, score) in no particular order.
fn compute(sets: Vec<Input>, weights: &[f64], op: Op, agg: Agg, limit: usize) -> Vec<(Elem, f64)> {
    let mut srcs: Vec<(Vec<(Elem, f64)>, f64)> = Vec::new();
    if op == Op::Inter && sets.iter().any(|s| s.is_none()) {
        return Vec::new();
    }
    if op == Op::Diff {
        let Some(Some(first)) = sets.first().cloned() else {
            return Vec::new();
        };
        let others: Vec<HashMap<Elem, f64>> = sets[1..]
            .iter()
            .flatten()
            .map(|v| v.iter().cloned().collect())
            .collect();
        return first
            .into_iter()
            .filter(|(m, _)| !others.iter().any(|o| o.contains_key(m)))
            .collect();
    }
    for (i, s) in sets.into_iter().enumerate() {
        srcs.push((
            s.unwrap_or_default(),
            weights.get(i).copied().unwrap_or(1.0),
        ));
    }
    // Smallest first, as Redis orders them (it decides the summing order).
    srcs.sort_by_key(|(v, _)| v.len());
    match op {
        Op::Union => {
            let mut acc: HashMap<Elem, f64> = HashMap::new();
            let mut order: Vec<Elem> = Vec::new();
            for (items, w) in &srcs {
                for (m, s) in items {
                    let v = weighted(*s, *w);
                    match acc.get_mut(m) {
                        Some(a) => aggregate(a, v, agg),
                        None => {
                            acc.insert(m.clone(), v);
                            order.push(m.clone());
                        }
                    }
                }
            }
            order
                .into_iter()
                .map(|m| {
                    let s = acc[&m];
                    (m, s)
                })
                .collect()
        }
        _ => {
            let maps: Vec<(HashMap<Elem, f64>, f64)> = srcs[1..]
                .iter()
                .map(|(v, w)| (v.iter().cloned().collect(), *w))
                .collect();
            let mut out = Vec::new();
            let (first, w0) = &srcs[0];
            for (m, s) in first {
                if limit != 0 && out.len() >= limit {
                    break;
                }
                let mut score = weighted(*s, *w0);
                let mut all = true;
                for (map, w) in &maps {
                    match map.get(m) {
                        Some(v) => aggregate(&mut score, weighted(*v, *w), agg),
                        None => {
                            all = false;
                            break;
                        }
                    }
                }
                if all {
                    out.push((m.clone(), score));
                }
            }
            out
        }
    }
}

fn algebra(
    ctx: &mut Ctx,
    args: &[&[u8]],
    op: Op,
    name: &str,
    store: bool,
    card: bool,
) -> CmdResult {
    let at = if store { 2 } else { 1 };
    let n = parse_i64(args[at])?;
    if n < 1 {
        return Err(CmdError::err(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    if n as usize > args.len() - at - 1 {
        return Err(CmdError::Syntax);
    }
    let n = n as usize;
    let keys = &args[at + 1..at + 1 + n];
    let dst = store.then(|| args[1]);
    let sets = inputs(ctx, keys, dst)?;
    let (mut weights, mut agg, mut withscores, mut limit) = (Vec::new(), Agg::Sum, false, 0);
    let mut j = at + 1 + n;
    while j < args.len() {
        let left = args.len() - j;
        if card && left >= 2 && eq_ignore_case(args[j], b"limit") {
            limit = parse_positive(args[j + 1], "LIMIT can't be negative")? as usize;
            j += 2;
        } else if card {
            return Err(CmdError::Syntax);
        } else if op != Op::Diff && left > n && eq_ignore_case(args[j], b"weights") {
            weights = args[j + 1..j + 1 + n]
                .iter()
                .map(|w| parse_f64(w).map_err(|_| CmdError::err("weight value is not a float")))
                .collect::<Result<_, _>>()?;
            j += 1 + n;
        } else if op != Op::Diff && left >= 2 && eq_ignore_case(args[j], b"aggregate") {
            let a = args[j + 1];
            agg = if eq_ignore_case(a, b"sum") {
                Agg::Sum
            } else if eq_ignore_case(a, b"min") {
                Agg::Min
            } else if eq_ignore_case(a, b"max") {
                Agg::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && eq_ignore_case(args[j], b"withscores") {
            withscores = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if card {
        let n = compute(sets, &weights, op, agg, limit).len();
        encode::integer(ctx.out, n as i64);
        return Ok(());
    }
    let t = ctx.node.thresholds();
    let mut z = ZSet::default();
    for (m, s) in compute(sets, &weights, op, agg, 0) {
        z.insert(&m, s, &t);
    }
    if let Some(dst) = dst {
        let n = z.len();
        let store = &ctx.node.store;
        let h = store.hash(dst);
        store.lock(h, ctx.now).put_coll(h, dst, Coll::ZSet(z), 0);
        encode::integer(ctx.out, n as i64);
        return Ok(());
    }
    let items: Vec<(Elem, f64)> = z.iter().map(|(m, s)| (Elem::from(m), s)).collect();
    reply_members(ctx, &items, withscores);
    Ok(())
}

/// ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub(crate) fn zunion(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    algebra(ctx, args, Op::Union, "zunion", false, false)
}

/// ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub(crate) fn zinter(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    algebra(ctx, args, Op::Inter, "zinter", false, false)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
pub(crate) fn zdiff(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    algebra(ctx, args, Op::Diff, "zdiff", false, false)
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE …]
pub(crate) fn zunionstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    algebra(ctx, args, Op::Union, "zunionstore", true, false)
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE …]
pub(crate) fn zinterstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    algebra(ctx, args, Op::Inter, "zinterstore", true, false)
}

/// ZDIFFSTORE destination numkeys key [key ...]
pub(crate) fn zdiffstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    algebra(ctx, args, Op::Diff, "zdiffstore", true, false)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub(crate) fn zintercard(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    algebra(ctx, args, Op::Inter, "zintercard", false, true)
}
