//! Generic key commands: DEL/UNLINK, EXISTS, TOUCH, TYPE, the EXPIRE family
//! (with Redis 7's NX/XX/GT/LT), TTL/PTTL/EXPIRETIME, PERSIST, and the
//! keyspace walks SCAN, KEYS and RANDOMKEY.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::glob;
use crate::resp::{encode, eq_ignore_case};

/// DEL key [key ...] and UNLINK key [key ...]
pub(crate) fn del(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let mut n = 0;
    for key in &args[1..] {
        let h = store.hash(key);
        // Drop the old value after releasing the shard.
        let old = store.lock(h, ctx.now).remove(h, key);
        n += old.is_some() as i64;
    }
    encode::integer(ctx.out, n);
    Ok(())
}

/// EXISTS key [key ...] (a key named twice counts twice)
pub(crate) fn exists(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let n = args[1..]
        .iter()
        .filter(|key| {
            let h = store.hash(key);
            store.lock(h, ctx.now).contains(h, key)
        })
        .count();
    encode::integer(ctx.out, n as i64);
    Ok(())
}

/// TOUCH key [key ...]
pub(crate) fn touch(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let n = args[1..]
        .iter()
        .filter(|key| {
            let h = store.hash(key);
            store.lock(h, ctx.now).get(h, key).is_some()
        })
        .count();
    encode::integer(ctx.out, n as i64);
    Ok(())
}

/// TYPE key
pub(crate) fn type_(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let kind = store.lock(h, ctx.now).kind_of(h, args[1]);
    encode::simple(ctx.out, kind.map_or("none", |k| k.name()));
    Ok(())
}

/// Which EXPIRE condition applies.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// Parses EXPIRE's trailing options with Redis 7's errors.
pub(crate) fn parse_expire_flags(opts: &[&[u8]]) -> Result<ExpireFlags, CmdError> {
    let mut f = ExpireFlags::default();
    for o in opts {
        match () {
            _ if eq_ignore_case(o, b"nx") => f.nx = true,
            _ if eq_ignore_case(o, b"xx") => f.xx = true,
            _ if eq_ignore_case(o, b"gt") => f.gt = true,
            _ if eq_ignore_case(o, b"lt") => f.lt = true,
            _ => {
                return Err(CmdError::err(format!(
                    "Unsupported option {}",
                    String::from_utf8_lossy(o)
                )))
            }
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(CmdError::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if f.gt && f.lt {
        return Err(CmdError::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    Ok(f)
}

impl ExpireFlags {
    /// Whether a key whose expiry is `current` (0 = none) may get `when`.
    pub(crate) fn allows(&self, current: u64, when: i64) -> bool {
        let has = current != 0;
        !((self.nx && has)
            || (self.xx && !has)
            || (self.gt && (!has || when <= current as i64))
            || (self.lt && has && when >= current as i64))
    }
}

/// The EXPIRE family: `seconds` scales the number, `relative` adds now.
fn expire_generic(
    ctx: &mut Ctx,
    args: &[&[u8]],
    seconds: bool,
    relative: bool,
    name: &'static str,
) -> CmdResult {
    let flags = parse_expire_flags(&args[3..])?;
    let v = parse_i64(args[2])?;
    let bad = CmdError::InvalidExpire(name);
    let ms = if seconds {
        v.checked_mul(1000).ok_or(bad.clone())?
    } else {
        v
    };
    let when = if relative {
        ms.checked_add(ctx.now as i64).ok_or(bad)?
    } else {
        ms
    };
    let store = &ctx.node.store;
    let (key, now) = (args[1], ctx.now);
    let h = store.hash(key);
    let mut s = store.lock(h, now);
    let Some(current) = s.get(h, key).map(|e| e.expire_at) else {
        encode::integer(ctx.out, 0);
        return Ok(());
    };
    if !flags.allows(current, when) {
        encode::integer(ctx.out, 0);
        return Ok(());
    }
    if when <= now as i64 {
        s.remove(h, key);
    } else {
        s.update(h, key, |e| e.expire_at = when as u64);
    }
    encode::integer(ctx.out, 1);
    Ok(())
}

/// EXPIRE key seconds [NX|XX|GT|LT]
pub(crate) fn expire(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, true, true, "expire")
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT]
pub(crate) fn pexpire(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, false, true, "pexpire")
}

/// EXPIREAT key unix-seconds [NX|XX|GT|LT]
pub(crate) fn expireat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, true, false, "expireat")
}

/// PEXPIREAT key unix-ms [NX|XX|GT|LT]
pub(crate) fn pexpireat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, false, false, "pexpireat")
}

/// The key's expiry: None if absent, Some(0) if it has none.
fn expiry_of(ctx: &mut Ctx, key: &[u8]) -> Option<u64> {
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    // Reading a TTL is not an access (Redis: LOOKUP_NOTOUCH), but an expired
    // key is reclaimed here.
    if !s.contains(h, key) {
        return None;
    }
    s.peek(h, key).map(|e| e.expire_at)
}

fn ttl_generic(ctx: &mut Ctx, key: &[u8], ms: bool, absolute: bool) -> CmdResult {
    let reply = match expiry_of(ctx, key) {
        None => -2,
        Some(0) => -1,
        Some(at) if absolute => (if ms { at } else { at / 1000 }) as i64,
        Some(at) => {
            let left = at.saturating_sub(ctx.now);
            (if ms { left } else { (left + 500) / 1000 }) as i64
        }
    };
    encode::integer(ctx.out, reply);
    Ok(())
}

/// TTL key
pub(crate) fn ttl(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, args[1], false, false)
}

/// PTTL key
pub(crate) fn pttl(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, args[1], true, false)
}

/// EXPIRETIME key
pub(crate) fn expiretime(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, args[1], false, true)
}

/// PEXPIRETIME key
pub(crate) fn pexpiretime(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, args[1], true, true)
}

/// PERSIST key
pub(crate) fn persist(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let changed = store
        .lock(h, ctx.now)
        .update(h, args[1], |e| std::mem::take(&mut e.expire_at) != 0);
    encode::integer(ctx.out, changed.unwrap_or(false) as i64);
    Ok(())
}

/// Parses a SCAN cursor as Redis does (`strtoul`: a leading `-` wraps).
pub(crate) fn parse_cursor(b: &[u8]) -> Result<u64, CmdError> {
    crate::resp::parse_cursor(b).ok_or(CmdError::InvalidCursor)
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
pub(crate) fn scan(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let cursor = parse_cursor(args[1])?;
    let (mut pattern, mut count, mut only) = (None, 10usize, None);
    let mut j = 2;
    while j < args.len() {
        let Some(value) = args.get(j + 1) else {
            return Err(CmdError::Syntax);
        };
        if eq_ignore_case(args[j], b"match") {
            pattern = Some(&value[..]).filter(|p| !glob::is_match_all(p));
        } else if eq_ignore_case(args[j], b"count") {
            let n = parse_i64(value)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = n as usize;
        } else if eq_ignore_case(args[j], b"type") {
            only = Some(&value[..]);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    let (next, keys) = ctx.node.store.scan(cursor, count, ctx.now, |e| {
        only.is_none_or(|t| eq_ignore_case(t, e.kind().name().as_bytes()))
            && pattern.is_none_or(|p| glob::matches(p, e.key()))
    });
    encode::array_len(ctx.out, 2);
    encode::bulk(ctx.out, next.to_string().as_bytes());
    encode::array_len(ctx.out, keys.len());
    for k in &keys {
        encode::bulk(ctx.out, k);
    }
    Ok(())
}

/// KEYS pattern
pub(crate) fn keys(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let pattern = args[1];
    let all = glob::is_match_all(pattern);
    let keys = ctx
        .node
        .store
        .keys(ctx.now, |k| all || glob::matches(pattern, k));
    encode::array_len(ctx.out, keys.len());
    for k in &keys {
        encode::bulk(ctx.out, k);
    }
    Ok(())
}

/// RANDOMKEY
pub(crate) fn randomkey(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let key = ctx.node.store.random_key(ctx.now);
    ctx.bulk_or_null(key.as_deref());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::words;

    #[test]
    fn expire_flags_parse_with_redis_errors() {
        let cases: &[(&str, Option<&str>)] = &[
            ("", None),
            ("NX", None),
            ("xx gt", None),
            (
                "NX XX",
                Some("ERR NX and XX, GT or LT options at the same time are not compatible"),
            ),
            (
                "GT LT",
                Some("ERR GT and LT options at the same time are not compatible"),
            ),
            ("FOO", Some("ERR Unsupported option FOO")),
        ];
        for &(line, want) in cases {
            let got = parse_expire_flags(&words(line))
                .err()
                .map(|e| e.to_string());
            assert_eq!(got.as_deref(), want, "{line}");
        }
    }

    #[test]
    fn expire_conditions_treat_no_ttl_as_infinite() {
        let f = |s: &str| parse_expire_flags(&words(s)).unwrap();
        let cases: &[(&str, u64, i64, bool)] = &[
            ("NX", 0, 5, true),
            ("NX", 10, 5, false),
            ("XX", 0, 5, false),
            ("XX", 10, 5, true),
            ("GT", 0, 5, false),
            ("GT", 10, 5, false),
            ("GT", 10, 50, true),
            ("LT", 0, 5, true),
            ("LT", 10, 5, true),
            ("LT", 10, 50, false),
            ("", 10, 50, true),
        ];
        for &(flags, current, when, want) in cases {
            assert_eq!(
                f(flags).allows(current, when),
                want,
                "{flags} {current} {when}"
            );
        }
    }

    #[test]
    fn cursors_parse_like_strtoull() {
        assert_eq!(parse_cursor(b"0"), Ok(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_cursor(b"-1"), Ok(u64::MAX));
        assert_eq!(
            parse_cursor(b"18446744073709551616"),
            Err(CmdError::InvalidCursor)
        );
        assert_eq!(parse_cursor(b"abc"), Err(CmdError::InvalidCursor));
        assert_eq!(parse_cursor(b" 1"), Err(CmdError::InvalidCursor));
    }
}
