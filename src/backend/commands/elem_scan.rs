//! HSCAN, SSCAN and ZSCAN: cursors over one collection's elements.
//!
//! A compact collection (listpack, intset) is returned whole with cursor 0,
//! as Redis does. A hash-table-encoded one keeps its elements in the dense
//! entry vector of an `IndexMap`/`IndexSet` (a sorted set: of its member →
//! score map): an insert appends, a delete moves the last entry into the
//! hole (`swap_remove`), an update or a rescore keeps the entry where it
//! is, and the table's growth or shrinking never reorders the vector. A
//! walk goes down that vector from the end, and the cursor is the number of
//! positions still to visit, so each step costs O(COUNT) and never copies
//! the collection.
//!
//! Redis's guarantee holds: an element present for the whole walk and not
//! yet returned always sits below the cursor. Inserts land above it; a
//! delete moves only the last entry, either from the visited part into the
//! unvisited one (it is returned twice, which SCAN allows) or, when the
//! collection has shrunk below the cursor, from below the cursor to below
//! it. So it is returned at least once, and 0 ends the walk.
//!
//! Called through the command table; reads the key under its shard's lock
//! like every read, and never writes.

use super::keys::parse_cursor;
use super::util::fmt_double;
use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::zset::ZSet;
use crate::backend::value::{Hash, Set};
use crate::glob;
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;

/// Parsed `[MATCH pattern] [COUNT n]` of H/S/ZSCAN.
pub(crate) struct ScanOpts<'a> {
    /// Only elements matching this.
    pub(crate) pattern: Option<&'a [u8]>,
    /// Elements walked per call.
    pub(crate) count: usize,
}

impl ScanOpts<'_> {
    /// Whether an element named `name` goes into the reply.
    fn keeps(&self, name: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob::matches(p, name))
    }
}

/// Parses the options after `key cursor`.
pub(crate) fn scan_opts<'a>(args: &[&'a [u8]]) -> Result<ScanOpts<'a>, CmdError> {
    let mut o = ScanOpts {
        pattern: None,
        count: 10,
    };
    let mut j = 0;
    while j < args.len() {
        let Some(value) = args.get(j + 1) else {
            return Err(CmdError::Syntax);
        };
        if eq_ignore_case(args[j], b"match") {
            o.pattern = Some(*value).filter(|p| !glob::is_match_all(p));
        } else if eq_ignore_case(args[j], b"count") {
            let n = parse_i64(value)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = n as usize;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    Ok(o)
}

/// One step of a walk over positions `0..len`: the next cursor and the
/// positions to visit. Compact: every position in order, then 0. Otherwise
/// the `count` positions below the cursor (0 starts at `len`; a cursor
/// past `len` is taken as `len`), highest first; the next cursor is the
/// lowest of them, 0 once the bottom is reached.
pub(crate) fn scan_window(
    cursor: u64,
    count: usize,
    len: usize,
    compact: bool,
) -> (u64, Box<dyn Iterator<Item = usize>>) {
    if compact {
        return (0, Box::new(0..len));
    }
    let top = match usize::try_from(cursor) {
        Ok(0) | Err(_) => len,
        Ok(c) => c.min(len),
    };
    let bottom = top.saturating_sub(count.max(1));
    (bottom as u64, Box::new((bottom..top).rev()))
}

/// The elements one step returns, flattened (name, then value or score).
struct Step {
    next: u64,
    items: Vec<Vec<u8>>,
}

/// Runs one step: parses the options (their errors come only for a key
/// that exists, as in Redis), reads the collection with `walk` and replies.
fn scan_key<T: crate::backend::value::Typed>(
    ctx: &mut Ctx,
    args: &[&[u8]],
    stride: usize,
    walk: impl FnOnce(&T, u64, &ScanOpts) -> Step,
) -> CmdResult {
    let cursor = parse_cursor(args[2])?;
    let opts = scan_opts(&args[3..]);
    let step = ctx.read::<T, _>(args[1], |c| opts.as_ref().ok().map(|o| walk(c, cursor, o)))?;
    let Some(step) = step else {
        return empty_scan(ctx);
    };
    let Some(step) = step else {
        return Err(opts.err().unwrap_or(CmdError::Syntax));
    };
    scan_reply(ctx.out, step.next, &step.items, stride);
    Ok(())
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]
pub(crate) fn hscan(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    scan_key::<Hash>(ctx, args, 2, |h, cursor, o| {
        let (next, at) = scan_window(cursor, o.count, h.len(), h.is_compact());
        let mut items = Vec::new();
        for (f, v) in at.filter_map(|i| h.nth(i)) {
            if o.keeps(f) {
                items.extend([f.to_vec(), v.to_vec()]);
            }
        }
        Step { next, items }
    })
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
pub(crate) fn sscan(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    scan_key::<Set>(ctx, args, 1, |s, cursor, o| {
        let compact = s.encoding() != "hashtable";
        let (next, at) = scan_window(cursor, o.count, s.len(), compact);
        let items = at
            .filter_map(|i| s.nth(i))
            .filter(|m| o.keeps(m))
            .map(Vec::from)
            .collect();
        Step { next, items }
    })
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
pub(crate) fn zscan(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    scan_key::<ZSet>(ctx, args, 2, |z, cursor, o| {
        let compact = z.encoding() == "listpack";
        let (next, at) = scan_window(cursor, o.count, z.len(), compact);
        let mut items = Vec::new();
        // Compact: rank order, as the listpack holds it; else the map's.
        let member = |i| if compact { Some(z.at(i)) } else { z.indexed(i) };
        for (m, s) in at.filter_map(member) {
            if o.keeps(m) {
                items.extend([m.to_vec(), fmt_double(s).into_bytes()]);
            }
        }
        Step { next, items }
    })
}

/// Writes a SCAN reply: `[cursor, [items...]]`.
fn scan_reply(out: &mut BytesMut, next: u64, items: &[Vec<u8>], stride: usize) {
    debug_assert_eq!(items.len() % stride, 0);
    encode::array_len(out, 2);
    encode::bulk(out, next.to_string().as_bytes());
    encode::array_len(out, items.len());
    items.iter().for_each(|i| encode::bulk(out, i));
}

/// The empty SCAN reply for a missing key.
fn empty_scan(ctx: &mut Ctx) -> CmdResult {
    ctx.out.extend_from_slice(b"*2\r\n$1\r\n0\r\n*0\r\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::value::Thresholds;
    use std::collections::HashSet;

    /// Walks `set` to the end with COUNT `count`, calling `between` after
    /// each step; the members returned.
    fn walk(set: &mut Set, count: usize, mut between: impl FnMut(&mut Set, usize)) -> Vec<Vec<u8>> {
        let (mut cursor, mut seen, mut step) = (0, Vec::new(), 0);
        loop {
            let (next, at) = scan_window(cursor, count, set.len(), false);
            seen.extend(at.filter_map(|i| set.nth(i)).map(Vec::from));
            if next == 0 {
                return seen;
            }
            between(set, step);
            step += 1;
            cursor = next;
        }
    }

    fn big_set(n: usize) -> Set {
        let t = Thresholds::default();
        let mut s = Set::default();
        (0..n).for_each(|i| {
            s.insert(format!("stay{i}").as_bytes(), &t);
        });
        assert_eq!(s.encoding(), "hashtable");
        s
    }

    #[test]
    fn a_quiet_walk_returns_every_element_once() {
        for (n, count) in [(1000, 7), (1000, 1), (1000, 1000), (1000, 5000)] {
            let mut s = big_set(n);
            let seen = walk(&mut s, count, |_, _| {});
            let unique: HashSet<_> = seen.iter().collect();
            assert_eq!((seen.len(), unique.len()), (n, n), "count {count}");
        }
    }

    #[test]
    fn elements_present_throughout_are_returned_while_others_come_and_go() {
        let t = Thresholds::default();
        for count in [1, 10, 100] {
            let mut s = big_set(2000);
            let seen = walk(&mut s, count, |s, step| {
                // Grow (the table rehashes), delete fresh and old-but-gone ones.
                for j in 0..30 {
                    s.insert(format!("new{step}:{j}").as_bytes(), &t);
                }
                for j in 0..20 {
                    s.remove(format!("new{}:{j}", step.saturating_sub(1)).as_bytes());
                }
                s.remove(format!("stay{}", 5000 + step).as_bytes());
            });
            let seen: HashSet<_> = seen.into_iter().collect();
            assert!((0..2000).all(|i| seen.contains(format!("stay{i}").as_bytes())));
        }
    }

    #[test]
    fn a_walk_survives_the_collection_shrinking_below_the_cursor() {
        let mut s = big_set(3000);
        (0..1000).for_each(|i| {
            s.insert(format!("gone{i}").as_bytes(), &Thresholds::default());
        });
        let seen = walk(&mut s, 50, |s, step| {
            if step == 0 {
                (0..1000).for_each(|i| {
                    s.remove(format!("gone{i}").as_bytes());
                });
            }
        });
        let seen: HashSet<_> = seen.into_iter().collect();
        assert!((0..3000).all(|i| seen.contains(format!("stay{i}").as_bytes())));
    }

    #[test]
    fn windows_count_down_and_end_at_zero() {
        assert_eq!(scan_window(0, 10, 25, false).0, 15);
        assert_eq!(scan_window(15, 10, 25, false).0, 5);
        let (next, at) = scan_window(5, 10, 25, false);
        assert_eq!((next, at.collect::<Vec<_>>()), (0, vec![4, 3, 2, 1, 0]));
        assert_eq!(scan_window(1000, 10, 25, false).0, 15);
        assert_eq!(scan_window(u64::MAX, 10, 25, false).0, 15);
        let (next, at) = scan_window(7, 2, 3, true);
        assert_eq!((next, at.collect::<Vec<_>>()), (0, vec![0, 1, 2]));
    }
}
