//! The hash value: a listpack-like pair vector in insertion order while
//! small, a hash table past `hash-max-listpack-*`.
use super::{Elem, Thresholds, ELEM_OVERHEAD, TABLE_OVERHEAD};
use indexmap::IndexMap;

/// A hash: field → value.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hash {
    /// Listpack form: pairs in insertion order; `None` once converted.
    small: Vec<(Elem, Elem)>,
    big: Option<IndexMap<Elem, Elem>>,
    /// Sum of field and value lengths.
    payload: usize,
}

impl Hash {
    /// Number of fields.
    pub(crate) fn len(&self) -> usize {
        self.big.as_ref().map_or(self.small.len(), |m| m.len())
    }

    /// The value of `field`.
    pub(crate) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.big {
            Some(m) => m.get(field).map(|v| &v[..]),
            None => self
                .small
                .iter()
                .find(|(f, _)| &f[..] == field)
                .map(|(_, v)| &v[..]),
        }
    }

    /// Sets `field`; true if it is new.
    pub(crate) fn insert(&mut self, field: &[u8], value: &[u8], t: &Thresholds) -> bool {
        if self.big.is_none()
            && (field.len() > t.hash_value
                || value.len() > t.hash_value
                || (self.small.len() >= t.hash_entries && self.get(field).is_none()))
        {
            self.big = Some(std::mem::take(&mut self.small).into_iter().collect());
        }
        self.payload += value.len();
        let old = match &mut self.big {
            Some(m) => match m.get_mut(field) {
                Some(v) => Some(std::mem::replace(v, value.into())),
                None => {
                    m.insert(field.into(), value.into());
                    None
                }
            },
            None => match self.small.iter_mut().find(|(f, _)| &f[..] == field) {
                Some((_, v)) => Some(std::mem::replace(v, value.into())),
                None => {
                    self.small.push((field.into(), value.into()));
                    None
                }
            },
        };
        match old {
            Some(v) => {
                self.payload -= v.len();
                false
            }
            None => {
                self.payload += field.len();
                true
            }
        }
    }

    /// Removes `field`; true if it was there.
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        let removed = match &mut self.big {
            Some(m) => m.swap_remove_entry(field),
            None => self
                .small
                .iter()
                .position(|(f, _)| &f[..] == field)
                .map(|i| self.small.remove(i)),
        };
        match removed {
            Some((f, v)) => {
                self.payload -= f.len() + v.len();
                true
            }
            None => false,
        }
    }

    /// Every (field, value), in insertion order for the compact form.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = (&[u8], &[u8])> + '_> {
        match &self.big {
            Some(m) => Box::new(m.iter().map(|(f, v)| (&f[..], &v[..]))),
            None => Box::new(self.small.iter().map(|(f, v)| (&f[..], &v[..]))),
        }
    }

    /// The pair at position `i` of [`Hash::iter`]'s order, in O(1) (for
    /// random picks).
    pub(crate) fn nth(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match &self.big {
            Some(m) => m.get_index(i).map(|(f, v)| (&f[..], &v[..])),
            None => self.small.get(i).map(|(f, v)| (&f[..], &v[..])),
        }
    }

    /// OBJECT ENCODING
    pub(crate) fn encoding(&self) -> &'static str {
        if self.big.is_some() {
            "hashtable"
        } else {
            "listpack"
        }
    }

    /// Whether it is in the compact form.
    pub(crate) fn is_compact(&self) -> bool {
        self.big.is_none()
    }

    pub(crate) fn mem(&self) -> usize {
        let per = 2 * ELEM_OVERHEAD
            + if self.big.is_some() {
                TABLE_OVERHEAD
            } else {
                0
            };
        self.payload + self.len() * per
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_keeps_insertion_order_then_converts_past_the_limits() {
        let t = Thresholds {
            hash_entries: 3,
            ..Thresholds::default()
        };
        let mut h = Hash::default();
        for f in ["c", "a", "b"] {
            assert!(h.insert(f.as_bytes(), b"1", &t));
        }
        assert!(!h.insert(b"a", b"22", &t));
        let order: Vec<_> = h.iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(order, vec![b"c".to_vec(), b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"d", b"1", &t);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"a"), Some(&b"22"[..]));
        assert!(h.remove(b"a") && !h.remove(b"a"));
        assert_eq!(h.payload, 3 + 3);
    }
}
