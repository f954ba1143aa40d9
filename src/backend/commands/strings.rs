//! String commands: GET, SET and its variants, MGET/MSET, APPEND, STRLEN,
//! GETRANGE, SETRANGE. Option parsing follows Redis 7.0's
//! `parseExtendedStringArgumentsOrReply` so errors come out in the same
//! order with the same text.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::store::{Entry, Store};
use crate::backend::wire::{encode, eq_ignore_case};
use bytes::Bytes;

/// Largest string value (Redis `proto-max-bulk-len`).
pub const MAX_STRING_LEN: usize = 512 * 1024 * 1024;

/// The unit and base of an expiry option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireUnit {
    /// Seconds from now.
    Ex,
    /// Milliseconds from now.
    Px,
    /// Unix time in seconds.
    ExAt,
    /// Unix time in milliseconds.
    PxAt,
}

/// Options of SET and GETEX, before the expiry number is read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StringOptions<'a> {
    /// Only set if absent.
    pub nx: bool,
    /// Only set if present.
    pub xx: bool,
    /// Reply with the old value.
    pub get: bool,
    /// Keep the existing TTL.
    pub keepttl: bool,
    /// GETEX: drop the TTL.
    pub persist: bool,
    /// The expiry option and its unparsed argument.
    pub expire: Option<(ExpireUnit, &'a [u8])>,
}

/// Parses SET (`is_set`) or GETEX options, starting after the fixed args.
pub fn parse_options(opts: &[Bytes], is_set: bool) -> Result<StringOptions<'_>, CmdError> {
    let mut o = StringOptions::default();
    let mut j = 0;
    while j < opts.len() {
        let a = &opts[j][..];
        let next = opts.get(j + 1);
        let has_expire = o.expire.is_some();
        let expire_unit = [
            (&b"ex"[..], ExpireUnit::Ex),
            (b"px", ExpireUnit::Px),
            (b"exat", ExpireUnit::ExAt),
            (b"pxat", ExpireUnit::PxAt),
        ]
        .into_iter()
        .find(|(n, _)| eq_ignore_case(a, n))
        .map(|(_, u)| u);
        if is_set && eq_ignore_case(a, b"nx") && !o.xx {
            o.nx = true;
        } else if is_set && eq_ignore_case(a, b"xx") && !o.nx {
            o.xx = true;
        } else if is_set && eq_ignore_case(a, b"get") {
            o.get = true;
        } else if is_set && eq_ignore_case(a, b"keepttl") && !o.persist && !has_expire {
            o.keepttl = true;
        } else if !is_set && eq_ignore_case(a, b"persist") && !has_expire && !o.keepttl {
            o.persist = true;
        } else if let (Some(unit), Some(next)) = (expire_unit, next) {
            // The same unit may repeat (the last wins); mixing units may not.
            let clash = o.keepttl || o.persist || o.expire.is_some_and(|(u, _)| u != unit);
            if clash {
                return Err(CmdError::Syntax);
            }
            o.expire = Some((unit, &next[..]));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// Turns an expiry argument into an absolute time in ms, with Redis's
/// checks: positive, and no overflow in unit conversion or adding `now`.
pub fn resolve_expire(
    unit: ExpireUnit,
    raw: &[u8],
    now: u64,
    cmd: &'static str,
) -> Result<u64, CmdError> {
    let v = parse_i64(raw)?;
    let bad = CmdError::InvalidExpire(cmd);
    if v <= 0 {
        return Err(bad);
    }
    let ms = match unit {
        ExpireUnit::Ex | ExpireUnit::ExAt => v.checked_mul(1000).ok_or(bad.clone())?,
        ExpireUnit::Px | ExpireUnit::PxAt => v,
    };
    let at = match unit {
        ExpireUnit::Ex | ExpireUnit::Px => ms.checked_add(now as i64).ok_or(bad)?,
        ExpireUnit::ExAt | ExpireUnit::PxAt => ms,
    };
    Ok(at as u64)
}

/// GET key
pub fn get(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(&args[1]);
    let mut s = store.lock(h, ctx.now);
    match s.read(h, &args[1]) {
        Some(e) => encode::bulk(ctx.out, &e.value),
        None => encode::null(ctx.out, ctx.client.proto),
    }
    Ok(())
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]
pub fn set(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let o = parse_options(&args[3..], true)?;
    let expire_at = match o.expire {
        Some((unit, raw)) => resolve_expire(unit, raw, ctx.now, "set")?,
        None => 0,
    };
    let store = &ctx.node.store;
    let (key, value) = (&args[1][..], &args[2][..]);
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let old = s.get(h, key);
    let found = old.is_some();
    let keep = if o.keepttl {
        old.as_ref().map_or(0, |e| e.expire_at)
    } else {
        0
    };
    if o.get {
        match &old {
            Some(e) => encode::bulk(ctx.out, &e.value),
            None => encode::null(ctx.out, ctx.client.proto),
        }
    }
    if (o.nx && found) || (o.xx && !found) {
        if !o.get {
            encode::null(ctx.out, ctx.client.proto);
        }
        return Ok(());
    }
    let expire_at = if o.expire.is_some() { expire_at } else { keep };
    if expire_at != 0 && expire_at <= ctx.now {
        // Already in the past: the key ends up deleted, as in Redis.
        s.remove(h, key);
    } else {
        s.insert(Entry::new(h, key, value.to_vec(), expire_at, ctx.now));
    }
    if !o.get {
        ctx.ok();
    }
    Ok(())
}

/// Stores `value` under `key` with an absolute expiry (0 = none).
fn put(ctx: &mut Ctx, key: &[u8], value: &[u8], expire_at: u64) {
    let store = &ctx.node.store;
    let h = store.hash(key);
    store
        .lock(h, ctx.now)
        .insert(Entry::new(h, key, value.to_vec(), expire_at, ctx.now));
}

/// SETNX key value
pub fn setnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(&args[1]);
    let mut s = store.lock(h, ctx.now);
    let created = !s.contains(h, &args[1]);
    if created {
        s.insert(Entry::new(h, &args[1], args[2].to_vec(), 0, ctx.now));
    }
    encode::integer(ctx.out, created as i64);
    Ok(())
}

/// SETEX key seconds value
pub fn setex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let at = resolve_expire(ExpireUnit::Ex, &args[2], ctx.now, "setex")?;
    put(ctx, &args[1], &args[3], at);
    ctx.ok();
    Ok(())
}

/// PSETEX key milliseconds value
pub fn psetex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let at = resolve_expire(ExpireUnit::Px, &args[2], ctx.now, "psetex")?;
    put(ctx, &args[1], &args[3], at);
    ctx.ok();
    Ok(())
}

/// GETSET key value (drops the TTL, like SET)
pub fn getset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(&args[1]);
    let old = store
        .lock(h, ctx.now)
        .insert(Entry::new(h, &args[1], args[2].to_vec(), 0, ctx.now));
    ctx.bulk_or_null(old.as_ref().map(|e| &e.value[..]));
    Ok(())
}

/// GETDEL key
pub fn getdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(&args[1]);
    let old = store.lock(h, ctx.now).remove(h, &args[1]);
    ctx.bulk_or_null(old.as_ref().map(|e| &e.value[..]));
    Ok(())
}

/// GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]
pub fn getex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let o = parse_options(&args[2..], false)?;
    let store = &ctx.node.store;
    let (key, now) = (&args[1][..], ctx.now);
    let h = store.hash(key);
    let mut s = store.lock(h, now);
    if s.read(h, key).is_none() {
        encode::null(ctx.out, ctx.client.proto);
        return Ok(());
    }
    let at = match o.expire {
        Some((unit, raw)) => Some(resolve_expire(unit, raw, now, "getex")?),
        None => None,
    };
    let value = match (at, o.persist) {
        (Some(at), _) if at <= now => s.remove(h, key).map(|e| e.value),
        (Some(at), _) => s.update(h, key, |e| {
            e.expire_at = at;
            e.value.clone()
        }),
        (None, true) => s.update(h, key, |e| {
            e.expire_at = 0;
            e.value.clone()
        }),
        (None, false) => s.get(h, key).map(|e| e.value.clone()),
    };
    ctx.bulk_or_null(value.as_deref());
    Ok(())
}

/// MGET key [key ...]
pub fn mget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let store = &ctx.node.store;
    encode::array_len(ctx.out, args.len() - 1);
    for key in &args[1..] {
        let h = store.hash(key);
        let mut s = store.lock(h, ctx.now);
        match s.read(h, key) {
            Some(e) => encode::bulk(ctx.out, &e.value),
            None => encode::null(ctx.out, ctx.client.proto),
        }
    }
    Ok(())
}

/// MSET and MSETNX: all pairs land together (every shard involved is locked
/// first, in shard order), so no reader sees half of them.
fn mset_generic(ctx: &mut Ctx, args: &[Bytes], nx: bool, name: &str) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    let store = &ctx.node.store;
    let pairs: Vec<(u64, &Bytes, &Bytes)> = args[1..]
        .chunks(2)
        .map(|p| (store.hash(&p[0]), &p[0], &p[1]))
        .collect();
    let hashes: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let mut locked = store.lock_many(&hashes, ctx.now);
    if nx
        && pairs.iter().any(|&(h, k, _)| {
            locked[Store::shard_of(h)]
                .as_mut()
                .is_some_and(|s| s.contains(h, k))
        })
    {
        encode::integer(ctx.out, 0);
        return Ok(());
    }
    for &(h, k, v) in &pairs {
        if let Some(s) = locked[Store::shard_of(h)].as_mut() {
            s.insert(Entry::new(h, k, v.to_vec(), 0, ctx.now));
        }
    }
    if nx {
        encode::integer(ctx.out, 1);
    } else {
        ctx.ok();
    }
    Ok(())
}

/// MSET key value [key value ...]
pub fn mset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    mset_generic(ctx, args, false, "mset")
}

/// MSETNX key value [key value ...]
pub fn msetnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    mset_generic(ctx, args, true, "msetnx")
}

/// APPEND key value
pub fn append(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let store = &ctx.node.store;
    let (key, add) = (&args[1][..], &args[2][..]);
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let len = match s.get(h, key).map(|e| e.value.len()) {
        Some(cur) => {
            if cur + add.len() > MAX_STRING_LEN {
                return Err(CmdError::StringTooLong);
            }
            s.update(h, key, |e| {
                e.value.extend_from_slice(add);
                e.value.len()
            })
            .unwrap_or(0)
        }
        None => {
            s.insert(Entry::new(h, key, add.to_vec(), 0, ctx.now));
            add.len()
        }
    };
    encode::integer(ctx.out, len as i64);
    Ok(())
}

/// STRLEN key
pub fn strlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(&args[1]);
    let len = store
        .lock(h, ctx.now)
        .read(h, &args[1])
        .map_or(0, |e| e.value.len());
    encode::integer(ctx.out, len as i64);
    Ok(())
}

/// The byte range GETRANGE returns, by Redis 7's rules for negative and
/// out-of-range indexes.
pub fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if (start < 0 && end < 0 && start > end) || len == 0 {
        return None;
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    (start <= end).then_some((start as usize, end as usize + 1))
}

/// GETRANGE key start end
pub fn getrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (start, end) = (parse_i64(&args[2])?, parse_i64(&args[3])?);
    let store = &ctx.node.store;
    let h = store.hash(&args[1]);
    let mut s = store.lock(h, ctx.now);
    let v = s.read(h, &args[1]).map(|e| &e.value[..]).unwrap_or(b"");
    let slice = clamp_range(start, end, v.len()).map_or(&b""[..], |(a, b)| &v[a..b]);
    encode::bulk(ctx.out, slice);
    Ok(())
}

/// SETRANGE key offset value
pub fn setrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let offset = parse_i64(&args[2])?;
    if offset < 0 {
        return Err(CmdError::OffsetOutOfRange);
    }
    let (key, add) = (&args[1][..], &args[3][..]);
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let cur = s.get(h, key).map(|e| e.value.len());
    if add.is_empty() {
        encode::integer(ctx.out, cur.unwrap_or(0) as i64);
        return Ok(());
    }
    if offset as u64 + add.len() as u64 > MAX_STRING_LEN as u64 {
        return Err(CmdError::StringTooLong);
    }
    let offset = offset as usize;
    let write = |v: &mut Vec<u8>| {
        if v.len() < offset + add.len() {
            v.resize(offset + add.len(), 0);
        }
        v[offset..offset + add.len()].copy_from_slice(add);
        v.len()
    };
    let len = if cur.is_some() {
        s.update(h, key, |e| write(&mut e.value)).unwrap_or(0)
    } else {
        let mut v = Vec::new();
        let len = write(&mut v);
        s.insert(Entry::new(h, key, v, 0, ctx.now));
        len
    };
    encode::integer(ctx.out, len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Bytes> {
        s.split_whitespace()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    #[test]
    fn set_options_parse_like_redis() {
        use ExpireUnit::*;
        let ok = |nx, xx, get, keepttl, expire| {
            Ok(StringOptions {
                nx,
                xx,
                get,
                keepttl,
                persist: false,
                expire,
            })
        };
        let cases: Vec<(&str, Result<StringOptions, CmdError>)> = vec![
            ("", ok(false, false, false, false, None)),
            ("NX", ok(true, false, false, false, None)),
            ("xx get", ok(false, true, true, false, None)),
            (
                "nx GET EX 10",
                ok(true, false, true, false, Some((Ex, b"10"))),
            ),
            (
                "PX 5 px 6",
                ok(false, false, false, false, Some((Px, b"6"))),
            ),
            ("EXAT 1", ok(false, false, false, false, Some((ExAt, b"1")))),
            (
                "pxat 1 GET",
                ok(false, false, true, false, Some((PxAt, b"1"))),
            ),
            ("KEEPTTL", ok(false, false, false, true, None)),
            ("NX XX", Err(CmdError::Syntax)),
            ("EX 10 PX 10", Err(CmdError::Syntax)),
            ("KEEPTTL EX 10", Err(CmdError::Syntax)),
            ("EX 10 KEEPTTL", Err(CmdError::Syntax)),
            ("EX", Err(CmdError::Syntax)),
            ("PERSIST", Err(CmdError::Syntax)),
            ("EX abc NX XX", Err(CmdError::Syntax)),
            ("FOO", Err(CmdError::Syntax)),
        ];
        for (line, want) in cases {
            assert_eq!(parse_options(&args(line), true), want, "SET k v {line}");
        }
    }

    #[test]
    fn getex_options_parse_like_redis() {
        assert!(parse_options(&args("PERSIST"), false).unwrap().persist);
        assert_eq!(
            parse_options(&args("PERSIST EX 1"), false),
            Err(CmdError::Syntax)
        );
        assert_eq!(parse_options(&args("NX"), false), Err(CmdError::Syntax));
        assert_eq!(
            parse_options(&args("KEEPTTL"), false),
            Err(CmdError::Syntax)
        );
    }

    #[test]
    fn expire_arguments_resolve_with_redis_checks() {
        use ExpireUnit::*;
        let now = 1_000_000;
        let cases: &[(ExpireUnit, &str, Result<u64, CmdError>)] = &[
            (Ex, "10", Ok(now + 10_000)),
            (Px, "10", Ok(now + 10)),
            (ExAt, "5", Ok(5_000)),
            (PxAt, "5", Ok(5)),
            (Ex, "0", Err(CmdError::InvalidExpire("set"))),
            (Px, "-1", Err(CmdError::InvalidExpire("set"))),
            (Ex, "abc", Err(CmdError::NotInteger)),
            (
                Ex,
                "9223372036854775807",
                Err(CmdError::InvalidExpire("set")),
            ),
            (
                Px,
                "9223372036854775807",
                Err(CmdError::InvalidExpire("set")),
            ),
        ];
        for (unit, raw, want) in cases {
            assert_eq!(
                &resolve_expire(*unit, raw.as_bytes(), now, "set"),
                want,
                "{unit:?} {raw}"
            );
        }
    }

    #[test]
    fn getrange_clamps_like_redis() {
        type Case = (i64, i64, usize, Option<(usize, usize)>);
        let cases: &[Case] = &[
            (0, -1, 5, Some((0, 5))),
            (1, 3, 5, Some((1, 4))),
            (-3, -1, 5, Some((2, 5))),
            (-1, -3, 5, None),
            (3, 1, 5, None),
            (0, 100, 5, Some((0, 5))),
            (-100, 2, 5, Some((0, 3))),
            (0, 0, 0, None),
            (10, 20, 5, None),
        ];
        for &(s, e, len, want) in cases {
            assert_eq!(clamp_range(s, e, len), want, "{s} {e} {len}");
        }
    }
}
