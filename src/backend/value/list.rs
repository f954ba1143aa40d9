//! The list value: a deque of items, reported as a listpack or a
//! quicklist by `list-max-listpack-size`.
use super::{Elem, Thresholds, ELEM_OVERHEAD};
use std::collections::VecDeque;

/// A list of items.
#[derive(Debug, Clone, Default)]
pub(crate) struct List {
    /// The items, head first.
    pub(crate) items: VecDeque<Elem>,
    /// Sum of item lengths.
    payload: usize,
    /// Whether Redis would hold it as a quicklist (with hysteresis: back
    /// to a listpack only when it fits in half the limit, as Redis 7.2).
    quick: bool,
}

impl List {
    /// Number of items.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Adds at the head or the tail.
    pub(crate) fn push(&mut self, item: &[u8], head: bool) {
        self.payload += item.len();
        if head {
            self.items.push_front(item.into());
        } else {
            self.items.push_back(item.into());
        }
    }

    /// Inserts at `index` (0..=len).
    pub(crate) fn insert(&mut self, index: usize, item: &[u8]) {
        self.payload += item.len();
        self.items.insert(index, item.into());
    }

    /// Takes from the head or the tail.
    pub(crate) fn pop(&mut self, head: bool) -> Option<Elem> {
        let e = if head {
            self.items.pop_front()
        } else {
            self.items.pop_back()
        }?;
        self.payload -= e.len();
        Some(e)
    }

    /// Removes the item at `index`.
    pub(crate) fn remove(&mut self, index: usize) -> Option<Elem> {
        let e = self.items.remove(index)?;
        self.payload -= e.len();
        Some(e)
    }

    /// Replaces the item at `index` (which must exist).
    pub(crate) fn set(&mut self, index: usize, item: &[u8]) {
        self.payload += item.len();
        let old = std::mem::replace(&mut self.items[index], item.into());
        self.payload -= old.len();
    }

    /// Keeps only items `start..end`.
    pub(crate) fn keep(&mut self, start: usize, end: usize) {
        self.items.truncate(end);
        for e in self.items.drain(..start) {
            self.payload -= e.len();
        }
        let rest: usize = self.items.iter().map(|e| e.len()).sum();
        self.payload = rest;
    }

    /// Recomputes the encoding after a change.
    pub(crate) fn settle(&mut self, t: &Thresholds) {
        let (n, b) = (self.items.len(), self.payload);
        if !self.quick && !t.list_fits(n, b) {
            self.quick = true;
        } else if self.quick {
            let half = if t.list_size >= 0 {
                n <= t.list_size as usize / 2
            } else {
                t.list_fits(n * 2, b * 2)
            };
            if half {
                self.quick = false;
            }
        }
    }

    /// OBJECT ENCODING
    pub(crate) fn encoding(&self) -> &'static str {
        if self.quick {
            "quicklist"
        } else {
            "listpack"
        }
    }

    pub(crate) fn mem(&self) -> usize {
        self.payload + self.len() * ELEM_OVERHEAD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_encoding_follows_the_size_limit_with_hysteresis() {
        let t = Thresholds {
            list_size: 4,
            ..Thresholds::default()
        };
        let mut l = List::default();
        for i in 0..5 {
            l.push(format!("{i}").as_bytes(), false);
            l.settle(&t);
        }
        assert_eq!(l.encoding(), "quicklist");
        l.pop(true);
        l.settle(&t);
        assert_eq!(l.encoding(), "quicklist");
        l.keep(0, 2);
        l.settle(&t);
        assert_eq!(l.encoding(), "listpack");
        assert_eq!(l.payload, 2);
    }
}
