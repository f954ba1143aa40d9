//! One node of a stream (a listpack in Redis): its entries packed into a
//! single byte buffer, written on append and decoded on read, so an entry
//! costs its data and a few bytes rather than a heap object per field.
//!
//! ```text
//! master:  field count (varint), per field: len (varint) + bytes
//! entry:   flags (u8: 1 = deleted, 2 = same fields as the master)
//!          ms delta (varint, against the previous entry; 0 for the first)
//!          seq (varint: the delta against the previous entry when the ms
//!               delta is 0, else the seq itself)
//!          same fields: one value per master field
//!          else:        pair count (varint), then field, value, field, …
//! value:   varint tag: even = a string of tag/2 bytes follows;
//!          odd = the integer zigzag(tag/2), kept as its decimal text
//! ```
//! The first entry's ID is the node's key in the stream's map (its master
//! ID), which the caller passes in; entries are only appended and flagged,
//! never moved. Only `stream/mod.rs` uses it.

use super::{listpack, StreamId};
use crate::backend::value::{int_elem, Elem};

const DELETED: u8 = 1;
const SAME_FIELDS: u8 = 2;

/// A node's bytes and counters.
#[derive(Debug)]
pub(super) struct Node {
    buf: Vec<u8>,
    /// The last entry's ID.
    pub(super) last: StreamId,
    /// Live entries.
    pub(super) live: u32,
    /// Tombstones.
    pub(super) deleted: u32,
    /// The listpack's size in Redis, without its two counters.
    lp: usize,
    /// Where the first entry starts (after the master fields).
    entries_at: usize,
    /// Master fields.
    nmaster: u32,
}

impl Clone for Node {
    /// Keeps the capacity, so the clone's counted bytes stay exact.
    fn clone(&self) -> Node {
        let mut buf = Vec::with_capacity(self.buf.capacity());
        buf.extend_from_slice(&self.buf);
        Node { buf, ..*self }
    }
}

/// One entry found by a [`Cursor`]: its ID, tombstone, and where it is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Raw {
    pub(super) id: StreamId,
    pub(super) deleted: bool,
    at: usize,
}

impl Node {
    /// A node whose master fields are the names of `fields` (flattened
    /// pairs); its first entry, `master`, is pushed by the caller.
    pub(super) fn new(master: StreamId, fields: &[&[u8]]) -> Node {
        let mut buf = Vec::new();
        put_varint(&mut buf, (fields.len() / 2) as u64);
        for name in fields.iter().step_by(2) {
            put_varint(&mut buf, name.len() as u64);
            buf.extend_from_slice(name);
        }
        Node {
            entries_at: buf.len(),
            nmaster: (fields.len() / 2) as u32,
            buf,
            last: master,
            live: 0,
            deleted: 0,
            lp: listpack::master_bytes(fields),
        }
    }

    /// The size Redis compares with `stream-node-max-bytes`.
    pub(super) fn lp_bytes(&self) -> usize {
        self.lp + listpack::int_size(self.live as i64) + listpack::int_size(self.deleted as i64)
    }

    /// Heap bytes the buffer holds.
    pub(super) fn heap(&self) -> usize {
        self.buf.capacity()
    }

    /// Gives back the buffer's spare room once nothing more is appended.
    pub(super) fn seal(&mut self) {
        self.buf.shrink_to_fit();
    }

    /// The master field names.
    pub(super) fn master_fields(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut r = Bytes(&self.buf, 0);
        r.varint();
        (0..self.nmaster).map(move |_| r.string())
    }

    /// Appends entry `id` (after `last`) with flattened pairs `fields`;
    /// `key` is the node's master ID.
    pub(super) fn push(&mut self, key: StreamId, id: StreamId, fields: &[&[u8]]) {
        let same = self.nmaster as usize == fields.len() / 2
            && fields
                .iter()
                .step_by(2)
                .zip(self.master_fields())
                .all(|(a, b)| *a == b);
        self.lp += listpack::entry_bytes(key, same, id, fields);
        let first = self.live + self.deleted == 0;
        let prev = self.last;
        let b = &mut self.buf;
        b.push(if same { SAME_FIELDS } else { 0 });
        let dms = if first { 0 } else { id.ms - prev.ms };
        put_varint(b, dms);
        put_varint(
            b,
            match (first, dms) {
                (true, _) => 0,
                (false, 0) => id.seq - prev.seq,
                (false, _) => id.seq,
            },
        );
        if same {
            fields
                .iter()
                .skip(1)
                .step_by(2)
                .for_each(|v| put_value(b, v));
        } else {
            put_varint(b, (fields.len() / 2) as u64);
            fields.iter().for_each(|v| put_value(b, v));
        }
        self.last = id;
        self.live += 1;
    }

    /// The entries in order, from the node's master ID `key`.
    pub(super) fn cursor(&self, key: StreamId) -> Cursor<'_> {
        Cursor {
            node: self,
            pos: self.entries_at,
            prev: key,
            first: true,
        }
    }

    /// The entry's flattened field-value pairs, decoded.
    pub(super) fn fields(&self, raw: &Raw) -> Vec<Elem> {
        let mut r = Bytes(&self.buf, raw.at + 1);
        r.varint();
        r.varint();
        if self.buf[raw.at] & SAME_FIELDS != 0 {
            let mut out = Vec::with_capacity(2 * self.nmaster as usize);
            for n in self.master_fields() {
                out.push(Elem::from(n));
                out.push(r.value());
            }
            out
        } else {
            let n = r.varint() as usize;
            (0..2 * n).map(|_| r.value()).collect()
        }
    }

    /// Marks the entry a tombstone (it must be live).
    pub(super) fn kill(&mut self, raw: &Raw) {
        self.buf[raw.at] |= DELETED;
        self.live -= 1;
        self.deleted += 1;
    }
}

/// Walks a node's entries forwards, skipping over their fields.
pub(super) struct Cursor<'a> {
    node: &'a Node,
    pos: usize,
    prev: StreamId,
    first: bool,
}

impl Iterator for Cursor<'_> {
    type Item = Raw;

    fn next(&mut self) -> Option<Raw> {
        let buf = &self.node.buf;
        if self.pos >= buf.len() {
            return None;
        }
        let at = self.pos;
        let flags = buf[at];
        let mut r = Bytes(buf, at + 1);
        let dms = r.varint();
        let seq = r.varint();
        let id = if self.first {
            self.prev
        } else if dms == 0 {
            StreamId::new(self.prev.ms, self.prev.seq + seq)
        } else {
            StreamId::new(self.prev.ms + dms, seq)
        };
        let values = if flags & SAME_FIELDS != 0 {
            self.node.nmaster as u64
        } else {
            2 * r.varint()
        };
        (0..values).for_each(|_| r.skip_value());
        self.pos = r.1;
        self.prev = id;
        self.first = false;
        Some(Raw {
            id,
            deleted: flags & DELETED != 0,
            at,
        })
    }
}

fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push(v as u8 | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// A value: an integer in its canonical decimal form (what Redis's
/// listpack stores as an integer too) as a tagged varint, else the bytes.
fn put_value(b: &mut Vec<u8>, v: &[u8]) {
    if let Some(i) = crate::resp::parse_i64(v) {
        let zz = ((i << 1) ^ (i >> 63)) as u64;
        if zz >> 63 == 0 {
            put_varint(b, (zz << 1) | 1);
            return;
        }
    }
    put_varint(b, (v.len() as u64) << 1);
    b.extend_from_slice(v);
}

/// A node's bytes and a position in them; they were written by this file,
/// so reading them cannot fail.
struct Bytes<'a>(&'a [u8], usize);

impl<'a> Bytes<'a> {
    fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.0[self.1];
            self.1 += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    fn string(&mut self) -> &'a [u8] {
        let n = self.varint() as usize;
        self.1 += n;
        &self.0[self.1 - n..self.1]
    }

    fn value(&mut self) -> Elem {
        let tag = self.varint();
        if tag & 1 == 1 {
            let zz = tag >> 1;
            int_elem((zz >> 1) as i64 ^ -((zz & 1) as i64))
        } else {
            let n = (tag >> 1) as usize;
            self.1 += n;
            Elem::from(&self.0[self.1 - n..self.1])
        }
    }

    fn skip_value(&mut self) {
        let tag = self.varint();
        if tag & 1 == 0 {
            self.1 += (tag >> 1) as usize;
        }
    }
}
