//! SORT and SORT_RO over lists, sets and sorted sets: BY (with `*` and
//! `->field` hash patterns, or a constant to skip sorting), GET (`#`,
//! patterns), LIMIT, ASC/DESC, ALPHA and STORE, as Redis 7.0's
//! `sortCommandGeneric` does them.
//!
//! The elements are copied out under the source key's shard lock, which is
//! released before BY/GET patterns look up other keys (each under its own
//! short lock), so SORT never holds two shards and cannot deadlock. A
//! pattern lookup may therefore see a write that landed mid-SORT.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::{Coll, Elem, Kind, List};
use crate::resp::{encode, eq_ignore_case};
use std::cmp::Ordering;

struct Opts<'a> {
    by: Option<&'a [u8]>,
    dontsort: bool,
    gets: Vec<&'a [u8]>,
    limit: Option<(i64, i64)>,
    desc: bool,
    alpha: bool,
    store: Option<&'a [u8]>,
}

fn parse<'a>(args: &[&'a [u8]], readonly: bool) -> Result<Opts<'a>, CmdError> {
    let mut o = Opts {
        by: None,
        dontsort: false,
        gets: Vec::new(),
        limit: None,
        desc: false,
        alpha: false,
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if eq_ignore_case(a, b"asc") {
            o.desc = false;
        } else if eq_ignore_case(a, b"desc") {
            o.desc = true;
        } else if eq_ignore_case(a, b"alpha") {
            o.alpha = true;
        } else if eq_ignore_case(a, b"limit") && left >= 2 {
            let (s, c) = (parse_i64(args[j + 1]), parse_i64(args[j + 2]));
            o.limit = Some((s?, c?));
            j += 2;
        } else if !readonly && eq_ignore_case(a, b"store") && left >= 1 {
            o.store = Some(args[j + 1]);
            j += 1;
        } else if eq_ignore_case(a, b"by") && left >= 1 {
            o.by = Some(args[j + 1]);
            o.dontsort = !args[j + 1].contains(&b'*');
            j += 1;
        } else if eq_ignore_case(a, b"get") && left >= 1 {
            o.gets.push(args[j + 1]);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the
/// first `*` is replaced by the element and the key read as a string, or
/// as a hash field after `->`.
fn lookup(ctx: &Ctx, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(elem.to_vec());
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    let arrow = pattern[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&i| i + 2 < pattern.len());
    let key_end = arrow.unwrap_or(pattern.len());
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    let store = &ctx.node.store;
    let h = store.hash(&key);
    let mut s = store.lock(h, ctx.now);
    let e = s.read(h, &key)?;
    match (arrow, e.coll()) {
        (None, None) => Some(e.value().to_vec()),
        (Some(i), Some(Coll::Hash(hash))) => hash.get(&pattern[i + 2..]).map(|v| v.to_vec()),
        _ => None,
    }
}

/// `strtod` over the whole text, as SORT converts scores.
fn score_of(v: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(v).ok()?.trim_start();
    if s.is_empty() {
        return Some(0.0);
    }
    let f: f64 = s.parse().ok()?;
    let literal_inf = s
        .trim_start_matches(['+', '-'])
        .to_ascii_lowercase()
        .starts_with("inf");
    (!f.is_nan() && (f.is_finite() || literal_inf)).then_some(f)
}

fn sort_generic(ctx: &mut Ctx, args: &[&[u8]], readonly: bool) -> CmdResult {
    let mut o = parse(args, readonly)?;
    let key = args[1];
    let store = &ctx.node.store;
    let h = store.hash(key);
    let (kind, mut elems): (Option<Kind>, Vec<Elem>) = {
        let mut s = store.lock(h, ctx.now);
        match s.read(h, key) {
            None => (None, Vec::new()),
            Some(e) => match e.coll() {
                Some(Coll::List(l)) => (Some(Kind::List), l.items.iter().cloned().collect()),
                Some(Coll::Set(set)) => (Some(Kind::Set), set.members()),
                Some(Coll::ZSet(z)) => (
                    Some(Kind::ZSet),
                    z.iter().map(|(m, _)| Elem::from(m)).collect(),
                ),
                _ => return Err(CmdError::WrongType),
            },
        }
    };
    if o.dontsort && kind == Some(Kind::Set) && (o.store.is_some() || ctx.client.script) {
        // Redis sorts a STOREd set, or one sorted for a script, so the
        // result is reproducible.
        (o.dontsort, o.alpha, o.by) = (false, true, None);
    }
    if o.dontsort && matches!(kind, Some(Kind::ZSet | Kind::List)) && o.desc {
        elems.reverse();
    }
    let len = elems.len() as i64;
    let (ls, lc) = o.limit.unwrap_or((0, -1));
    let mut start = ls.max(0);
    let mut end = if lc < 0 {
        len - 1
    } else {
        start.saturating_add(lc) - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    end = end.min(len - 1);
    if !o.dontsort {
        let mut keyed: Vec<(Elem, Option<Vec<u8>>, f64)> = Vec::with_capacity(elems.len());
        for e in elems {
            let by = match o.by {
                Some(p) => lookup(ctx, p, &e),
                None => Some(e.to_vec()),
            };
            let score = if o.alpha {
                0.0
            } else {
                match &by {
                    Some(v) => score_of(v).ok_or_else(|| {
                        CmdError::err("One or more scores can't be converted into double")
                    })?,
                    None => 0.0,
                }
            };
            keyed.push((e, by, score));
        }
        let (alpha, bypattern, desc) = (o.alpha, o.by.is_some(), o.desc);
        keyed.sort_by(|a, b| {
            let cmp = if !alpha {
                a.2.partial_cmp(&b.2)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            } else if bypattern {
                match (&a.1, &b.1) {
                    (None, None) => Ordering::Equal,
                    (None, _) => Ordering::Less,
                    (_, None) => Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                a.0.cmp(&b.0)
            };
            if desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        elems = keyed.into_iter().map(|k| k.0).collect();
    }
    let picked: &[Elem] = if start <= end && end >= 0 {
        &elems[start as usize..=end as usize]
    } else {
        &[]
    };
    let mut values: Vec<Option<Vec<u8>>> = Vec::new();
    for e in picked {
        if o.gets.is_empty() {
            values.push(Some(e.to_vec()));
        }
        for g in &o.gets {
            values.push(lookup(ctx, g, e));
        }
    }
    match o.store {
        None => {
            encode::array_len(ctx.out, values.len());
            values.iter().for_each(|v| ctx.bulk_or_null(v.as_deref()));
        }
        Some(dst) => {
            let t = ctx.node.thresholds();
            let mut l = List::default();
            values
                .iter()
                .for_each(|v| l.push(v.as_deref().unwrap_or(b""), false));
            l.settle(&t);
            let n = l.len();
            let h = store.hash(dst);
            store.lock(h, ctx.now).put_coll(h, dst, Coll::List(l), 0);
            encode::integer(ctx.out, n as i64);
        }
    }
    Ok(())
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE dst]
pub(crate) fn sort(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, args, false)
}

/// SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
pub(crate) fn sort_ro(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, args, true)
}
