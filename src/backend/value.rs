//! The collection values a key can hold besides a string: hashes, lists,
//! sets and sorted sets (the latter in `zset.rs`), each with the compact
//! and the large representation Redis switches between, the encoding name
//! Redis reports for it, and an O(1) memory estimate.
//!
//! Used by `store.rs` (an entry holds at most one [`Coll`]) and the command
//! families in `commands/`. Never locks anything and never sees a key.
//!
//! Compact forms keep insertion order (Redis's listpack does, and replies
//! such as HGETALL show it); a collection moves to its large form once a
//! [`Thresholds`] limit is passed and, like Redis, never moves back.

use super::zset::ZSet;
use std::collections::{HashMap, HashSet, VecDeque};

/// One element: a member, a field, a value or a list item.
pub type Elem = Box<[u8]>;

/// Bytes counted per element on top of its own length: the `Box` pointer
/// and length (16), its allocation's malloc header and rounding (~16), and
/// the table slot where the large form has one.
const ELEM_OVERHEAD: usize = 32;
/// Extra per element of a hash table (slot at ~75% load, control byte).
const TABLE_OVERHEAD: usize = 24;
/// Bytes of an empty collection (its struct and first allocations).
const COLL_BASE: usize = 64;

/// The type of a key, as TYPE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (also bitmaps and HyperLogLogs).
    String,
    /// HSET and friends.
    Hash,
    /// LPUSH and friends.
    List,
    /// SADD and friends.
    Set,
    /// ZADD and friends.
    ZSet,
}

impl Kind {
    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
        }
    }
}

/// The encoding limits, Redis's config parameters of the same names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// `hash-max-listpack-entries`
    pub hash_entries: usize,
    /// `hash-max-listpack-value`
    pub hash_value: usize,
    /// `list-max-listpack-size`: entries if positive, else a size class
    /// (-1 = 4 KB … -5 = 64 KB).
    pub list_size: i64,
    /// `set-max-intset-entries`
    pub set_intset: usize,
    /// `set-max-listpack-entries`
    pub set_entries: usize,
    /// `set-max-listpack-value`
    pub set_value: usize,
    /// `zset-max-listpack-entries`
    pub zset_entries: usize,
    /// `zset-max-listpack-value`
    pub zset_value: usize,
}

impl Default for Thresholds {
    /// Redis 7's defaults.
    fn default() -> Self {
        Thresholds {
            hash_entries: 512,
            hash_value: 64,
            list_size: -2,
            set_intset: 512,
            set_entries: 128,
            set_value: 64,
            zset_entries: 128,
            zset_value: 64,
        }
    }
}

impl Thresholds {
    /// Whether a list of `len` items totalling `bytes` fits one listpack.
    fn list_fits(&self, len: usize, bytes: usize) -> bool {
        if self.list_size >= 0 {
            len <= self.list_size as usize
        } else {
            let class = (-self.list_size).clamp(1, 5) as u32;
            // Redis counts listpack bytes: ~2 per entry plus the data.
            bytes + 2 * len + 7 <= 4096 << (class - 1)
        }
    }
}

/// A non-string value.
#[derive(Debug, Clone)]
pub enum Coll {
    /// A hash.
    Hash(Hash),
    /// A list.
    List(List),
    /// A set.
    Set(Set),
    /// A sorted set.
    ZSet(ZSet),
}

impl Coll {
    /// Its type.
    pub fn kind(&self) -> Kind {
        match self {
            Coll::Hash(_) => Kind::Hash,
            Coll::List(_) => Kind::List,
            Coll::Set(_) => Kind::Set,
            Coll::ZSet(_) => Kind::ZSet,
        }
    }

    /// Number of elements (fields, items, members).
    pub fn len(&self) -> usize {
        match self {
            Coll::Hash(h) => h.len(),
            Coll::List(l) => l.len(),
            Coll::Set(s) => s.len(),
            Coll::ZSet(z) => z.len(),
        }
    }

    /// Whether it has no elements (such a key is deleted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Coll::Hash(h) => h.encoding(),
            Coll::List(l) => l.encoding(),
            Coll::Set(s) => s.encoding(),
            Coll::ZSet(z) => z.encoding(),
        }
    }

    /// Estimated bytes, kept in O(1).
    pub fn mem(&self) -> usize {
        COLL_BASE
            + match self {
                Coll::Hash(h) => h.mem(),
                Coll::List(l) => l.mem(),
                Coll::Set(s) => s.mem(),
                Coll::ZSet(z) => z.mem(),
            }
    }
}

/// A collection type that commands can ask the store for by type.
pub trait Typed: Sized {
    /// Its TYPE.
    const KIND: Kind;
    /// An empty one, wrapped.
    fn empty() -> Coll;
    /// The collection as this type, if it is one.
    fn of(c: &mut Coll) -> Option<&mut Self>;
    /// Read-only [`Typed::of`].
    fn of_ref(c: &Coll) -> Option<&Self>;
}

macro_rules! typed {
    ($t:ident, $variant:ident, $kind:ident) => {
        impl Typed for $t {
            const KIND: Kind = Kind::$kind;
            fn empty() -> Coll {
                Coll::$variant($t::default())
            }
            fn of(c: &mut Coll) -> Option<&mut Self> {
                match c {
                    Coll::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn of_ref(c: &Coll) -> Option<&Self> {
                match c {
                    Coll::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
typed!(Hash, Hash, Hash);
typed!(List, List, List);
typed!(Set, Set, Set);
typed!(ZSet, ZSet, ZSet);

/// A hash: field → value.
#[derive(Debug, Clone, Default)]
pub struct Hash {
    /// Listpack form: pairs in insertion order; `None` once converted.
    small: Vec<(Elem, Elem)>,
    big: Option<HashMap<Elem, Elem>>,
    /// Sum of field and value lengths.
    payload: usize,
}

impl Hash {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.big.as_ref().map_or(self.small.len(), |m| m.len())
    }

    /// Whether it has no fields.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
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
    pub fn insert(&mut self, field: &[u8], value: &[u8], t: &Thresholds) -> bool {
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
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let removed = match &mut self.big {
            Some(m) => m.remove_entry(field),
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
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&[u8], &[u8])> + '_> {
        match &self.big {
            Some(m) => Box::new(m.iter().map(|(f, v)| (&f[..], &v[..]))),
            None => Box::new(self.small.iter().map(|(f, v)| (&f[..], &v[..]))),
        }
    }

    /// OBJECT ENCODING
    pub fn encoding(&self) -> &'static str {
        if self.big.is_some() {
            "hashtable"
        } else {
            "listpack"
        }
    }

    /// Whether it is in the compact form.
    pub fn is_compact(&self) -> bool {
        self.big.is_none()
    }

    fn mem(&self) -> usize {
        let per = 2 * ELEM_OVERHEAD
            + if self.big.is_some() {
                TABLE_OVERHEAD
            } else {
                0
            };
        self.payload + self.len() * per
    }
}

/// A list of items.
#[derive(Debug, Clone, Default)]
pub struct List {
    /// The items, head first.
    pub items: VecDeque<Elem>,
    /// Sum of item lengths.
    payload: usize,
    /// Whether Redis would hold it as a quicklist (with hysteresis: back
    /// to a listpack only when it fits in half the limit, as Redis 7.2).
    quick: bool,
}

impl List {
    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether it has no items.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds at the head or the tail.
    pub fn push(&mut self, item: &[u8], head: bool) {
        self.payload += item.len();
        if head {
            self.items.push_front(item.into());
        } else {
            self.items.push_back(item.into());
        }
    }

    /// Inserts at `index` (0..=len).
    pub fn insert(&mut self, index: usize, item: &[u8]) {
        self.payload += item.len();
        self.items.insert(index, item.into());
    }

    /// Takes from the head or the tail.
    pub fn pop(&mut self, head: bool) -> Option<Elem> {
        let e = if head {
            self.items.pop_front()
        } else {
            self.items.pop_back()
        }?;
        self.payload -= e.len();
        Some(e)
    }

    /// Removes the item at `index`.
    pub fn remove(&mut self, index: usize) -> Option<Elem> {
        let e = self.items.remove(index)?;
        self.payload -= e.len();
        Some(e)
    }

    /// Replaces the item at `index` (which must exist).
    pub fn set(&mut self, index: usize, item: &[u8]) {
        self.payload += item.len();
        let old = std::mem::replace(&mut self.items[index], item.into());
        self.payload -= old.len();
    }

    /// Keeps only items `start..end`.
    pub fn keep(&mut self, start: usize, end: usize) {
        self.items.truncate(end);
        for e in self.items.drain(..start) {
            self.payload -= e.len();
        }
        let rest: usize = self.items.iter().map(|e| e.len()).sum();
        self.payload = rest;
    }

    /// Recomputes the encoding after a change.
    pub fn settle(&mut self, t: &Thresholds) {
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
    pub fn encoding(&self) -> &'static str {
        if self.quick {
            "quicklist"
        } else {
            "listpack"
        }
    }

    fn mem(&self) -> usize {
        self.payload + self.len() * ELEM_OVERHEAD
    }
}

/// The canonical integer a set member is, if it is one (intset rule:
/// exactly the text `string2ll` accepts).
pub fn as_int(m: &[u8]) -> Option<i64> {
    crate::resp::parse_i64(m)
}

/// A set of members.
#[derive(Debug, Clone, Default)]
pub struct Set {
    /// Intset form: sorted integers (used while `compact` is empty and
    /// `big` is None and every member is an integer).
    ints: Vec<i64>,
    /// Listpack form, insertion order.
    compact: Vec<Elem>,
    big: Option<HashSet<Elem>>,
    /// Which of `ints` / `compact` is in use when `big` is None.
    listpack: bool,
    payload: usize,
}

impl Set {
    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.big {
            Some(s) => s.len(),
            None if self.listpack => self.compact.len(),
            None => self.ints.len(),
        }
    }

    /// Whether it has no members.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `m` is a member.
    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.big {
            Some(s) => s.contains(m),
            None if self.listpack => self.compact.iter().any(|e| &e[..] == m),
            None => as_int(m).is_some_and(|i| self.ints.binary_search(&i).is_ok()),
        }
    }

    /// Adds `m`; true if it is new.
    pub fn insert(&mut self, m: &[u8], t: &Thresholds) -> bool {
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
        let mut s: HashSet<Elem> = self.compact.drain(..).collect();
        s.extend(self.ints.drain(..).map(int_elem));
        self.big = Some(s);
    }

    /// Removes `m`; true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        let removed = match &mut self.big {
            Some(s) => s.remove(m),
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
    pub fn members(&self) -> Vec<Elem> {
        match &self.big {
            Some(s) => s.iter().cloned().collect(),
            None if self.listpack => self.compact.clone(),
            None => self.ints.iter().copied().map(int_elem).collect(),
        }
    }

    /// The member at position `i` of [`Set::members`]'s order, for random
    /// picks without copying the whole set (O(1) in the compact forms).
    pub fn nth(&self, i: usize) -> Option<Elem> {
        match &self.big {
            Some(s) => s.iter().nth(i).cloned(),
            None if self.listpack => self.compact.get(i).cloned(),
            None => self.ints.get(i).copied().map(int_elem),
        }
    }

    /// OBJECT ENCODING
    pub fn encoding(&self) -> &'static str {
        match (&self.big, self.listpack) {
            (Some(_), _) => "hashtable",
            (None, true) => "listpack",
            (None, false) => "intset",
        }
    }

    fn mem(&self) -> usize {
        match (&self.big, self.listpack) {
            (Some(_), _) => self.payload + self.len() * (ELEM_OVERHEAD + TABLE_OVERHEAD),
            (None, true) => self.payload + self.len() * ELEM_OVERHEAD,
            (None, false) => self.len() * 8,
        }
    }
}

/// An integer's decimal text as an element.
pub fn int_elem(i: i64) -> Elem {
    i.to_string().into_bytes().into_boxed_slice()
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
