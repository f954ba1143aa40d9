//! Counter commands on string values: INCR, DECR, INCRBY, DECRBY and
//! INCRBYFLOAT. Values stay strings (decimal text); the TTL is kept.

use super::{parse_f64, parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::resp::encode;

fn incr_by(ctx: &mut Ctx, key: &[u8], delta: i64) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let current = match s.get(h, key) {
        Some(e) => Some(parse_i64(e.str_value()?)?),
        None => None,
    };
    let value = current
        .unwrap_or(0)
        .checked_add(delta)
        .ok_or(CmdError::Overflow)?;
    let text = value.to_string().into_bytes();
    if current.is_some() {
        s.update(h, key, |e| e.set_value(&text));
    } else {
        s.put(h, key, &text, 0);
    }
    encode::integer(ctx.out, value);
    Ok(())
}

/// INCR key
pub(crate) fn incr(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    incr_by(ctx, args[1], 1)
}

/// DECR key
pub(crate) fn decr(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    incr_by(ctx, args[1], -1)
}

/// INCRBY key increment
pub(crate) fn incrby(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let delta = parse_i64(args[2])?;
    incr_by(ctx, args[1], delta)
}

/// DECRBY key decrement
pub(crate) fn decrby(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let delta = parse_i64(args[2])?;
    if delta == i64::MIN {
        return Err(CmdError::DecrementOverflow);
    }
    incr_by(ctx, args[1], -delta)
}

/// INCRBYFLOAT key increment
pub(crate) fn incrbyfloat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let key = args[1];
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let current = match s.get(h, key) {
        Some(e) => Some(parse_f64(e.str_value()?)?),
        None => None,
    };
    let incr = parse_f64(args[2])?;
    let value = current.unwrap_or(0.0) + incr;
    if !value.is_finite() {
        return Err(CmdError::NanOrInfinity);
    }
    let text = format_float(value).into_bytes();
    encode::bulk(ctx.out, &text);
    if current.is_some() {
        s.update(h, key, |e| e.set_value(&text));
    } else {
        s.put(h, key, &text, 0);
    }
    Ok(())
}

/// Formats like Redis's INCRBYFLOAT (`%.17Lf`, trailing zeros trimmed).
/// Redis computes in 80-bit long double, so binary noise such as
/// 0.1 + 0.2 = 0.30000000000000004 never shows; with f64 we hide it by
/// preferring the 15-significant-digit rendering when it is within two
/// ulps of the exact result.
pub(crate) fn format_float(v: f64) -> String {
    let shortest = format!("{v}");
    let digits = shortest
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|&c| c == b'0')
        .count();
    if digits <= 15 {
        return shortest;
    }
    let short: f64 = format!("{v:.14e}").parse().unwrap_or(v);
    let ulp = f64::from_bits(v.abs().to_bits() + 1) - v.abs();
    if (short - v).abs() <= 2.0 * ulp {
        format!("{short}")
    } else {
        shortest
    }
}

#[cfg(test)]
mod tests {
    use super::format_float;

    #[test]
    fn floats_format_like_redis_long_double_output() {
        let cases: &[(f64, &str)] = &[
            (0.1, "0.1"),
            (0.1 + 0.2, "0.3"),
            (3.0, "3"),
            (3.00000015, "3.00000015"),
            (1e20, "100000000000000000000"),
            (-0.5, "-0.5"),
            (10.5, "10.5"),
            (1.0 / 3.0, "0.3333333333333333"),
        ];
        for &(v, want) in cases {
            assert_eq!(format_float(v), want, "{v:?}");
        }
    }
}
