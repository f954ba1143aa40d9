//! Options of SET and GETEX (`NX`, `XX`, `GET`, `KEEPTTL`, `PERSIST`, `EX`,
//! `PX`, `EXAT`, `PXAT`), parsed as Redis 7.0's
//! `parseExtendedStringArgumentsOrReply` does, so errors come out in the
//! same order with the same text.

use super::parse_i64;
use crate::backend::error::CmdError;
use crate::resp::eq_ignore_case;

/// The unit and base of an expiry option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExpireUnit {
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
pub(crate) struct StringOptions<'a> {
    /// Only set if absent.
    pub(crate) nx: bool,
    /// Only set if present.
    pub(crate) xx: bool,
    /// Reply with the old value.
    pub(crate) get: bool,
    /// Keep the existing TTL.
    pub(crate) keepttl: bool,
    /// GETEX: drop the TTL.
    pub(crate) persist: bool,
    /// The expiry option and its unparsed argument.
    pub(crate) expire: Option<(ExpireUnit, &'a [u8])>,
}

/// Parses SET (`is_set`) or GETEX options, starting after the fixed args.
pub(crate) fn parse_options<'a>(
    opts: &[&'a [u8]],
    is_set: bool,
) -> Result<StringOptions<'a>, CmdError> {
    let mut o = StringOptions::default();
    let mut j = 0;
    while j < opts.len() {
        let a = opts[j];
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
pub(crate) fn resolve_expire(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::words;

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
            assert_eq!(parse_options(&words(line), true), want, "SET k v {line}");
        }
    }

    #[test]
    fn getex_options_parse_like_redis() {
        assert!(parse_options(&words("PERSIST"), false).unwrap().persist);
        assert_eq!(
            parse_options(&words("PERSIST EX 1"), false),
            Err(CmdError::Syntax)
        );
        assert_eq!(parse_options(&words("NX"), false), Err(CmdError::Syntax));
        assert_eq!(
            parse_options(&words("KEEPTTL"), false),
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
}
