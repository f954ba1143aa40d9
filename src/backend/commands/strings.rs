//! String commands: GET, SET and its variants, MGET/MSET, APPEND, STRLEN,
//! GETRANGE, SETRANGE. SET/GETEX option parsing is in `set_options.rs`.

use super::set_options::{parse_options, resolve_expire, ExpireUnit};
use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::keyspace::entry::Entry;
use crate::backend::keyspace::store::Store;
use crate::resp::encode;

/// GET key
pub(crate) fn get(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let mut s = store.lock(h, ctx.now);
    match s.read_string(h, args[1])? {
        Some(e) => encode::bulk(ctx.out, e.value()),
        None => encode::null(ctx.out, ctx.client.proto),
    }
    Ok(())
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]
pub(crate) fn set(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let o = parse_options(&args[3..], true)?;
    let expire_at = match o.expire {
        Some((unit, raw)) => resolve_expire(unit, raw, ctx.now, "set")?,
        None => 0,
    };
    let store = &ctx.node.store;
    let (key, value) = (args[1], args[2]);
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    // The old value matters only to NX, XX, GET and KEEPTTL; a plain SET
    // looks the key up once, in `put`.
    let mut keep = 0;
    if o.nx || o.xx || o.get || o.keepttl {
        let old = s.get(h, key);
        if o.get && old.as_ref().is_some_and(|e| !e.is_string()) {
            return Err(CmdError::WrongType);
        }
        let found = old.is_some();
        if o.keepttl {
            keep = old.as_ref().map_or(0, |e| e.expire_at);
        }
        if o.get {
            match &old {
                Some(e) => encode::bulk(ctx.out, e.value()),
                None => encode::null(ctx.out, ctx.client.proto),
            }
        }
        if (o.nx && found) || (o.xx && !found) {
            if !o.get {
                encode::null(ctx.out, ctx.client.proto);
            }
            return Ok(());
        }
    }
    let expire_at = if o.expire.is_some() { expire_at } else { keep };
    if expire_at != 0 && expire_at <= ctx.now {
        // Already in the past: the key ends up deleted, as in Redis.
        s.remove(h, key);
    } else {
        s.put(h, key, value, expire_at);
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
    store.lock(h, ctx.now).put(h, key, value, expire_at);
}

/// SETNX key value
pub(crate) fn setnx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let mut s = store.lock(h, ctx.now);
    let created = !s.contains(h, args[1]);
    if created {
        s.put(h, args[1], args[2], 0);
    }
    encode::integer(ctx.out, created as i64);
    Ok(())
}

/// SETEX key seconds value
pub(crate) fn setex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let at = resolve_expire(ExpireUnit::Ex, args[2], ctx.now, "setex")?;
    put(ctx, args[1], args[3], at);
    ctx.ok();
    Ok(())
}

/// PSETEX key milliseconds value
pub(crate) fn psetex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let at = resolve_expire(ExpireUnit::Px, args[2], ctx.now, "psetex")?;
    put(ctx, args[1], args[3], at);
    ctx.ok();
    Ok(())
}

/// GETSET key value (drops the TTL, like SET)
pub(crate) fn getset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let mut s = store.lock(h, ctx.now);
    s.get_string(h, args[1])?;
    let entry = Entry::new(args[1], args[2], 0, ctx.now);
    let old = s.insert(h, entry);
    drop(s);
    ctx.bulk_or_null(old.as_ref().map(|e| e.value()));
    Ok(())
}

/// GETDEL key
pub(crate) fn getdel(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let mut s = store.lock(h, ctx.now);
    s.get_string(h, args[1])?;
    let old = s.remove(h, args[1]);
    drop(s);
    ctx.bulk_or_null(old.as_ref().map(|e| e.value()));
    Ok(())
}

/// GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]
pub(crate) fn getex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let o = parse_options(&args[2..], false)?;
    let store = &ctx.node.store;
    let (key, now) = (args[1], ctx.now);
    let h = store.hash(key);
    let mut s = store.lock(h, now);
    if s.read_string(h, key)?.is_none() {
        encode::null(ctx.out, ctx.client.proto);
        return Ok(());
    }
    let at = match o.expire {
        Some((unit, raw)) => Some(resolve_expire(unit, raw, now, "getex")?),
        None => None,
    };
    let value = match (at, o.persist) {
        (Some(at), _) if at <= now => s.remove(h, key).map(|e| e.value().to_vec()),
        (Some(at), _) => s.update(h, key, |e| {
            e.expire_at = at;
            e.value().to_vec()
        }),
        (None, true) => s.update(h, key, |e| {
            e.expire_at = 0;
            e.value().to_vec()
        }),
        (None, false) => s.get(h, key).map(|e| e.value().to_vec()),
    };
    ctx.bulk_or_null(value.as_deref());
    Ok(())
}

/// MGET key [key ...]
pub(crate) fn mget(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    encode::array_len(ctx.out, args.len() - 1);
    for key in &args[1..] {
        let h = store.hash(key);
        let mut s = store.lock(h, ctx.now);
        match s.read(h, key) {
            Some(e) if e.is_string() => encode::bulk(ctx.out, e.value()),
            _ => encode::null(ctx.out, ctx.client.proto),
        }
    }
    Ok(())
}

/// MSET and MSETNX: all pairs land together (every shard involved is locked
/// first, in shard order), so no reader sees half of them.
fn mset_generic(ctx: &mut Ctx, args: &[&[u8]], nx: bool, name: &str) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    let store = &ctx.node.store;
    let pairs: Vec<(u64, &[u8], &[u8])> = args[1..]
        .chunks(2)
        .map(|p| (store.hash(p[0]), p[0], p[1]))
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
            s.put(h, k, v, 0);
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
pub(crate) fn mset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    mset_generic(ctx, args, false, "mset")
}

/// MSETNX key value [key value ...]
pub(crate) fn msetnx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    mset_generic(ctx, args, true, "msetnx")
}

/// APPEND key value
pub(crate) fn append(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let (key, add) = (args[1], args[2]);
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let len = match s.get_string(h, key)?.map(|e| e.value().len()) {
        Some(cur) => {
            if (cur + add.len()) as u64 > ctx.node.settings.max_bulk() {
                return Err(CmdError::StringTooLong);
            }
            s.update(h, key, |e| {
                e.append(add);
                e.value().len()
            })
            .unwrap_or(0)
        }
        None => {
            s.put(h, key, add, 0);
            add.len()
        }
    };
    encode::integer(ctx.out, len as i64);
    Ok(())
}

/// STRLEN key
pub(crate) fn strlen(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let len = store
        .lock(h, ctx.now)
        .read_string(h, args[1])?
        .map_or(0, |e| e.value().len());
    encode::integer(ctx.out, len as i64);
    Ok(())
}

/// The byte range GETRANGE returns, by Redis 7's rules for negative and
/// out-of-range indexes.
pub(crate) fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
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
pub(crate) fn getrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (start, end) = (parse_i64(args[2])?, parse_i64(args[3])?);
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let mut s = store.lock(h, ctx.now);
    let v = s.read_string(h, args[1])?.map(|e| e.value()).unwrap_or(b"");
    let slice = clamp_range(start, end, v.len()).map_or(&b""[..], |(a, b)| &v[a..b]);
    encode::bulk(ctx.out, slice);
    Ok(())
}

/// SETRANGE key offset value
pub(crate) fn setrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let offset = parse_i64(args[2])?;
    if offset < 0 {
        return Err(CmdError::OffsetOutOfRange);
    }
    let (key, add) = (args[1], args[3]);
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let cur = s.get_string(h, key)?.map(|e| e.value().len());
    if add.is_empty() {
        encode::integer(ctx.out, cur.unwrap_or(0) as i64);
        return Ok(());
    }
    if offset as u64 + add.len() as u64 > ctx.node.settings.max_bulk() {
        return Err(CmdError::StringTooLong);
    }
    let offset = offset as usize;
    let len = if cur.is_some() {
        s.update(h, key, |e| {
            e.write_at(offset, add);
            e.value().len()
        })
        .unwrap_or(0)
    } else {
        let mut e = Entry::new(key, b"", 0, ctx.now);
        e.write_at(offset, add);
        let len = e.value().len();
        s.insert(h, e);
        len
    };
    encode::integer(ctx.out, len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
