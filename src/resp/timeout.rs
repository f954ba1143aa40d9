//! The timeout argument of the blocking commands, parsed as Redis 7.0's
//! `getTimeoutFromObjectOrReply` does: seconds as a C `long double`
//! (`strtold`: decimals, hex floats, `inf`), turned into milliseconds with
//! `ceill`; milliseconds as an integer for WAIT.
//!
//! Used by the built-in node's blocking commands and by the proxy's
//! blocking pops over several nodes; pure, no state.

/// A timeout Redis refuses: the message after `ERR `.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TimeoutError(pub(crate) &'static str);

/// `string2ld`'s bound on the argument length.
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;
/// Decimal exponents beyond which a C `long double` (x87, 64-bit mantissa)
/// overflows or underflows, which `strtold` reports as ERANGE.
const LD_MAX_EXP10: i64 = 4932;
const LD_MIN_EXP10: i64 = -4951;
/// The same bounds for binary exponents (hex floats).
const LD_MAX_EXP2: i64 = 16384;
const LD_MIN_EXP2: i64 = -16445;
/// 2^63: `(long long)` of anything at or beyond it is LLONG_MIN on x86.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

fn not_float() -> TimeoutError {
    TimeoutError("timeout is not a float or out of range")
}

fn negative() -> TimeoutError {
    TimeoutError("timeout is negative")
}

/// A blocking pop's timeout in seconds: milliseconds to wait, 0 = forever.
/// `-0.0001` is 0 (ceil of -0.1 ms), `1e-5` is 1 ms, `inf` and anything
/// at or past 2^63 ms is "negative" (the C cast yields LLONG_MIN), as in
/// redis-server 7.0. (An `f64` carries 53 bits where the x87 `long double`
/// carries 64, so within about 2^-52 of the 2^63 ms edge the answer may
/// differ: a timeout of some 292 million years.)
pub(crate) fn parse_secs(b: &[u8]) -> Result<u64, TimeoutError> {
    let v = parse_long_double(b).ok_or_else(not_float)?;
    let ms = (v * 1000.0).ceil();
    if !(-TWO_POW_63..TWO_POW_63).contains(&ms) || ms < 0.0 {
        return Err(negative());
    }
    Ok(ms as u64)
}

/// WAIT's timeout: integer milliseconds, 0 = forever.
pub(crate) fn parse_ms(b: &[u8]) -> Result<u64, TimeoutError> {
    let v = crate::resp::parse_i64(b)
        .ok_or(TimeoutError("timeout is not an integer or out of range"))?;
    u64::try_from(v).map_err(|_| negative())
}

/// Redis's `string2ld` over `strtold`, with the value as an `f64`: `None`
/// where Redis says "not a float". A magnitude a `long double` holds but an
/// `f64` does not comes back as infinity (huge) or the smallest normal
/// `f64` (tiny), which gives the same timeout after the conversion to ms.
pub(crate) fn parse_long_double(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b.len() >= MAX_LONG_DOUBLE_CHARS {
        return None;
    }
    // string2ld wants strtold to consume every byte (a NUL stops it early).
    if is_c_space(b[0]) {
        return None;
    }
    let (neg, body) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let v = if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        f64::INFINITY
    } else if body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
        parse_hex(&body[2..])?
    } else {
        parse_decimal(body)?
    };
    Some(if neg { -v } else { v })
}

/// C's `isspace` in the "C" locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `digits[.digits][e[+-]digits]`, at least one mantissa digit, nothing after.
fn parse_decimal(s: &[u8]) -> Option<f64> {
    let (int, frac, exp) = split_number(s, |c| c.is_ascii_digit(), b'e')?;
    let text = std::str::from_utf8(s).ok()?;
    let v: f64 = text.parse().ok()?;
    // Where the first significant digit sits, as a power of ten.
    let Some(lead) = leading_power(int, frac, 1) else {
        return Some(0.0);
    };
    in_long_double_range(v, lead.saturating_add(exp), LD_MAX_EXP10, LD_MIN_EXP10)
}

/// The part after `0x`: `hex[.hex][p[+-]digits]`.
fn parse_hex(s: &[u8]) -> Option<f64> {
    // strtold reads the "0" and stops at the "x" when no hex digit follows:
    // trailing characters.
    let (int, frac, exp) = split_number(s, |c| c.is_ascii_hexdigit(), b'p')?;
    let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as f64;
    let mut mantissa = 0.0f64;
    int.iter()
        .for_each(|&c| mantissa = mantissa * 16.0 + digit(c));
    let mut scale = 1.0f64;
    for &c in frac {
        scale /= 16.0;
        mantissa += digit(c) * scale;
    }
    let Some(lead) = leading_power(int, frac, 4) else {
        return Some(0.0);
    };
    let v = mantissa * 2f64.powi(exp.clamp(-2000, 2000) as i32);
    in_long_double_range(v, lead.saturating_add(exp), LD_MAX_EXP2, LD_MIN_EXP2)
}

/// `int[.frac][marker exponent]` with digits told by `is_digit`: the two
/// digit runs and the exponent. `None` without a mantissa digit or with
/// anything after the exponent.
fn split_number(
    s: &[u8],
    is_digit: impl Fn(u8) -> bool + Copy,
    marker: u8,
) -> Option<(&[u8], &[u8], i64)> {
    let (int, rest) = split_digits(s, is_digit);
    let (frac, rest) = match rest.first() {
        Some(b'.') => split_digits(&rest[1..], is_digit),
        _ => (&rest[..0], rest),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    Some((int, frac, parse_exponent(rest, marker)?))
}

/// The power of the base (10, or 2 with `bits` 4 for hex digits) at which
/// the first non-zero digit of `int.frac` sits; `None` when all are zero.
fn leading_power(int: &[u8], frac: &[u8], bits: i64) -> Option<i64> {
    match int.iter().position(|&c| c != b'0') {
        Some(i) => Some(bits * (int.len() - i) as i64 - 1),
        None => frac
            .iter()
            .position(|&c| c != b'0')
            .map(|i| -bits * (i as i64) - 1),
    }
}

/// A non-zero value whose exponent is `exp`: `None` outside a long
/// double's range, else the `f64` with overflow and underflow made visible.
fn in_long_double_range(v: f64, exp: i64, max: i64, min: i64) -> Option<f64> {
    if exp > max || exp < min {
        return None;
    }
    Some(if v == 0.0 { f64::MIN_POSITIVE } else { v })
}

/// Splits off the leading run of bytes that satisfy `is_digit`.
fn split_digits(s: &[u8], is_digit: impl Fn(u8) -> bool) -> (&[u8], &[u8]) {
    let n = s.iter().take_while(|&&c| is_digit(c)).count();
    s.split_at(n)
}

/// An optional exponent (`e`/`p` marker, sign, decimal digits) that must
/// end the string; its value saturates. `None` for trailing garbage.
fn parse_exponent(s: &[u8], marker: u8) -> Option<i64> {
    if s.is_empty() {
        return Some(0);
    }
    if s[0] | 0x20 != marker {
        return None;
    }
    let (neg, body) = match s.get(1) {
        Some(b'-') => (true, &s[2..]),
        Some(b'+') => (false, &s[2..]),
        _ => (false, &s[1..]),
    };
    if body.is_empty() || !body.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let e = body.iter().fold(0i64, |e, &c| {
        e.saturating_mul(10).saturating_add((c - b'0') as i64)
    });
    Some(if neg { -e } else { e })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_follow_redis_7_0() {
        let neg = Err(negative());
        let nf = Err(not_float());
        let cases: &[(&[u8], Result<u64, TimeoutError>)] = &[
            (b"0", Ok(0)),
            (b"1", Ok(1000)),
            (b"0.1", Ok(100)),
            (b"1.5", Ok(1500)),
            (b"1e-5", Ok(1)),
            (b"1e-400", Ok(1)),
            (b"-1e-400", Ok(0)),
            (b"-0.0001", Ok(0)),
            (b"-0", Ok(0)),
            (b"+2", Ok(2000)),
            (b".5", Ok(500)),
            (b"5.", Ok(5000)),
            (b"0x10", Ok(16000)),
            (b"0x1p-1", Ok(500)),
            (b"0X.8", Ok(500)),
            (b"1e15", Ok(1_000_000_000_000_000_000)),
            (b"-1", neg.clone()),
            (b"-0.01", neg.clone()),
            (b"inf", neg.clone()),
            (b"-Infinity", neg.clone()),
            (b"1e30", neg.clone()),
            (b"1e400", neg.clone()),
            (b"9223372036854775807", neg.clone()),
            (b"abc", nf.clone()),
            (b"nan", nf.clone()),
            (b"", nf.clone()),
            (b" 1", nf.clone()),
            (b"1 ", nf.clone()),
            (b"1e", nf.clone()),
            (b"1e+", nf.clone()),
            (b"0x", nf.clone()),
            (b"0xg", nf.clone()),
            (b".", nf.clone()),
            (b"--1", nf.clone()),
            (b"1e5000", nf.clone()),
            (b"1e-5000", nf.clone()),
            (b"infinit", nf.clone()),
            (b"\0", nf.clone()),
            (b"3\0junk", nf.clone()),
            (b"0x1p-20000", nf.clone()),
            (b"0x1p20000", nf.clone()),
        ];
        for (arg, want) in cases {
            assert_eq!(&parse_secs(arg), want, "{:?}", String::from_utf8_lossy(arg));
        }
        assert_eq!(parse_secs(&[b'1'; MAX_LONG_DOUBLE_CHARS]), nf);
    }

    #[test]
    fn milliseconds_are_integers() {
        assert_eq!(parse_ms(b"0"), Ok(0));
        assert_eq!(parse_ms(b"250"), Ok(250));
        assert_eq!(parse_ms(b"-1"), Err(negative()));
        assert_eq!(
            parse_ms(b"1.5"),
            Err(TimeoutError("timeout is not an integer or out of range"))
        );
    }
}
