//! Typed access to the keyspace: the lookups command handlers use to get a
//! string or a collection of one type, with WRONGTYPE on a mismatch, and
//! the write path that creates a collection on first use and deletes it
//! with its key when it becomes empty.
//!
//! Extends [`Locked`] from `store.rs`; holds no lock of its own.

use super::entry::Entry;
use super::store::Locked;
use crate::backend::error::CmdError;
use crate::backend::value::{Coll, Kind, Typed};

impl Locked<'_> {
    /// Like [`Locked::read`] for a string: WRONGTYPE if the key holds
    /// another type.
    pub(crate) fn read_string(
        &mut self,
        hash: u64,
        key: &[u8],
    ) -> Result<Option<&mut Entry>, CmdError> {
        match self.read(hash, key) {
            Some(e) if !e.is_string() => Err(CmdError::WrongType),
            found => Ok(found),
        }
    }

    /// Like [`Locked::get`] for a string (a write's lookup: no hit or miss
    /// counted): WRONGTYPE if the key holds another type.
    pub(crate) fn get_string(
        &mut self,
        hash: u64,
        key: &[u8],
    ) -> Result<Option<&mut Entry>, CmdError> {
        match self.get(hash, key) {
            Some(e) if !e.is_string() => Err(CmdError::WrongType),
            found => Ok(found),
        }
    }

    /// The collection of type `T` at `key` (a read: counts a hit or miss);
    /// `Ok(None)` if absent, WRONGTYPE if it holds another type.
    pub(crate) fn read_coll<T: Typed>(
        &mut self,
        hash: u64,
        key: &[u8],
    ) -> Result<Option<&T>, CmdError> {
        match self.read(hash, key) {
            None => Ok(None),
            Some(e) => e
                .coll()
                .and_then(T::of_ref)
                .map(Some)
                .ok_or(CmdError::WrongType),
        }
    }

    /// The type of the live value at `key`, if any, without counting a read.
    pub(crate) fn kind_of(&mut self, hash: u64, key: &[u8]) -> Option<Kind> {
        self.get(hash, key).map(|e| e.kind())
    }

    /// Runs `f` on the collection of type `T` at `key`, creating an empty
    /// one first if `create`; WRONGTYPE if the key holds another type.
    /// `Ok(None)`: absent and not created. Memory is re-accounted after
    /// `f`, and a collection `f` left empty is deleted with its key.
    pub(crate) fn write_coll<T: Typed, R>(
        &mut self,
        hash: u64,
        key: &[u8],
        create: bool,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<Option<R>, CmdError> {
        let mut created = false;
        match self.kind_of(hash, key) {
            Some(k) if k != T::KIND => return Err(CmdError::WrongType),
            None if !create => return Ok(None),
            None => {
                // `new` is raised below, only if `f` left something there.
                let e = Entry::with_coll(key, T::empty(), 0, self.now);
                self.store_entry(hash, e, false);
                created = true;
            }
            Some(_) => {}
        }
        let done = self.update(hash, key, |e| {
            let c = e.coll_mut()?;
            let r = f(T::of(c)?);
            Some((r, c.is_empty()))
        });
        match done.flatten() {
            Some((r, empty)) => {
                if empty {
                    self.remove(hash, key);
                } else if created {
                    let n = &self.hooks.notices;
                    n.raise(super::notices::NEW, "new", key);
                }
                Ok(Some(r))
            }
            None => Ok(None),
        }
    }

    /// Stores `coll` at `key` (dropping any old value and TTL), or deletes
    /// the key if `coll` is empty (the STORE variants).
    pub(crate) fn put_coll(&mut self, hash: u64, key: &[u8], coll: Coll, expire_at: u64) {
        let old = self.remove(hash, key);
        if !coll.is_empty() {
            let e = Entry::with_coll(key, coll, expire_at, self.now);
            self.store_entry(hash, e, old.is_none());
        }
    }
}
