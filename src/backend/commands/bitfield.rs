//! BITFIELD and BITFIELD_RO: signed and unsigned integers of 1..64 bits
//! (u63 at most) at any bit offset of a string, with GET, SET, INCRBY and
//! OVERFLOW WRAP|SAT|FAIL, exactly as Redis 7.0's `bitfieldGeneric`: every
//! operation is parsed before any runs, writes first grow the string to
//! the farthest bit written, and a FAIL overflow replies null and writes
//! nothing.

use super::bits::{parse_bit_offset, string_value, write_at};
use super::{CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::resp::{encode, eq_ignore_case};

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq)]
enum OpKind {
    Get,
    Set,
    Incrby,
}

#[derive(Clone, Copy)]
struct Op {
    kind: OpKind,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

/// `i1`..`i64`, `u1`..`u63`.
fn parse_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let err = || {
        CmdError::err(
            "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(err()),
    };
    let bits = crate::resp::parse_i64(&arg[1..]).ok_or_else(err)?;
    if bits < 1 || (signed && bits > 64) || (!signed && bits > 63) {
        return Err(err());
    }
    Ok((signed, bits as u32))
}

fn parse_ops(args: &[&[u8]], max_bulk: u64) -> Result<Vec<Op>, CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let rest = args.len() - j - 1;
        let sub = args[j];
        let kind = if eq_ignore_case(sub, b"get") && rest >= 2 {
            OpKind::Get
        } else if eq_ignore_case(sub, b"set") && rest >= 3 {
            OpKind::Set
        } else if eq_ignore_case(sub, b"incrby") && rest >= 3 {
            OpKind::Incrby
        } else if eq_ignore_case(sub, b"overflow") && rest >= 1 {
            let t = args[j + 1];
            overflow = if eq_ignore_case(t, b"wrap") {
                Overflow::Wrap
            } else if eq_ignore_case(t, b"sat") {
                Overflow::Sat
            } else if eq_ignore_case(t, b"fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = parse_type(args[j + 1])?;
        let offset = parse_bit_offset(args[j + 2], bits, max_bulk)?;
        let value = if kind == OpKind::Get {
            0
        } else {
            super::parse_i64(args[j + 3])?
        };
        ops.push(Op {
            kind,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        j += if kind == OpKind::Get { 3 } else { 4 };
    }
    Ok(ops)
}

/// The `bits`-wide unsigned integer at bit `offset`, most significant bit
/// first; bytes past the end read as zero.
fn get_bits(v: &[u8], offset: u64, bits: u32) -> u64 {
    (offset..offset + bits as u64).fold(0u64, |acc, i| {
        let byte = v.get((i >> 3) as usize).copied().unwrap_or(0);
        (acc << 1) | ((byte >> (7 - (i & 7))) & 1) as u64
    })
}

fn get_signed(v: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_bits(v, offset, bits);
    if bits < 64 && u & (1 << (bits - 1)) != 0 {
        (u | (u64::MAX << bits)) as i64
    } else {
        u as i64
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: `Some(result)` when `value +
/// incr` leaves the type (the wrapped or saturated value), else None.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = (value as i64).wrapping_neg();
    let wrap = || value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > maxincr) {
        Some(if ow == Overflow::Sat { max } else { wrap() })
    } else if incr < 0 && incr < minincr {
        Some(if ow == Overflow::Sat { 0 } else { wrap() })
    } else {
        None
    }
}

/// Redis's `checkSignedBitfieldOverflow`, likewise.
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let c = (value as u64).wrapping_add(incr as u64);
        if bits == 64 {
            c as i64
        } else if c & (1 << (bits - 1)) != 0 {
            (c | (u64::MAX << bits)) as i64
        } else {
            (c & !(u64::MAX << bits)) as i64
        }
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        Some(if ow == Overflow::Sat { max } else { wrap() })
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        Some(if ow == Overflow::Sat { min } else { wrap() })
    } else {
        None
    }
}

/// Runs one SET or INCRBY against the current bytes: (reply, new field
/// value to write), or None for a FAIL overflow.
fn apply(op: &Op, v: &[u8]) -> Option<(i64, u64)> {
    let incr = op.kind == OpKind::Incrby;
    if op.signed {
        let old = get_signed(v, op.offset, op.bits);
        let (base, delta) = if incr { (old, op.value) } else { (op.value, 0) };
        let new = match signed_overflow(base, delta, op.bits, op.overflow) {
            Some(_) if op.overflow == Overflow::Fail => return None,
            Some(limited) => limited,
            None => base.wrapping_add(delta),
        };
        Some((if incr { new } else { old }, new as u64))
    } else {
        let old = get_bits(v, op.offset, op.bits);
        let (base, delta) = if incr {
            (old, op.value)
        } else {
            (op.value as u64, 0)
        };
        let new = match unsigned_overflow(base, delta, op.bits, op.overflow) {
            Some(_) if op.overflow == Overflow::Fail => return None,
            Some(limited) => limited,
            None => base.wrapping_add(delta as u64),
        };
        Some((if incr { new as i64 } else { old as i64 }, new))
    }
}

/// The bytes covering `bits` bits at `offset` after writing the low `bits`
/// of `value` there (from the first byte the field touches).
fn patch(v: &[u8], offset: u64, bits: u32, value: u64) -> Vec<u8> {
    let (b0, b1) = (
        (offset >> 3) as usize,
        ((offset + bits as u64 - 1) >> 3) as usize,
    );
    let mut out: Vec<u8> = (b0..=b1).map(|i| v.get(i).copied().unwrap_or(0)).collect();
    for k in 0..bits as u64 {
        let bit = (value >> (bits as u64 - 1 - k)) & 1;
        let i = offset + k;
        let (byte, mask) = ((i >> 3) as usize - b0, 0x80u8 >> (i & 7));
        if bit == 1 {
            out[byte] |= mask;
        } else {
            out[byte] &= !mask;
        }
    }
    out
}

fn run(ctx: &mut Ctx, args: &[&[u8]], read_only_cmd: bool) -> CmdResult {
    let ops = parse_ops(args, ctx.node.settings.max_bulk())?;
    let key = args[1];
    let proto = ctx.client.proto;
    let writes = ops.iter().any(|o| o.kind != OpKind::Get);
    if !writes {
        let replies = super::bits::with_string(ctx, key, |v| {
            let v = v.unwrap_or_default();
            ops.iter()
                .map(|o| {
                    if o.signed {
                        get_signed(v, o.offset, o.bits)
                    } else {
                        get_bits(v, o.offset, o.bits) as i64
                    }
                })
                .collect::<Vec<i64>>()
        })?;
        encode::array_len(ctx.out, replies.len());
        replies
            .into_iter()
            .for_each(|n| encode::integer(ctx.out, n));
        return Ok(());
    }
    if read_only_cmd {
        return Err(CmdError::err(
            "BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    let len = match s.get(h, key) {
        Some(e) => Some(string_value(e)?.len()),
        None => None,
    };
    // Like Redis, grow (or create) the string to the farthest byte written
    // before running anything, even if every write then fails.
    let farthest = ops
        .iter()
        .filter(|o| o.kind != OpKind::Get)
        .map(|o| ((o.offset + o.bits as u64 - 1) >> 3) as usize)
        .max()
        .unwrap_or(0);
    let grows = len.is_none_or(|len| farthest >= len);
    if grows {
        write_at(&mut s, h, key, farthest, &[0]);
    }
    // INFO's dirty count, as Redis keeps it: one per write that changed
    // its field or came with the string's creation or growth.
    let mut changes = 0;
    encode::array_len(ctx.out, ops.len());
    for op in &ops {
        // The (at most 9) bytes the field spans, zero past the end.
        let (b0, b1) = (
            (op.offset >> 3) as usize,
            ((op.offset + op.bits as u64 - 1) >> 3) as usize,
        );
        let window: Vec<u8> = match s.get(h, key) {
            Some(e) => {
                let v = string_value(e)?;
                (b0..=b1).map(|i| v.get(i).copied().unwrap_or(0)).collect()
            }
            None => vec![0; b1 - b0 + 1],
        };
        let rel = Op {
            offset: op.offset & 7,
            ..*op
        };
        if op.kind == OpKind::Get {
            let n = if op.signed {
                get_signed(&window, rel.offset, op.bits)
            } else {
                get_bits(&window, rel.offset, op.bits) as i64
            };
            encode::integer(ctx.out, n);
            continue;
        }
        match apply(&rel, &window) {
            Some((reply, new)) => {
                let bytes = patch(&window, rel.offset, op.bits, new);
                if grows || bytes != window {
                    changes += 1;
                }
                write_at(&mut s, h, key, b0, &bytes);
                encode::integer(ctx.out, reply);
            }
            None => encode::null(ctx.out, proto),
        }
    }
    drop(s);
    ctx.node
        .stats
        .dirty
        .fetch_add(changes, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// BITFIELD key [GET type offset | SET type offset value | INCRBY type
/// offset increment | OVERFLOW WRAP|SAT|FAIL] ...
pub(crate) fn bitfield(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, false)
}

/// BITFIELD_RO key [GET type offset] ...
pub(crate) fn bitfield_ro(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    run(ctx, args, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_rules_match_redis() {
        use Overflow::*;
        assert_eq!(unsigned_overflow(250, 10, 8, Wrap), Some(4));
        assert_eq!(unsigned_overflow(250, 10, 8, Sat), Some(255));
        assert_eq!(unsigned_overflow(5, -10, 8, Sat), Some(0));
        assert_eq!(unsigned_overflow(5, -10, 8, Wrap), Some(251));
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Sat), Some(255));
        assert_eq!(unsigned_overflow(5, 10, 8, Wrap), None);
        assert_eq!(signed_overflow(120, 10, 8, Wrap), Some(-126));
        assert_eq!(signed_overflow(120, 10, 8, Sat), Some(127));
        assert_eq!(signed_overflow(-120, -10, 8, Sat), Some(-128));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Wrap), Some(i64::MIN));
        assert_eq!(signed_overflow(i64::MIN, -1, 64, Sat), Some(i64::MIN));
        assert_eq!(signed_overflow(-5, 3, 64, Wrap), None);
    }

    #[test]
    fn fields_round_trip_at_odd_offsets() {
        let v = vec![0u8; 4];
        let bytes = patch(&v, 3, 13, 0x1abc);
        let mut w = v.clone();
        w[..bytes.len()].copy_from_slice(&bytes);
        assert_eq!(get_bits(&w, 3, 13), 0x1abc & 0x1fff);
        assert_eq!(get_signed(&w, 3, 13), 0x1abc - 0x2000);
    }
}
