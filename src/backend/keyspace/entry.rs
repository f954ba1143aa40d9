//! One key and its value as the store holds it: a string shares one
//! allocation with its key, any other type is a boxed [`Coll`]. Owns the
//! per-entry memory estimate; knows nothing of shards or locks.

use super::clock::lru_clock;
use crate::backend::error::CmdError;
use crate::backend::value::{Coll, Kind};

/// Bytes counted per entry on top of key and value length: the 48-byte
/// table slot at hashbrown's load factor (44%–87% between doublings: 55–109
/// bytes), its control byte, and the malloc header and rounding of the one
/// allocation that holds key and value (~16). Measured with 40-byte slots:
/// 1M keys of 16+16 bytes cost 140 bytes each in RSS just after a
/// doubling, redis-server 118. A collection adds its own estimate.
pub(crate) const ENTRY_OVERHEAD: usize = 104;

/// One key and its value. A string value shares one allocation with the
/// key; any other type lives in `coll` (and the string part is empty).
///
/// 48 bytes in the table: the key's hash is not stored (it is recomputed
/// when the table grows and by SCAN), because at millions of small keys
/// every slot byte counts.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The key followed by the string value; a `Vec` so APPEND and
    /// SETRANGE can grow the value in place.
    data: Vec<u8>,
    /// The value when it is not a string.
    coll: Option<Box<Coll>>,
    /// Absolute expiry in ms since the Unix epoch; 0 = none.
    pub(crate) expire_at: u64,
    key_len: u32,
    /// Last access, in [`lru_clock`] ticks.
    pub(crate) lru: u32,
}

impl Entry {
    /// A fresh entry holding copies of `key` and `value`.
    pub(crate) fn new(key: &[u8], value: &[u8], expire_at: u64, now: u64) -> Entry {
        let mut data = Vec::with_capacity(key.len() + value.len());
        data.extend_from_slice(key);
        data.extend_from_slice(value);
        // Keys are bounded by the request limit (512 MB), far below u32::MAX.
        Entry {
            data,
            coll: None,
            expire_at,
            key_len: key.len() as u32,
            lru: lru_clock(now),
        }
    }

    /// A fresh entry holding a collection.
    pub(crate) fn with_coll(key: &[u8], coll: Coll, expire_at: u64, now: u64) -> Entry {
        let mut e = Entry::new(key, b"", expire_at, now);
        e.coll = Some(Box::new(coll));
        e
    }

    /// A copy of this entry under another key (RENAME, COPY).
    pub(crate) fn with_key(&self, key: &[u8], now: u64) -> Entry {
        let mut e = Entry::new(key, self.value(), self.expire_at, now);
        e.coll = self.coll.clone();
        e
    }

    /// The value's type.
    pub(crate) fn kind(&self) -> Kind {
        self.coll.as_ref().map_or(Kind::String, |c| c.kind())
    }

    /// Whether the value is a string.
    pub(crate) fn is_string(&self) -> bool {
        self.coll.is_none()
    }

    /// The string value, or WRONGTYPE.
    pub(crate) fn str_value(&self) -> Result<&[u8], CmdError> {
        if self.coll.is_some() {
            return Err(CmdError::WrongType);
        }
        Ok(self.value())
    }

    /// The collection, if the value is not a string.
    pub(crate) fn coll(&self) -> Option<&Coll> {
        self.coll.as_deref()
    }

    /// Mutable [`Entry::coll`].
    pub(crate) fn coll_mut(&mut self) -> Option<&mut Coll> {
        self.coll.as_deref_mut()
    }

    /// The key.
    pub(crate) fn key(&self) -> &[u8] {
        &self.data[..self.key_len as usize]
    }

    /// The string value's bytes (empty when the value is a collection:
    /// string commands check [`Entry::is_string`] or use
    /// [`Entry::str_value`] / [`Locked::get_string`] first).
    pub(crate) fn value(&self) -> &[u8] {
        &self.data[self.key_len as usize..]
    }

    /// Replaces the value with a string.
    pub(crate) fn set_value(&mut self, value: &[u8]) {
        self.coll = None;
        self.data.truncate(self.key_len as usize);
        self.data.extend_from_slice(value);
        if self.data.capacity() > 2 * self.data.len() + 64 {
            self.data.shrink_to_fit();
        }
    }

    /// Appends to the value (APPEND).
    pub(crate) fn append(&mut self, more: &[u8]) {
        self.data.extend_from_slice(more);
    }

    /// Replaces the value and the expiry, reusing the allocation when it is
    /// large enough and not more than twice what is needed.
    pub(crate) fn replace_value(&mut self, value: &[u8], expire_at: u64) {
        self.coll = None;
        let key_len = self.key_len as usize;
        let need = key_len + value.len();
        self.data.truncate(key_len);
        if self.data.capacity() > 2 * need + 64 {
            self.data.shrink_to(need);
        }
        self.data.reserve_exact(value.len());
        self.data.extend_from_slice(value);
        self.expire_at = expire_at;
    }

    /// Writes `bytes` at `offset` in the value, zero-padding (SETRANGE).
    pub(crate) fn write_at(&mut self, offset: usize, bytes: &[u8]) {
        let start = self.key_len as usize + offset;
        if self.data.len() < start + bytes.len() {
            self.data.resize(start + bytes.len(), 0);
        }
        self.data[start..start + bytes.len()].copy_from_slice(bytes);
    }

    /// Whether the entry has expired at `now` (ms).
    pub(crate) fn is_expired(&self, now: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now
    }

    /// Bytes this entry counts towards `used_memory`.
    pub(crate) fn mem(&self) -> usize {
        self.data.capacity() + ENTRY_OVERHEAD + self.coll.as_ref().map_or(0, |c| c.mem())
    }
}
