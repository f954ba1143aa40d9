//! The GEO commands on members: GEOADD, GEOPOS, GEOHASH and GEODIST, over
//! sorted sets whose scores are 52-bit geohashes (the encoding is
//! `geohash.rs`), with Redis 7.0's argument checks, errors and replies;
//! and the argument readers the searches (`geosearch.rs`) share.

use super::geohash;
use super::{parse_f64, zsets, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::zset::ZSet;
use crate::resp::{encode, eq_ignore_case};

/// A float as Redis's `string2d` (`strtod`) reads it: also hexadecimal
/// (`0x1.8p3`), and no overflow to infinity or underflow to zero.
fn parse_double(b: &[u8]) -> Option<f64> {
    let (negative, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, b),
    };
    if let Some(hex) = digits
        .strip_prefix(b"0x")
        .or_else(|| digits.strip_prefix(b"0X"))
    {
        let v = parse_hex(hex)?;
        return Some(if negative { -v } else { v });
    }
    let v = parse_f64(b).ok()?;
    if v.is_infinite()
        && !digits
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case(&b'i'))
    {
        return None;
    }
    let mantissa = digits
        .split(|c| *c == b'e' || *c == b'E')
        .next()
        .unwrap_or(b"");
    if v == 0.0 && mantissa.iter().any(|c| (b'1'..=b'9').contains(c)) {
        return None;
    }
    Some(v)
}

/// The digits after `0x`: hex digits with an optional point, then an
/// optional binary exponent (`p-3`).
fn parse_hex(b: &[u8]) -> Option<f64> {
    let (mant, exp) = match b.iter().position(|c| *c == b'p' || *c == b'P') {
        Some(at) => (&b[..at], Some(&b[at + 1..])),
        None => (b, None),
    };
    let (mut v, mut scale, mut seen, mut point) = (0f64, 0i32, false, false);
    for &c in mant {
        if c == b'.' && !point {
            point = true;
            continue;
        }
        let d = (c as char).to_digit(16)?;
        v = v * 16.0 + d as f64;
        seen = true;
        if point {
            scale -= 4;
        }
    }
    if !seen {
        return None;
    }
    if let Some(e) = exp {
        let e = std::str::from_utf8(e).ok()?;
        if e.is_empty() || e.starts_with('+') && e.len() == 1 {
            return None;
        }
        scale = scale.saturating_add(e.parse::<i32>().ok()?);
    }
    let v = v * 2f64.powi(scale);
    (v.is_finite() && (v != 0.0 || mant.iter().all(|c| matches!(c, b'0' | b'.')))).then_some(v)
}

pub(super) fn double_or(b: &[u8], msg: Option<&str>) -> Result<f64, CmdError> {
    parse_double(b).ok_or_else(|| msg.map_or(CmdError::NotFloat, CmdError::err))
}

/// `longitude latitude`, checked against the WGS84 limits.
pub(super) fn lon_lat(args: &[&[u8]]) -> Result<(f64, f64), CmdError> {
    let (lon, lat) = (double_or(args[0], None)?, double_or(args[1], None)?);
    let lon_ok = (geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon);
    if !lon_ok || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat) {
        return Err(CmdError::err(format!(
            "invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// Metres per `m`, `km`, `ft` or `mi`.
pub(super) fn unit(b: &[u8]) -> Result<f64, CmdError> {
    let units: [(&[u8], f64); 4] = [
        (b"m", 1.0),
        (b"km", 1000.0),
        (b"ft", 0.3048),
        (b"mi", 1609.34),
    ];
    units
        .iter()
        .find(|(name, _)| eq_ignore_case(b, name))
        .map(|u| u.1)
        .ok_or_else(|| CmdError::err("unsupported unit provided. please use M, KM, FT, MI"))
}

/// `radius unit`: the radius and metres per unit.
pub(super) fn radius(args: &[&[u8]]) -> Result<(f64, f64), CmdError> {
    let r = double_or(args[0], Some("need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((r, unit(args[1])?))
}

/// The position stored for `member`.
pub(super) fn position(z: &ZSet, member: &[u8]) -> Result<(f64, f64), CmdError> {
    z.score(member)
        .map(geohash::decode)
        .ok_or_else(|| CmdError::err("could not decode requested zset member"))
}

pub(super) fn human_double(ctx: &mut Ctx, v: f64) {
    let s = geohash::fmt_coord(v);
    if ctx.client.proto >= 3 {
        ctx.out.extend_from_slice(b",");
        ctx.out.extend_from_slice(s.as_bytes());
        ctx.out.extend_from_slice(b"\r\n");
    } else {
        encode::bulk(ctx.out, s.as_bytes());
    }
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]
pub(crate) fn geoadd(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (mut nx, mut xx, mut at) = (false, false, 2);
    while at < args.len() {
        let a = args[at];
        if eq_ignore_case(a, b"nx") {
            nx = true;
        } else if eq_ignore_case(a, b"xx") {
            xx = true;
        } else if !eq_ignore_case(a, b"ch") {
            break;
        }
        at += 1;
    }
    if !(args.len() - at).is_multiple_of(3) || (nx && xx) {
        return Err(CmdError::Syntax);
    }
    let mut zadd: Vec<Vec<u8>> = args[..at].iter().map(|a| a.to_vec()).collect();
    zadd[0] = b"zadd".to_vec();
    for t in args[at..].chunks(3) {
        let (lon, lat) = lon_lat(t)?;
        zadd.push(geohash::score_of(lon, lat).to_string().into_bytes());
        zadd.push(t[2].to_vec());
    }
    let refs: Vec<&[u8]> = zadd.iter().map(|a| &a[..]).collect();
    zsets::zadd(ctx, &refs)
}

/// GEOPOS key member [member ...]
pub(crate) fn geopos(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let found = per_member(ctx, args, geohash::decode)?;
    encode::array_len(ctx.out, found.len());
    for p in found {
        match p {
            Some((lon, lat)) => {
                encode::array_len(ctx.out, 2);
                human_double(ctx, lon);
                human_double(ctx, lat);
            }
            None => encode::null_array(ctx.out, ctx.client.proto),
        }
    }
    Ok(())
}

/// GEOHASH key member [member ...]
pub(crate) fn geohash(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let found = per_member(ctx, args, geohash::hash_string)?;
    encode::array_len(ctx.out, found.len());
    for h in found {
        ctx.bulk_or_null(h.as_ref().map(|h| &h[..]));
    }
    Ok(())
}

/// `f` of each member's score in `args[2..]` (the members of the sorted
/// set at `args[1]`), `None` for a missing member or key.
fn per_member<T: Clone>(
    ctx: &mut Ctx,
    args: &[&[u8]],
    f: impl Fn(f64) -> T,
) -> Result<Vec<Option<T>>, CmdError> {
    let found = ctx.read::<ZSet, _>(args[1], |z| {
        args[2..]
            .iter()
            .map(|m| z.score(m).map(&f))
            .collect::<Vec<_>>()
    })?;
    Ok(found.unwrap_or_else(|| vec![None; args.len() - 2]))
}

/// GEODIST key member1 member2 [M|KM|FT|MI]
pub(crate) fn geodist(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let to_m = match args.len() {
        5 => unit(args[4])?,
        n if n > 5 => return Err(CmdError::Syntax),
        _ => 1.0,
    };
    let found = ctx.read::<ZSet, _>(args[1], |z| Some((z.score(args[2])?, z.score(args[3])?)))?;
    let Some((a, b)) = found.flatten() else {
        encode::null(ctx.out, ctx.client.proto);
        return Ok(());
    };
    let ((lon1, lat1), (lon2, lat2)) = (geohash::decode(a), geohash::decode(b));
    let d = geohash::fmt_distance(geohash::distance(lon1, lat1, lon2, lat2) / to_m);
    encode::bulk(ctx.out, d.as_bytes());
    Ok(())
}
