//! The set value: an intset (sorted integers), then a listpack-like vector
//! in insertion order, then a hash table, by `set-max-*` thresholds.
use super::{int_elem, Elem, Thresholds, ELEM_OVERHEAD, TABLE_OVERHEAD};
use indexmap::IndexSet;

/// The canonical integer a set member is, if it is one (intset rule:
/// exactly the text `string2ll` accepts).
pub(crate) fn as_int(m: &[u8]) -> Option<i64> {
    crate::resp::parse_i64(m)
}

/// A set of members.
#[derive(Debug, Clone, Default)]
pub(crate) struct Set {
    /// Intset form: sorted integers (used while `compact` is empty and
    /// `big` is None and every member is an integer).
    ints: Vec<i64>,
    /// Listpack form, insertion order.
    compact: Vec<Elem>,
    big: Option<IndexSet<Elem>>,
    /// Which of `ints` / `compact` is in use when `big` is None.
    listpack: bool,
    payload: usize,
}

impl Set {
    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        match &self.big {
            Some(s) => s.len(),
            None if self.listpack => self.compact.len(),
            None => self.ints.len(),
        }
    }

    /// Whether `m` is a member.
    pub(crate) fn contains(&self, m: &[u8]) -> bool {
        match &self.big {
            Some(s) => s.contains(m),
            None if self.listpack => self.compact.iter().any(|e| &e[..] == m),
            None => as_int(m).is_some_and(|i| self.ints.binary_search(&i).is_ok()),
        }
    }

    /// Adds `m`; true if it is new.
    pub(crate) fn insert(&mut self, m: &[u8], t: &Thresholds) -> bool {
        if self.contains(m) {
            return false;
        }
        self.payload += m.len();
        if let Some(s) = &mut self.big {
            s.insert(m.into());
            return true;
        }
        if !self.listpack {
            if let Some(i) = as_int(m) {
                if self.ints.len() < t.set_intset {
                    let at = self.ints.binary_search(&i).unwrap_or_else(|p| p);
                    self.ints.insert(at, i);
                    return true;
                }
                self.convert_to_table();
                return self.big.as_mut().is_some_and(|s| s.insert(m.into()));
            }
            // A non-integer: the intset becomes a listpack if it fits.
            if self.ints.len() < t.set_entries && m.len() <= t.set_value {
                self.compact = self.ints.drain(..).map(int_elem).collect();
                self.listpack = true;
            } else {
                self.convert_to_table();
                return self.big.as_mut().is_some_and(|s| s.insert(m.into()));
            }
        }
        if self.compact.len() >= t.set_entries || m.len() > t.set_value {
            self.convert_to_table();
            return self.big.as_mut().is_some_and(|s| s.insert(m.into()));
        }
        self.compact.push(m.into());
        true
    }

    fn convert_to_table(&mut self) {
        let mut s: IndexSet<Elem> = self.compact.drain(..).collect();
        s.extend(self.ints.drain(..).map(int_elem));
        self.big = Some(s);
    }

    /// Removes `m`; true if it was there.
    pub(crate) fn remove(&mut self, m: &[u8]) -> bool {
        let removed = match &mut self.big {
            Some(s) => s.swap_remove(m),
            None if self.listpack => match self.compact.iter().position(|e| &e[..] == m) {
                Some(i) => {
                    self.compact.remove(i);
                    true
                }
                None => false,
            },
            None => match as_int(m).map(|i| self.ints.binary_search(&i)) {
                Some(Ok(i)) => {
                    self.ints.remove(i);
                    true
                }
                _ => false,
            },
        };
        if removed {
            self.payload -= m.len();
        }
        removed
    }

    /// Every member (integers ascending for an intset).
    pub(crate) fn members(&self) -> Vec<Elem> {
        match &self.big {
            Some(s) => s.iter().cloned().collect(),
            None if self.listpack => self.compact.clone(),
            None => self.ints.iter().copied().map(int_elem).collect(),
        }
    }

    /// The member at position `i` of [`Set::members`]'s order, for random
    /// picks without copying the whole set (O(1) in every form).
    pub(crate) fn nth(&self, i: usize) -> Option<Elem> {
        match &self.big {
            Some(s) => s.get_index(i).cloned(),
            None if self.listpack => self.compact.get(i).cloned(),
            None => self.ints.get(i).copied().map(int_elem),
        }
    }

    /// OBJECT ENCODING
    pub(crate) fn encoding(&self) -> &'static str {
        match (&self.big, self.listpack) {
            (Some(_), _) => "hashtable",
            (None, true) => "listpack",
            (None, false) => "intset",
        }
    }

    pub(crate) fn mem(&self) -> usize {
        match (&self.big, self.listpack) {
            (Some(_), _) => self.payload + self.len() * (ELEM_OVERHEAD + TABLE_OVERHEAD),
            (None, true) => self.payload + self.len() * ELEM_OVERHEAD,
            (None, false) => self.len() * 8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_moves_from_intset_to_listpack_to_hashtable() {
        let t = Thresholds {
            set_entries: 3,
            ..Thresholds::default()
        };
        let mut s = Set::default();
        for m in ["3", "1", "2"] {
            s.insert(m.as_bytes(), &t);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(s.members()[0], int_elem(1));
        assert!(s.contains(b"2") && !s.contains(b"02"));
        s.remove(b"3");
        s.insert(b"x", &t);
        assert_eq!(s.encoding(), "listpack");
        s.insert(b"y", &t);
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 4);
    }
}
