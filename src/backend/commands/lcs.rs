//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest
//! common subsequence of two strings, by Redis 7.0's dynamic programme and
//! backtrack, so ties resolve to the same subsequence and the same match
//! ranges, in the same reply shapes (a map under RESP3).
//!
//! The table costs 4 bytes per cell, `(len1 + 1) * (len2 + 1)` cells; like
//! Redis, a table above `proto-max-bulk-len` bytes (512 MB by default, about
//! 11 585 × 11 585 characters) is refused before anything is allocated.

use super::bits::with_string;
use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::resp::{encode, eq_ignore_case};

/// One matching range: `(a_start, a_end, b_start, b_end)`, inclusive.
type Range = (u32, u32, u32, u32);

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]
pub(crate) fn lcs(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    // Keys are read first, as Redis does, so a wrong type wins over a bad
    // option; LCS has its own wording for it.
    let read = |key| {
        with_string(ctx, key, |v| v.unwrap_or_default().to_vec())
            .map_err(|_| CmdError::err("The specified keys must contain string values"))
    };
    let (a, b) = (read(args[1])?, read(args[2])?);
    let (mut getlen, mut getidx, mut withlen, mut minlen) = (false, false, false, 0i64);
    let mut j = 3;
    while j < args.len() {
        let opt = args[j];
        let more = args.len() - 1 - j;
        if eq_ignore_case(opt, b"idx") {
            getidx = true;
        } else if eq_ignore_case(opt, b"len") {
            getlen = true;
        } else if eq_ignore_case(opt, b"withmatchlen") {
            withlen = true;
        } else if eq_ignore_case(opt, b"minmatchlen") && more > 0 {
            minlen = parse_i64(args[j + 1])?.max(0);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if getidx && getlen {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    if a.len() as u64 >= u32::MAX as u64 - 1 || b.len() as u64 >= u32::MAX as u64 - 1 {
        return Err(CmdError::err("String too long for LCS"));
    }
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells.saturating_mul(4) > ctx.node.settings.max_bulk() {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let table = dp(&a, &b);
    let (subseq, ranges) = backtrack(&a, &b, &table, getidx || !getlen);
    let total = table[table.len() - 1];
    let proto = ctx.client.proto;
    if getidx {
        let kept: Vec<&Range> = ranges
            .iter()
            .filter(|r| minlen == 0 || (r.1 - r.0 + 1) as i64 >= minlen)
            .collect();
        encode::map_len(ctx.out, 2, proto);
        encode::bulk(ctx.out, b"matches");
        encode::array_len(ctx.out, kept.len());
        for &&(a0, a1, b0, b1) in &kept {
            encode::array_len(ctx.out, 2 + withlen as usize);
            for (x, y) in [(a0, a1), (b0, b1)] {
                encode::array_len(ctx.out, 2);
                encode::integer(ctx.out, x as i64);
                encode::integer(ctx.out, y as i64);
            }
            if withlen {
                encode::integer(ctx.out, (a1 - a0 + 1) as i64);
            }
        }
        encode::bulk(ctx.out, b"len");
        encode::integer(ctx.out, total as i64);
    } else if getlen {
        encode::integer(ctx.out, total as i64);
    } else {
        encode::bulk(ctx.out, &subseq);
    }
    Ok(())
}

/// `t[j + i * (b.len() + 1)]` = LCS length of `a[..i]` and `b[..j]`.
fn dp(a: &[u8], b: &[u8]) -> Vec<u32> {
    let w = b.len() + 1;
    let mut t = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[j + i * w] = if a[i - 1] == b[j - 1] {
                t[(j - 1) + (i - 1) * w] + 1
            } else {
                t[j + (i - 1) * w].max(t[(j - 1) + i * w])
            };
        }
    }
    t
}

/// Walks the table back from the end as Redis does: the subsequence, and
/// the contiguous matching ranges from last to first.
fn backtrack(a: &[u8], b: &[u8], t: &[u32], compute: bool) -> (Vec<u8>, Vec<Range>) {
    let w = b.len() + 1;
    let mut idx = t[t.len() - 1] as usize;
    let mut out = vec![0u8; if compute { idx } else { 0 }];
    let mut ranges = Vec::new();
    let alen = a.len() as u32;
    // `cur.0 == alen` means no range is open.
    let mut cur: Range = (alen, 0, 0, 0);
    let (mut i, mut j) = (a.len(), b.len());
    while compute && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            out[idx - 1] = a[i - 1];
            let (ii, jj) = (i as u32 - 1, j as u32 - 1);
            if cur.0 == alen {
                cur = (ii, ii, jj, jj);
            } else if cur.0 == ii + 1 && cur.2 == jj + 1 {
                cur.0 -= 1;
                cur.2 -= 1;
            } else {
                emit = true;
            }
            if cur.0 == 0 || cur.2 == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[j + (i - 1) * w] > t[(j - 1) + i * w] {
                i -= 1;
            } else {
                j -= 1;
            }
            if cur.0 != alen {
                emit = true;
            }
        }
        if emit {
            ranges.push(cur);
            cur.0 = alen;
        }
    }
    (out, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_documentation_example() {
        let (a, b) = (b"ohmytext", b"mynewtext");
        let t = dp(a, b);
        let (s, ranges) = backtrack(a, b, &t, true);
        assert_eq!(s, b"mytext");
        assert_eq!(ranges, vec![(4, 7, 5, 8), (2, 3, 0, 1)]);
    }
}
