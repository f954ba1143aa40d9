//! Bitmap commands on string values: SETBIT, GETBIT, BITCOUNT, BITPOS and
//! BITOP, with Redis 7.0's argument order, ranges and error texts
//! (`bitops.c`). Bit 0 is the most significant bit of byte 0.
//!
//! Also the helpers the other string-family files share: reading a string
//! value under its shard lock and writing bytes into one, the one place
//! that knows how a string value is stored in an entry.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::keyspace::entry::Entry;
use crate::backend::keyspace::store::Locked;
use crate::resp::{encode, eq_ignore_case};
use std::sync::atomic::Ordering::Relaxed;

const BIT_OFFSET_ERR: &str = "bit offset is not an integer or out of range";

/// The string held by a live entry.
pub(crate) fn string_value(e: &Entry) -> Result<&[u8], CmdError> {
    e.str_value()
}

/// Runs `f` on the string at `key` (None when absent) under its shard lock,
/// counting a keyspace hit or miss.
pub(crate) fn with_string<R>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R, CmdError> {
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    match s.read(h, key) {
        Some(e) => Ok(f(Some(string_value(e)?))),
        None => Ok(f(None)),
    }
}

/// Writes `bytes` at byte `offset` of the string at `key`, creating it and
/// zero-padding as needed (SETBIT, BITFIELD).
pub(crate) fn write_at(s: &mut Locked, h: u64, key: &[u8], offset: usize, bytes: &[u8]) {
    if s.update(h, key, |e| e.write_at(offset, bytes)).is_none() {
        let mut e = Entry::new(key, b"", 0, s.now);
        e.write_at(offset, bytes);
        s.insert(h, e);
    }
}

/// Parses a bit offset as Redis's `getBitOffsetFromArgument`: `#n` (only
/// when `field_bits > 0`) means n fields of that width; the byte it falls
/// in must be below `proto-max-bulk-len`.
pub(crate) fn parse_bit_offset(
    arg: &[u8],
    field_bits: u32,
    max_bulk: u64,
) -> Result<u64, CmdError> {
    let err = || CmdError::err(BIT_OFFSET_ERR);
    let (digits, mul) = match arg.first() {
        Some(b'#') if field_bits > 0 => (&arg[1..], field_bits as i64),
        _ => (arg, 1),
    };
    let n = crate::resp::parse_i64(digits)
        .ok_or_else(err)?
        .wrapping_mul(mul);
    if n < 0 || (n as u64 >> 3) >= max_bulk {
        return Err(err());
    }
    Ok(n as u64)
}

/// SETBIT key offset 0|1
pub(crate) fn setbit(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let off = parse_bit_offset(args[2], 0, ctx.node.settings.max_bulk())?;
    let bad_bit = || CmdError::err("bit is not an integer or out of range");
    let on = crate::resp::parse_i64(args[3]).ok_or_else(bad_bit)?;
    if on & !1 != 0 {
        return Err(bad_bit());
    }
    let (byte, mask) = ((off >> 3) as usize, 0x80u8 >> (off & 7));
    let store = &ctx.node.store;
    let key = args[1];
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let (old, grows) = match s.get(h, key) {
        Some(e) => {
            let v = string_value(e)?;
            (v.get(byte).copied().unwrap_or(0), byte >= v.len())
        }
        None => (0, true),
    };
    let new = if on == 1 { old | mask } else { old & !mask };
    write_at(&mut s, h, key, byte, &[new]);
    if grows || new != old {
        // Created, grown or changed: a write for INFO's dirty count.
        ctx.node.stats.dirty.fetch_add(1, Relaxed);
    }
    encode::integer(ctx.out, (old & mask != 0) as i64);
    Ok(())
}

/// GETBIT key offset
pub(crate) fn getbit(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let off = parse_bit_offset(args[2], 0, ctx.node.settings.max_bulk())?;
    let bit = with_string(ctx, args[1], |v| {
        v.and_then(|v| v.get((off >> 3) as usize))
            .is_some_and(|b| b & (0x80 >> (off & 7)) != 0)
    })?;
    encode::integer(ctx.out, bit as i64);
    Ok(())
}

/// Set bits in `v`, eight bytes at a time.
pub(crate) fn popcount(v: &[u8]) -> u64 {
    let mut chunks = v.chunks_exact(8);
    let mut n: u64 = (&mut chunks)
        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")).count_ones() as u64)
        .sum();
    n += chunks
        .remainder()
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>();
    n
}

/// `BIT` or `BYTE` (any case) → whether the range is in bits.
fn parse_unit(arg: &[u8]) -> Result<bool, CmdError> {
    if eq_ignore_case(arg, b"bit") {
        Ok(true)
    } else if eq_ignore_case(arg, b"byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Resolves negative and out-of-range indexes over `total` units as
/// Redis's BITCOUNT and BITPOS do; None when the range is empty.
fn clamp(start: i64, end: i64, total: i64) -> Option<(i64, i64)> {
    let fix = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (fix(start), fix(end).min(total - 1));
    (start <= end).then_some((start, end))
}

/// A range over a string in bits: `(first bit, last bit)`, inclusive.
fn bit_range(range: (i64, i64), in_bits: bool) -> (u64, u64) {
    let (s, e) = (range.0 as u64, range.1 as u64);
    if in_bits {
        (s, e)
    } else {
        (s * 8, e * 8 + 7)
    }
}

/// Set bits between two bit positions, inclusive.
fn count_bits(v: &[u8], first: u64, last: u64) -> u64 {
    let (b0, b1) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut n = popcount(&v[b0..=b1]);
    // Take away the bits of the edge bytes outside the range.
    n -= (v[b0] & !(0xffu8 >> (first & 7))).count_ones() as u64;
    n -= (v[b1] & (0xffu8 >> (last & 7) >> 1)).count_ones() as u64;
    n
}

/// BITCOUNT key [start end [BYTE|BIT]]
pub(crate) fn bitcount(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    // Redis 7.0 looks the key up first: a missing key is 0 whatever follows.
    let n = with_string(ctx, args[1], |v| -> Result<i64, CmdError> {
        let Some(v) = v else { return Ok(0) };
        let range = match args.len() {
            2 => clamp(0, -1, v.len() as i64),
            4 | 5 => {
                let (start, end) = (parse_i64(args[2])?, parse_i64(args[3])?);
                if start < 0 && end < 0 && start > end {
                    return Ok(0);
                }
                let in_bits = args.len() == 5 && parse_unit(args[4])?;
                let total = v.len() as i64 * if in_bits { 8 } else { 1 };
                match clamp(start, end, total) {
                    Some(r) => {
                        let (first, last) = bit_range(r, in_bits);
                        return Ok(count_bits(v, first, last) as i64);
                    }
                    None => None,
                }
            }
            _ => return Err(CmdError::Syntax),
        };
        Ok(range.map_or(0, |(s, e)| popcount(&v[s as usize..=e as usize]) as i64))
    })??;
    encode::integer(ctx.out, n);
    Ok(())
}

/// The first bit equal to `bit` between two bit positions, inclusive.
fn find_bit(v: &[u8], first: u64, last: u64, bit: bool) -> Option<u64> {
    let (b0, b1) = ((first >> 3) as usize, (last >> 3) as usize);
    for (i, &byte) in v[b0..=b1].iter().enumerate() {
        let i = b0 + i;
        let mut x = if bit { byte } else { !byte };
        if i == b0 {
            x &= 0xff >> (first & 7);
        }
        if i == b1 {
            x &= !(0xffu8 >> (last & 7) >> 1);
        }
        if x != 0 {
            return Some(i as u64 * 8 + x.leading_zeros() as u64);
        }
    }
    None
}

/// BITPOS key 0|1 [start [end [BYTE|BIT]]]
pub(crate) fn bitpos(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let bit = parse_i64(args[2])?;
    if bit != 0 && bit != 1 {
        return Err(CmdError::err("The bit argument must be 1 or 0."));
    }
    let bit = bit == 1;
    let pos = with_string(ctx, args[1], |v| -> Result<i64, CmdError> {
        // A missing key is an endless run of zeros.
        let Some(v) = v else {
            return Ok(if bit { -1 } else { 0 });
        };
        let len = v.len() as i64;
        let (range, in_bits, end_given) = match args.len() {
            3 => (clamp(0, -1, len), false, false),
            4..=6 => {
                let start = parse_i64(args[3])?;
                let in_bits = args.len() == 6 && parse_unit(args[5])?;
                let total = len * if in_bits { 8 } else { 1 };
                let (end, given) = match args.get(4) {
                    Some(e) => (parse_i64(e)?, true),
                    None => (total - 1, false),
                };
                (clamp(start, end, total), in_bits, given)
            }
            _ => return Err(CmdError::Syntax),
        };
        let Some(range) = range else { return Ok(-1) };
        let (first, last) = bit_range(range, in_bits);
        Ok(match find_bit(v, first, last, bit) {
            Some(p) => p as i64,
            // Past an implicit end the string reads as zeros.
            None if !bit && !end_given => last as i64 + 1,
            None => -1,
        })
    })??;
    encode::integer(ctx.out, pos);
    Ok(())
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]
pub(crate) fn bitop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    #[derive(PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = match args[1] {
        o if eq_ignore_case(o, b"and") => Op::And,
        o if eq_ignore_case(o, b"or") => Op::Or,
        o if eq_ignore_case(o, b"xor") => Op::Xor,
        o if eq_ignore_case(o, b"not") => Op::Not,
        _ => return Err(CmdError::Syntax),
    };
    if op == Op::Not && args.len() != 4 {
        return Err(CmdError::err(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    // Sources are copied one shard lock at a time, so the destination may
    // be one of them; missing keys read as empty strings.
    let mut srcs: Vec<Vec<u8>> = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        srcs.push(with_string(ctx, key, |v| v.unwrap_or_default().to_vec())?);
    }
    let maxlen = srcs.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |s: &Vec<u8>, j: usize| s.get(j).copied().unwrap_or(0);
    let res: Vec<u8> = (0..maxlen)
        .map(|j| {
            let first = byte(&srcs[0], j);
            srcs[1..].iter().fold(first, |acc, s| match op {
                Op::And => acc & byte(s, j),
                Op::Or => acc | byte(s, j),
                Op::Xor => acc ^ byte(s, j),
                Op::Not => acc,
            })
        })
        .map(|b| if op == Op::Not { !b } else { b })
        .collect();
    let store = &ctx.node.store;
    let h = store.hash(args[2]);
    let mut s = store.lock(h, ctx.now);
    if res.is_empty() {
        s.remove(h, args[2]);
    } else {
        s.put(h, args[2], &res, 0);
    }
    encode::integer(ctx.out, maxlen as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit-by-bit reference for the range helpers.
    fn naive(v: &[u8], first: u64, last: u64, bit: bool) -> (u64, Option<u64>) {
        let get = |i: u64| v[(i >> 3) as usize] & (0x80 >> (i & 7)) != 0;
        let count = (first..=last).filter(|&i| get(i)).count() as u64;
        (count, (first..=last).find(|&i| get(i) == bit))
    }

    #[test]
    fn range_helpers_agree_with_a_bitwise_walk() {
        let v = [0b1010_0000u8, 0xff, 0x00, 0b0000_0110, 0x81];
        let bits = v.len() as u64 * 8;
        for first in 0..bits {
            for last in first..bits {
                for bit in [false, true] {
                    let (count, pos) = naive(&v, first, last, bit);
                    assert_eq!(count_bits(&v, first, last), count, "{first}..{last}");
                    assert_eq!(find_bit(&v, first, last, bit), pos, "{first}..{last} {bit}");
                }
            }
        }
    }

    #[test]
    fn offsets_follow_redis_limits() {
        let max = 512 * 1024 * 1024;
        assert_eq!(parse_bit_offset(b"0", 0, max), Ok(0));
        assert_eq!(parse_bit_offset(b"4294967295", 0, max), Ok(4294967295));
        assert!(parse_bit_offset(b"4294967296", 0, max).is_err());
        assert!(parse_bit_offset(b"-1", 0, max).is_err());
        assert!(parse_bit_offset(b"#2", 0, max).is_err());
        assert_eq!(parse_bit_offset(b"#2", 8, max), Ok(16));
        assert!(parse_bit_offset(b"#-1", 8, max).is_err());
    }
}
