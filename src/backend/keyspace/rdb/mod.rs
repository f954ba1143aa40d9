//! Redis's own DUMP payloads (RDB versions up to 10, Redis 7.0), read by
//! RESTORE beside the node's format (`keyspace/dump.rs`):
//!
//! ```text
//! RDB type byte | RDB-encoded value | RDB version (u16 LE) | CRC-64 LE
//! ```
//! The CRC covers everything before it. A wrong checksum or a version
//! newer than 10 is `Checksum`; anything inconsistent in the value is
//! `Format` (Redis's `Bad data format`). Values are rebuilt with the
//! node's own thresholds, so they take the encodings the node would give
//! them; empty collections are refused, as Redis refuses them.

mod packed;
mod read;
mod stream;

use super::dump::{crc64, Value};
use crate::backend::value::zset::ZSet;
use crate::backend::value::{Coll, Hash, List, Set, Thresholds};
use packed::Item;
use read::Rdb;
use std::borrow::Cow;

/// The newest RDB version read (Redis 7.0).
const RDB_VERSION: u16 = 10;

/// Why a payload is refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RdbError {
    /// `ERR DUMP payload version or checksum are wrong`
    Checksum,
    /// `ERR Bad data format`
    Format,
}

/// The value in a Redis DUMP payload.
pub(crate) fn decode<'a>(p: &'a [u8], t: &Thresholds) -> Result<Value<'a>, RdbError> {
    if p.len() < 10 {
        return Err(RdbError::Checksum);
    }
    let (body, footer) = p.split_at(p.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION || crc64(&p[..p.len() - 8]).to_le_bytes() != footer[2..] {
        return Err(RdbError::Checksum);
    }
    object(body, t).ok_or(RdbError::Format)
}

fn object<'a>(body: &'a [u8], t: &Thresholds) -> Option<Value<'a>> {
    let mut r = Rdb(body);
    let ty = r.byte()?;
    let coll = match ty {
        0 => {
            let s = r.string()?;
            return r.0.is_empty().then_some(Value::Str(s));
        }
        1 => {
            let n = r.count(1)?;
            list((0..n).map(|_| r.string()).collect::<Option<Vec<_>>>()?, t)
        }
        10 => list(items(packed::ziplist(&r.string()?)?), t),
        14 | 18 => quicklist(&mut r, ty == 18, t)?,
        2 => {
            let n = r.count(1)?;
            set((0..n).map(|_| r.string()).collect::<Option<Vec<_>>>()?, t)?
        }
        11 => {
            let ints = packed::intset(&r.string()?)?;
            set(
                ints.iter()
                    .map(|i| Cow::Owned(i.to_string().into_bytes()))
                    .collect(),
                t,
            )?
        }
        20 => set(items(packed::listpack(&r.string()?)?), t)?,
        3 | 5 => {
            let n = r.count(2)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                let m = r.string()?;
                let s = if ty == 3 {
                    r.text_double()?
                } else {
                    r.binary_double()?
                };
                pairs.push((m, s));
            }
            zset(pairs, t)?
        }
        12 | 17 => {
            let blob = r.string()?;
            let v = if ty == 12 {
                packed::ziplist(&blob)?
            } else {
                packed::listpack(&blob)?
            };
            if v.len() % 2 == 1 {
                return None;
            }
            let pairs = v.chunks(2).map(|p| Some((p[0].bytes(), p[1].score()?)));
            zset(pairs.collect::<Option<Vec<_>>>()?, t)?
        }
        4 => {
            let n = r.count(2)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                pairs.push((r.string()?, r.string()?));
            }
            hash(pairs, t)?
        }
        9 => {
            let blob = r.string()?;
            let pairs = packed::zipmap(&blob)?;
            hash(
                pairs
                    .into_iter()
                    .map(|(f, v)| (Cow::Borrowed(f), Cow::Borrowed(v)))
                    .collect(),
                t,
            )?
        }
        13 | 16 => {
            let blob = r.string()?;
            let v = if ty == 13 {
                packed::ziplist(&blob)?
            } else {
                packed::listpack(&blob)?
            };
            if v.len() % 2 == 1 {
                return None;
            }
            hash(
                v.chunks(2).map(|p| (p[0].bytes(), p[1].bytes())).collect(),
                t,
            )?
        }
        15 | 19 | 21 => Coll::Stream(Box::new(stream::load(&mut r, ty, t)?)),
        _ => return None,
    };
    (r.0.is_empty() && !coll.is_empty()).then_some(Value::Coll(coll))
}

fn items(v: Vec<Item<'_>>) -> Vec<Cow<'_, [u8]>> {
    v.into_iter().map(Item::bytes).collect()
}

/// RDB_TYPE_LIST_QUICKLIST (ziplist nodes) and _2 (plain or listpack nodes).
fn quicklist(r: &mut Rdb, v2: bool, t: &Thresholds) -> Option<Coll> {
    let nodes = r.count(if v2 { 2 } else { 1 })?;
    let mut l = List::default();
    for _ in 0..nodes {
        let container = if v2 { r.len()? } else { 2 };
        let blob = r.string()?;
        match container {
            1 => l.push(&blob, false),
            2 => {
                let v = if v2 {
                    packed::listpack(&blob)?
                } else {
                    packed::ziplist(&blob)?
                };
                // Redis skips an empty node (and refuses an empty list).
                v.into_iter().for_each(|i| l.push(&i.bytes(), false));
            }
            _ => return None,
        }
    }
    l.settle(t);
    Some(Coll::List(l))
}

fn list(v: Vec<Cow<'_, [u8]>>, t: &Thresholds) -> Coll {
    let mut l = List::default();
    v.iter().for_each(|i| l.push(i, false));
    l.settle(t);
    Coll::List(l)
}

fn set(v: Vec<Cow<'_, [u8]>>, t: &Thresholds) -> Option<Coll> {
    let mut s = Set::default();
    for m in &v {
        if !s.insert(m, t) {
            return None;
        }
    }
    Some(Coll::Set(s))
}

fn zset(v: Vec<(Cow<'_, [u8]>, f64)>, t: &Thresholds) -> Option<Coll> {
    let mut z = ZSet::default();
    for (m, s) in &v {
        if s.is_nan() || z.insert(m, *s, t).is_some() {
            return None;
        }
    }
    Some(Coll::ZSet(z))
}

/// A hash's fields and values as read, borrowed from the payload where they can be.
type Pairs<'a> = Vec<(Cow<'a, [u8]>, Cow<'a, [u8]>)>;

fn hash(v: Pairs<'_>, t: &Thresholds) -> Option<Coll> {
    let mut h = Hash::default();
    for (f, x) in &v {
        if !h.insert(f, x, t) {
            return None;
        }
    }
    Some(Coll::Hash(h))
}

#[cfg(test)]
mod tests;
