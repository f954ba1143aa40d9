//! The sorted set: members ordered by (score, member bytes), with rank,
//! score-range and lex-range lookups by binary search.
//!
//! Used by `commands/zsets.rs` and `commands/zstore.rs` through the store.
//! The order is a chunked sorted sequence (`chunked.rs`: inserts, removes
//! and ranks move at most one chunk); the large form ("skiplist" in OBJECT
//! ENCODING) adds a member → score map so ZSCORE and membership are O(1).
//! That map is an `IndexMap` because ZSCAN walks its dense entry vector
//! (see `commands/util.rs`): a rescored member keeps its place there.

use super::chunked::Chunked;
use super::{Elem, Thresholds};
use indexmap::IndexMap;
use std::cmp::Ordering;

/// Bytes counted per member on top of its length (score, pointer, malloc).
const MEMBER_OVERHEAD: usize = 40;
/// Extra per member of the large form (map slot and second copy's header).
const INDEX_OVERHEAD: usize = 48;

/// A sorted set.
#[derive(Debug, Clone, Default)]
pub(crate) struct ZSet {
    sorted: Chunked<(f64, Elem)>,
    index: Option<IndexMap<Elem, f64>>,
    payload: usize,
}

/// Redis's order: by score, then by member bytes.
pub(crate) fn cmp(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

/// One end of a score range: the value and whether it is excluded (`(`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ScoreBound {
    /// The score.
    pub(crate) value: f64,
    /// `(value`: the value itself is outside the range.
    pub(crate) exclusive: bool,
}

/// One end of a lex range.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LexBound {
    /// `-`
    Min,
    /// `+`
    Max,
    /// `[m` (inclusive) or `(m` (exclusive).
    At(Vec<u8>, bool),
}

impl ZSet {
    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        self.sorted.len()
    }

    /// The score of `m`.
    pub(crate) fn score(&self, m: &[u8]) -> Option<f64> {
        match &self.index {
            Some(ix) => ix.get(m).copied(),
            None => self.sorted.iter().find(|(_, e)| &e[..] == m).map(|e| e.0),
        }
    }

    fn position(&self, score: f64, m: &[u8]) -> Result<usize, usize> {
        let at = self
            .sorted
            .partition_point(|(s, e)| cmp((*s, e), (score, m)) == Ordering::Less);
        let found = at < self.sorted.len() && {
            let (s, e) = self.sorted.get(at);
            cmp((*s, e), (score, m)) == Ordering::Equal
        };
        if found {
            Ok(at)
        } else {
            Err(at)
        }
    }

    /// Sets `m`'s score; returns the old one.
    pub(crate) fn insert(&mut self, m: &[u8], score: f64, t: &Thresholds) -> Option<f64> {
        let old = self.score(m);
        if let Some(o) = old {
            if o == score {
                return old;
            }
            // Rescored: it moves in the order but keeps its map entry (and
            // so its place in a ZSCAN walk).
            if let Ok(i) = self.position(o, m) {
                let (_, e) = self.sorted.remove(i);
                let at = self.position(score, m).unwrap_or_else(|p| p);
                self.sorted.insert(at, (score, e));
            }
            if let Some(v) = self.index.as_mut().and_then(|ix| ix.get_mut(m)) {
                *v = score;
            }
            return old;
        }
        if self.index.is_none() && (self.sorted.len() >= t.zset_entries || m.len() > t.zset_value) {
            self.index = Some(self.sorted.iter().map(|(s, e)| (e.clone(), *s)).collect());
        }
        let at = self.position(score, m).unwrap_or_else(|p| p);
        self.sorted.insert(at, (score, m.into()));
        if let Some(ix) = &mut self.index {
            ix.insert(m.into(), score);
        }
        self.payload += m.len();
        old
    }

    /// Removes `m`; true if it was there.
    pub(crate) fn remove(&mut self, m: &[u8]) -> bool {
        let Some(score) = self.score(m) else {
            return false;
        };
        if let Ok(i) = self.position(score, m) {
            self.remove_at(i);
        }
        true
    }

    /// Removes and returns the member at rank `i`.
    pub(crate) fn remove_at(&mut self, i: usize) -> (Elem, f64) {
        let (s, e) = self.sorted.remove(i);
        if let Some(ix) = &mut self.index {
            ix.swap_remove(&e);
        }
        self.payload -= e.len();
        (e, s)
    }

    /// Removes ranks `start..end`; returns how many.
    pub(crate) fn remove_range(&mut self, start: usize, end: usize) -> usize {
        for (_, e) in self.sorted.drain(start, end) {
            self.payload -= e.len();
            if let Some(ix) = &mut self.index {
                ix.swap_remove(&e);
            }
        }
        end - start
    }

    /// The 0-based rank of `m` in ascending order.
    pub(crate) fn rank(&self, m: &[u8]) -> Option<usize> {
        let s = self.score(m)?;
        self.position(s, m).ok()
    }

    /// The member and score at rank `i`.
    pub(crate) fn at(&self, i: usize) -> (&[u8], f64) {
        let (s, e) = self.sorted.get(i);
        (e, *s)
    }

    /// The ranks `[start, end)` whose scores lie within `min..max`.
    pub(crate) fn score_range(&self, min: ScoreBound, max: ScoreBound) -> (usize, usize) {
        let start = self.sorted.partition_point(|(s, _)| {
            if min.exclusive {
                *s <= min.value
            } else {
                *s < min.value
            }
        });
        let end = self.sorted.partition_point(|(s, _)| {
            if max.exclusive {
                *s < max.value
            } else {
                *s <= max.value
            }
        });
        (start, end.max(start))
    }

    /// The ranks `[start, end)` whose members lie within `min..max` (the
    /// members are assumed to share one score, as Redis requires).
    pub(crate) fn lex_range(&self, min: &LexBound, max: &LexBound) -> (usize, usize) {
        let above_min = |m: &[u8]| match min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::At(v, incl) => m > &v[..] || (*incl && m == &v[..]),
        };
        let below_max = |m: &[u8]| match max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::At(v, incl) => m < &v[..] || (*incl && m == &v[..]),
        };
        let start = self.sorted.partition_point(|(_, e)| !above_min(e));
        let end = self.sorted.partition_point(|(_, e)| below_max(e));
        (start, end.max(start))
    }

    /// Ranks `start..end` as (member, score), in order.
    pub(crate) fn range(
        &self,
        start: usize,
        end: usize,
    ) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.sorted.range(start, end).map(|(s, e)| (&e[..], *s))
    }

    /// Every (member, score) in order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.sorted.iter().map(|(s, e)| (&e[..], *s))
    }

    /// The large form's (member, score) at position `i` of its map's entry
    /// vector (ZSCAN's walk); None in the compact form or past the end.
    pub(crate) fn indexed(&self, i: usize) -> Option<(&[u8], f64)> {
        let (m, s) = self.index.as_ref()?.get_index(i)?;
        Some((m, *s))
    }

    /// OBJECT ENCODING
    pub(crate) fn encoding(&self) -> &'static str {
        if self.index.is_some() {
            "skiplist"
        } else {
            "listpack"
        }
    }

    /// Estimated bytes.
    pub(crate) fn mem(&self) -> usize {
        let per = MEMBER_OVERHEAD
            + if self.index.is_some() {
                INDEX_OVERHEAD
            } else {
                0
            };
        self.payload * if self.index.is_some() { 2 } else { 1 } + self.len() * per
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zset(items: &[(f64, &str)]) -> ZSet {
        let mut z = ZSet::default();
        let t = Thresholds::default();
        for (s, m) in items {
            z.insert(m.as_bytes(), *s, &t);
        }
        z
    }

    #[test]
    fn members_order_by_score_then_bytes_and_rescoring_moves_them() {
        let mut z = zset(&[(2.0, "b"), (1.0, "z"), (2.0, "a")]);
        let order: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(order, vec![b"z".to_vec(), b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(z.insert(b"z", 3.0, &Thresholds::default()), Some(1.0));
        assert_eq!(z.rank(b"z"), Some(2));
        assert!(z.remove(b"a") && !z.remove(b"a"));
        assert_eq!(z.len(), 2);
    }

    #[test]
    fn score_and_lex_ranges_honour_exclusive_bounds() {
        let z = zset(&[(1.0, "a"), (2.0, "b"), (3.0, "c")]);
        let b = |value, exclusive| ScoreBound { value, exclusive };
        assert_eq!(z.score_range(b(1.0, false), b(3.0, false)), (0, 3));
        assert_eq!(z.score_range(b(1.0, true), b(3.0, true)), (1, 2));
        assert_eq!(z.score_range(b(5.0, false), b(1.0, false)), (3, 3));
        let same = zset(&[(0.0, "a"), (0.0, "b"), (0.0, "c")]);
        let at = |s: &str, i| LexBound::At(s.as_bytes().to_vec(), i);
        assert_eq!(same.lex_range(&LexBound::Min, &LexBound::Max), (0, 3));
        assert_eq!(same.lex_range(&at("a", false), &at("c", true)), (1, 3));
    }

    #[test]
    fn large_sets_switch_to_the_indexed_form() {
        let t = Thresholds {
            zset_entries: 2,
            ..Thresholds::default()
        };
        let mut z = ZSet::default();
        for (i, m) in ["a", "b", "c"].iter().enumerate() {
            z.insert(m.as_bytes(), i as f64, &t);
        }
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.score(b"c"), Some(2.0));
        z.remove_range(0, 2);
        assert_eq!(z.score(b"a"), None);
        assert_eq!(z.len(), 1);
    }
}
