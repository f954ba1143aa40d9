//! The collection values a key can hold besides a string: hashes, lists,
//! sets and sorted sets (the latter in `zset.rs`), each with the compact
//! and the large representation Redis switches between, the encoding name
//! Redis reports for it, and an O(1) memory estimate.
//!
//! Used by `keyspace/` (an entry holds at most one [`Coll`]) and the command
//! families in `commands/`. Never locks anything and never sees a key.
//!
//! Compact forms keep insertion order (Redis's listpack does, and replies
//! such as HGETALL show it); a collection moves to its large form once a
//! [`Thresholds`] limit is passed and, like Redis, never moves back.

pub(crate) mod chunked;
mod hash;
mod list;
pub(crate) mod reader;
mod set;
pub(crate) mod stream;
pub(crate) mod zset;

pub(crate) use hash::Hash;
pub(crate) use list::List;
pub(crate) use set::Set;

use stream::Stream;
use zset::ZSet;

/// One element: a member, a field, a value or a list item.
pub(crate) type Elem = Box<[u8]>;

/// Bytes counted per element on top of its own length: the `Box` pointer
/// and length (16), its allocation's malloc header and rounding (~16), and
/// the table slot where the large form has one.
pub(crate) const ELEM_OVERHEAD: usize = 32;
/// Extra per element of a hash table (slot at ~75% load, control byte).
pub(crate) const TABLE_OVERHEAD: usize = 24;
/// Bytes of an empty collection (its struct and first allocations).
const COLL_BASE: usize = 64;

/// The type of a key, as TYPE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
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
    /// XADD and friends.
    Stream,
}

impl Kind {
    /// The name TYPE replies with.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }
}

/// The encoding limits, Redis's config parameters of the same names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Thresholds {
    /// `hash-max-listpack-entries`
    pub(crate) hash_entries: usize,
    /// `hash-max-listpack-value`
    pub(crate) hash_value: usize,
    /// `list-max-listpack-size`: entries if positive, else a size class
    /// (-1 = 4 KB … -5 = 64 KB).
    pub(crate) list_size: i64,
    /// `set-max-intset-entries`
    pub(crate) set_intset: usize,
    /// `set-max-listpack-entries`
    pub(crate) set_entries: usize,
    /// `set-max-listpack-value`
    pub(crate) set_value: usize,
    /// `zset-max-listpack-entries`
    pub(crate) zset_entries: usize,
    /// `zset-max-listpack-value`
    pub(crate) zset_value: usize,
    /// `stream-node-max-bytes` (0 = the 1 GB cap)
    pub(crate) stream_node_bytes: usize,
    /// `stream-node-max-entries` (0 = no limit)
    pub(crate) stream_node_entries: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds::REDIS_DEFAULTS
    }
}

impl Thresholds {
    /// Redis 7's defaults.
    pub(crate) const REDIS_DEFAULTS: Thresholds = Thresholds {
        hash_entries: 512,
        hash_value: 64,
        list_size: -2,
        set_intset: 512,
        set_entries: 128,
        set_value: 64,
        zset_entries: 128,
        zset_value: 64,
        stream_node_bytes: 4096,
        stream_node_entries: 100,
    };

    /// Whether a list of `len` items totalling `bytes` fits one listpack.
    pub(crate) fn list_fits(&self, len: usize, bytes: usize) -> bool {
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
pub(crate) enum Coll {
    /// A hash.
    Hash(Hash),
    /// A list.
    List(List),
    /// A set.
    Set(Set),
    /// A sorted set.
    ZSet(ZSet),
    /// A stream.
    Stream(Box<Stream>),
}

impl Coll {
    /// Its type.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Coll::Hash(_) => Kind::Hash,
            Coll::List(_) => Kind::List,
            Coll::Set(_) => Kind::Set,
            Coll::ZSet(_) => Kind::ZSet,
            Coll::Stream(_) => Kind::Stream,
        }
    }

    /// Number of elements (fields, items, members).
    pub(crate) fn len(&self) -> usize {
        match self {
            Coll::Hash(h) => h.len(),
            Coll::List(l) => l.len(),
            Coll::Set(s) => s.len(),
            Coll::ZSet(z) => z.len(),
            Coll::Stream(x) => x.len(),
        }
    }

    /// Whether it has no elements (such a key is deleted). A stream is
    /// never empty in this sense: Redis keeps an emptied stream's key.
    pub(crate) fn is_empty(&self) -> bool {
        !matches!(self, Coll::Stream(_)) && self.len() == 0
    }

    /// The name OBJECT ENCODING reports.
    pub(crate) fn encoding(&self) -> &'static str {
        match self {
            Coll::Hash(h) => h.encoding(),
            Coll::List(l) => l.encoding(),
            Coll::Set(s) => s.encoding(),
            Coll::ZSet(z) => z.encoding(),
            Coll::Stream(x) => x.encoding(),
        }
    }

    /// Estimated bytes, kept in O(1).
    pub(crate) fn mem(&self) -> usize {
        COLL_BASE
            + match self {
                Coll::Hash(h) => h.mem(),
                Coll::List(l) => l.mem(),
                Coll::Set(s) => s.mem(),
                Coll::ZSet(z) => z.mem(),
                Coll::Stream(x) => x.mem(),
            }
    }
}

/// A collection type that commands can ask the store for by type.
pub(crate) trait Typed: Sized {
    /// Its TYPE.
    const KIND: Kind;
    /// An empty one, wrapped.
    fn empty() -> Coll;
    /// The collection as this type, if it is one.
    fn of(c: &mut Coll) -> Option<&mut Self>;
    /// Read-only [`Typed::of`].
    fn of_ref(c: &Coll) -> Option<&Self>;
    /// Its elements (fields, items, members, entries).
    fn len(&self) -> usize;
}

/// A collection whose elements are removed by name: a hash's fields, a
/// set's or a sorted set's members.
pub(crate) trait ByName: Typed {
    /// Removes `name`; true if it was there.
    fn remove_name(&mut self, name: &[u8]) -> bool;
}

macro_rules! by_name {
    ($($t:ident),*) => {
        $(impl ByName for $t {
            fn remove_name(&mut self, name: &[u8]) -> bool {
                self.remove(name)
            }
        })*
    };
}
by_name!(Hash, Set, ZSet);

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
            fn len(&self) -> usize {
                $t::len(self)
            }
        }
    };
}
typed!(Hash, Hash, Hash);
typed!(List, List, List);
typed!(Set, Set, Set);
typed!(ZSet, ZSet, ZSet);

impl Typed for Stream {
    const KIND: Kind = Kind::Stream;
    fn empty() -> Coll {
        Coll::Stream(Box::default())
    }
    fn of(c: &mut Coll) -> Option<&mut Self> {
        match c {
            Coll::Stream(v) => Some(v),
            _ => None,
        }
    }
    fn of_ref(c: &Coll) -> Option<&Self> {
        match c {
            Coll::Stream(v) => Some(v),
            _ => None,
        }
    }
    fn len(&self) -> usize {
        Stream::len(self)
    }
}

/// An integer's decimal text as an element.
pub(crate) fn int_elem(i: i64) -> Elem {
    i.to_string().into_bytes().into_boxed_slice()
}
