//! Helpers shared by the collection command families: typed reads and
//! writes of one key, several keys locked together, Redis's double
//! formatting, count and range parsing.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::keyspace::store::{Locked, Store};
use crate::backend::value::{Elem, Thresholds, Typed};
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;

impl Ctx<'_> {
    /// Reads the collection of type `T` at `key` with `f`; `Ok(None)` if
    /// absent, WRONGTYPE if another type.
    pub(crate) fn read<T: Typed, R>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&T) -> R,
    ) -> Result<Option<R>, CmdError> {
        let store = &self.node.store;
        let h = store.hash(key);
        let mut s = store.lock(h, self.now);
        Ok(s.read_coll::<T>(h, key)?.map(f))
    }

    /// Changes the collection of type `T` at `key` with `f` (see
    /// [`Locked::write_coll`]); `f` also gets the encoding thresholds.
    pub(crate) fn write<T: Typed, R>(
        &mut self,
        key: &[u8],
        create: bool,
        f: impl FnOnce(&mut T, &Thresholds) -> R,
    ) -> Result<Option<R>, CmdError> {
        let t = self.node.thresholds();
        let store = &self.node.store;
        let h = store.hash(key);
        let mut s = store.lock(h, self.now);
        s.write_coll::<T, R>(h, key, create, |c| f(c, &t))
    }

    /// Replies with the count `f` reads from the `T` at `key`: 0 if absent,
    /// WRONGTYPE if another type (HLEN, SCARD, ZCOUNT, …).
    pub(crate) fn reply_read_count<T: Typed>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&T) -> usize,
    ) -> CmdResult {
        let n = self.read::<T, _>(key, f)?;
        encode::integer(self.out, n.unwrap_or(0) as i64);
        Ok(())
    }

    /// Changes the `T` at `key` with `f` (see [`Ctx::write`]) and replies
    /// with the count it returns: 0 if absent (HDEL, SREM, ZREM, LPUSH, …).
    pub(crate) fn reply_write_count<T: Typed>(
        &mut self,
        key: &[u8],
        create: bool,
        f: impl FnOnce(&mut T, &Thresholds) -> usize,
    ) -> CmdResult {
        let n = self.write::<T, _>(key, create, f)?;
        encode::integer(self.out, n.unwrap_or(0) as i64);
        Ok(())
    }

    /// Locks the shards of all `keys` at once (in shard order), so a
    /// multi-key command reads and writes them atomically.
    pub(crate) fn lock_keys(&self, keys: &[&[u8]]) -> Many<'_> {
        Many::lock(&self.node.store, keys, self.now)
    }

    /// A score or other double reply: a bulk string in RESP2, `,` in RESP3.
    pub(crate) fn double(&mut self, v: f64) {
        double(self.out, v, self.client.proto);
    }
}

/// Several shards locked together.
pub(crate) struct Many<'a> {
    locked: Vec<Option<Locked<'a>>>,
    store: &'a Store,
}

impl<'a> Many<'a> {
    /// Locks the shards of all `keys` (in shard order) at time `now`.
    pub(crate) fn lock(store: &'a Store, keys: &[&[u8]], now: u64) -> Many<'a> {
        let hashes: Vec<u64> = keys.iter().map(|k| store.hash(k)).collect();
        Many {
            locked: store.lock_many(&hashes, now),
            store,
        }
    }

    /// The locked shard that holds `key`, and the key's hash.
    pub(crate) fn shard(&mut self, key: &[u8]) -> (&mut Locked<'a>, u64) {
        let h = self.store.hash(key);
        let s = self.locked[Store::shard_of(h)]
            .as_mut()
            .expect("lock_keys locked every key's shard");
        (s, h)
    }

    /// A copy of what `f` extracts from the `T` at `key` (None if absent).
    pub(crate) fn read<T: Typed, R>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&T) -> R,
    ) -> Result<Option<R>, CmdError> {
        let (s, h) = self.shard(key);
        Ok(s.read_coll::<T>(h, key)?.map(f))
    }
}

/// The message of `getPositiveLongFromObjectOrReply` without one of its own.
pub(crate) const MUST_BE_POSITIVE: &str = "value is out of range, must be positive";

/// Formats a double as Redis 7.0 replies with it (`%.17g`, `inf`, `-inf`).
pub(crate) fn fmt_double(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{v:.16e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.abs())
    } else {
        trim(&format!("{v:.prec$}", prec = (16 - exp) as usize))
    }
}

/// Appends a double reply.
pub(crate) fn double(out: &mut BytesMut, v: f64, proto: u8) {
    let s = fmt_double(v);
    if proto >= 3 {
        out.extend_from_slice(b",");
        out.extend_from_slice(s.as_bytes());
        out.extend_from_slice(b"\r\n");
    } else {
        encode::bulk(out, s.as_bytes());
    }
}

/// Parses a score as Redis's `strtod` check: a float or `[+-]inf`, no NaN.
pub(crate) fn parse_score(b: &[u8]) -> Result<f64, CmdError> {
    super::parse_f64(b)
}

/// `getPositiveLongFromObjectOrReply`: any failure (not an integer, or
/// negative) gives `msg` (Redis's default: "value is out of range, must be
/// positive").
pub(crate) fn parse_positive(b: &[u8], msg: &str) -> Result<i64, CmdError> {
    match crate::resp::parse_i64(b) {
        Some(v) if v >= 0 => Ok(v),
        _ => Err(CmdError::err(msg)),
    }
}

/// Most picks a negative *RANDMEMBER/HRANDFIELD count may ask for: the
/// reply is built in memory, and Redis would stream billions of repeats.
pub(crate) const MAX_REPEATED_PICKS: i64 = 1 << 24;

/// `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)` (RANDFIELD counts),
/// with repeats bounded by [`MAX_REPEATED_PICKS`].
pub(crate) fn parse_count(b: &[u8]) -> Result<i64, CmdError> {
    let v = parse_i64(b)?;
    if v == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    if v < -MAX_REPEATED_PICKS {
        return Err(CmdError::err(format!(
            "count is too large: at most {MAX_REPEATED_PICKS} repeated picks per call"
        )));
    }
    Ok(v)
}

/// HRANDFIELD's and ZRANDMEMBER's count: [`parse_count`], and with
/// `paired` (WITHVALUES, WITHSCORES) Redis's check that it doubles without
/// overflow, made before the other.
pub(crate) fn parse_random_count(b: &[u8], paired: bool) -> Result<i64, CmdError> {
    let raw = parse_i64(b)?;
    if paired && raw != i64::MIN && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&raw) {
        return Err(CmdError::err("value is out of range"));
    }
    parse_count(b)
}

/// Redis's rank-range rule (LRANGE, ZRANGE): the inclusive `start..=end`
/// clamped to `len`, or None when empty.
pub(crate) fn rank_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end };
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

/// `getRangeLongFromObjectOrReply(1, LONG_MAX, msg)`: numkeys and COUNT
/// of the *MPOP and *INTERCARD commands; any failure gives `msg`.
pub(crate) fn parse_at_least_one(b: &[u8], msg: &str) -> Result<usize, CmdError> {
    match crate::resp::parse_i64(b) {
        Some(v) if v >= 1 => Ok(v as usize),
        _ => Err(CmdError::err(msg)),
    }
}

/// The arguments of LMPOP, ZMPOP and their blocking forms after the
/// timeout: `numkeys key [key ...] <first>|<second> [COUNT count]`.
pub(crate) struct MpopArgs {
    /// Where the keys are in the arguments.
    pub(crate) keys: std::ops::Range<usize>,
    /// Whether the side is `first` (LEFT, MIN).
    pub(crate) first: bool,
    /// COUNT, 1 by default.
    pub(crate) count: usize,
}

/// Parses [`MpopArgs`] starting at `args[numkeys_at]`, in the order and
/// with the errors of Redis's `lmpopGenericCommand`/`zmpopGenericCommand`.
pub(crate) fn parse_mpop(
    args: &[&[u8]],
    numkeys_at: usize,
    first: &[u8],
    second: &[u8],
) -> Result<MpopArgs, CmdError> {
    let n = parse_at_least_one(args[numkeys_at], "numkeys should be greater than 0")?;
    let where_at = numkeys_at.saturating_add(1).saturating_add(n);
    if where_at >= args.len() {
        return Err(CmdError::Syntax);
    }
    let is_first = if eq_ignore_case(args[where_at], first) {
        true
    } else if eq_ignore_case(args[where_at], second) {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && eq_ignore_case(args[j], b"count") && j + 1 < args.len() {
            count = Some(parse_at_least_one(
                args[j + 1],
                "count should be greater than 0",
            )?);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(MpopArgs {
        keys: numkeys_at + 1..where_at,
        first: is_first,
        count: count.unwrap_or(1),
    })
}

/// Writes (member, score) pairs: flat in RESP2 (or when `flat`), as
/// two-element arrays in RESP3.
pub(crate) fn reply_pairs(ctx: &mut Ctx, items: &[(Elem, f64)], nested: bool) {
    let nested = nested && ctx.client.proto >= 3;
    encode::array_len(ctx.out, items.len() * if nested { 1 } else { 2 });
    for (m, s) in items {
        if nested {
            encode::array_len(ctx.out, 2);
        }
        encode::bulk(ctx.out, m);
        double(ctx.out, *s, ctx.client.proto);
    }
}

/// Writes the members of (member, score) pairs, with their scores (as
/// [`reply_pairs`] does) when `withscores`.
pub(crate) fn reply_members(ctx: &mut Ctx, items: &[(Elem, f64)], withscores: bool) {
    if withscores {
        reply_pairs(ctx, items, true);
    } else {
        encode::array_len(ctx.out, items.len());
        items.iter().for_each(|(m, _)| encode::bulk(ctx.out, m));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_format_like_printf_17g() {
        let cases: &[(f64, &str)] = &[
            (1.1, "1.1000000000000001"),
            (2.5, "2.5"),
            (3.0, "3"),
            (-0.5, "-0.5"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1e17, "1e+17"),
            (1e16, "10000000000000000"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (123456789.123, "123456789.123"),
            (1.5e300, "1.5000000000000001e+300"),
        ];
        for &(v, want) in cases {
            assert_eq!(fmt_double(v), want, "{v:?}");
        }
    }

    #[test]
    fn rank_ranges_clamp_like_redis() {
        assert_eq!(rank_range(0, -1, 3), Some((0, 2)));
        assert_eq!(rank_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(rank_range(2, 1, 3), None);
        assert_eq!(rank_range(3, 5, 3), None);
        assert_eq!(rank_range(0, -4, 3), None);
        assert_eq!(rank_range(0, 0, 0), None);
    }
}
