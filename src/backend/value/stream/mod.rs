//! The stream: entries by ID (`ms-seq`), laid out in nodes of up to 100
//! entries or 4 KB as Redis's listpacks are, so that approximate trimming
//! (`MAXLEN ~`), which only drops whole nodes, keeps exactly what Redis
//! keeps; plus the stream's counters and its consumer groups (`group.rs`).
//!
//! Each node is one byte buffer (`node.rs`): the field names once, then
//! per entry a flag byte, the ID as deltas and the values, decoded when
//! read (`range.rs`). A deleted entry stays in its node as a tombstone
//! until the node holds no live entry, as in Redis; an empty stream is
//! still a key. Never sees a key or a lock; the commands are in
//! `commands/streams*.rs`.

mod codec;
mod group;
mod listpack;
mod node;
mod range;
mod rax;
mod wait;

pub(crate) use group::{Group, Pending};
pub(crate) use range::Range;
pub(crate) use wait::XReadOp;

use super::{Elem, Thresholds};
use node::Node;
use std::collections::BTreeMap;
use std::fmt;

/// A stream entry's ID.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StreamId {
    /// Milliseconds part.
    pub(crate) ms: u64,
    /// Sequence part.
    pub(crate) seq: u64,
}

impl StreamId {
    /// `0-0`.
    pub(crate) const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID.
    pub(crate) const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An ID.
    pub(crate) fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID, None after the largest (Redis's `streamIncrID`).
    pub(crate) fn incr(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID, None before `0-0` (`streamDecrID`).
    pub(crate) fn decr(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    /// Whether it is `0-0`.
    pub(crate) fn is_zero(self) -> bool {
        self == StreamId::MIN
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// How XADD and XTRIM trim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trim {
    /// No trimming.
    None,
    /// MAXLEN n
    MaxLen(u64),
    /// MINID id
    MinId(StreamId),
}

/// Bytes counted per node besides its buffer's capacity: the node's slot
/// in the map (ID and [`Node`], 80 bytes, in B-tree leaves of 11 that
/// appending leaves a little over half full) and the buffer's malloc
/// header.
const NODE_OVERHEAD: usize = 160;
/// The largest listpack Redis makes (`STREAM_LISTPACK_MAX_SIZE`).
const LISTPACK_MAX: usize = 1 << 30;

/// A stream.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    len: usize,
    /// The last ID added (or set with XSETID).
    pub(crate) last_id: StreamId,
    /// The first live entry's ID (Redis's `first_id`, for lag estimates).
    pub(crate) first_id: StreamId,
    /// The largest ID ever deleted with XDEL.
    pub(crate) max_deleted: StreamId,
    /// Entries ever added.
    pub(crate) entries_added: u64,
    /// Consumer groups by name.
    pub(crate) groups: BTreeMap<Elem, Group>,
    mem: usize,
}

impl Stream {
    /// Live entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Nodes (XINFO's `radix-tree-keys`).
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes of Redis's radix tree for them (`radix-tree-nodes`).
    pub(crate) fn rax_nodes(&self) -> usize {
        rax::nodes(&self.nodes.keys().copied().collect::<Vec<_>>())
    }

    /// The encoding OBJECT ENCODING reports.
    pub(crate) fn encoding(&self) -> &'static str {
        "stream"
    }

    /// Counted bytes: the nodes' buffers (their capacity) and slots, and
    /// the consumer groups.
    pub(crate) fn mem(&self) -> usize {
        self.mem
            + self
                .groups
                .iter()
                .map(|(n, g)| n.len() + g.mem())
                .sum::<usize>()
    }

    /// Appends an entry with `id` (greater than `last_id`, checked by the
    /// caller) and flattened field-value pairs; a node is full at `t`'s
    /// `stream-node-max-bytes` / `-entries`, as in Redis.
    pub(crate) fn append(&mut self, id: StreamId, fields: &[&[u8]], t: &Thresholds) {
        let max_bytes = match t.stream_node_bytes {
            0 => LISTPACK_MAX,
            b => b.min(LISTPACK_MAX),
        };
        let max_entries = t.stream_node_entries;
        let data: usize = fields.iter().map(|f| f.len()).sum();
        let tail = self.nodes.values_mut().next_back();
        let full = tail.as_ref().is_none_or(|n| {
            n.lp_bytes() + data >= max_bytes
                || (max_entries != 0 && (n.live + n.deleted) as usize >= max_entries)
        });
        if full {
            if let Some(n) = tail {
                let before = n.heap();
                n.seal();
                self.mem = self.mem + n.heap() - before;
            }
            let node = Node::new(id, fields);
            self.mem += NODE_OVERHEAD + node.heap();
            self.nodes.insert(id, node);
        }
        let (&key, node) = self.nodes.iter_mut().next_back().expect("a node");
        let before = node.heap();
        node.push(key, id, fields);
        self.mem = self.mem + node.heap() - before;
        self.len += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.len == 1 {
            self.first_id = id;
        }
    }

    /// The live entries from `start` to `end` inclusive, forwards or
    /// backwards, each decoded as it is reached.
    pub(crate) fn range(&self, start: StreamId, end: StreamId, rev: bool) -> Range<'_> {
        Range::new(&self.nodes, start, end, rev)
    }

    /// The fields of the live entry `id`.
    pub(crate) fn get(&self, id: StreamId) -> Option<Vec<Elem>> {
        self.range(id, id, false).next().map(|(_, f)| f)
    }

    /// Whether the live entry `id` exists (nothing is decoded).
    pub(crate) fn contains(&self, id: StreamId) -> bool {
        self.find(id).is_some_and(|(_, raw)| !raw.deleted)
    }

    /// The node key and position of entry `id`, live or a tombstone.
    fn find(&self, id: StreamId) -> Option<(StreamId, node::Raw)> {
        let (&key, node) = self.nodes.range(..=id).next_back()?;
        if node.last < id {
            return None;
        }
        let raw = node.cursor(key).find(|r| r.id >= id)?;
        (raw.id == id).then_some((key, raw))
    }

    /// The first (or last) live entry.
    pub(crate) fn edge(&self, last: bool) -> Option<(StreamId, Vec<Elem>)> {
        self.range(StreamId::MIN, StreamId::MAX, last).next()
    }

    /// Deletes the live entry `id` (XDEL's part; the caller updates
    /// `max_deleted` and `first_id`).
    pub(crate) fn delete(&mut self, id: StreamId) -> bool {
        let Some((key, raw)) = self.find(id).filter(|(_, r)| !r.deleted) else {
            return false;
        };
        self.len -= 1;
        let node = self.nodes.get_mut(&key).expect("found");
        if node.live == 1 {
            self.drop_node(key);
        } else {
            node.kill(&raw);
        }
        true
    }

    fn drop_node(&mut self, key: StreamId) -> usize {
        let Some(node) = self.nodes.remove(&key) else {
            return 0;
        };
        self.mem -= node.heap() + NODE_OVERHEAD;
        node.live as usize
    }

    /// Recomputes `first_id` after entries were removed.
    pub(crate) fn reset_first_id(&mut self) {
        self.first_id = self.edge(false).map_or(StreamId::MIN, |(id, _)| id);
    }

    /// Redis 7.0's `streamTrim`: drops whole nodes while the strategy
    /// allows; exact trimming then marks entries of the next node deleted,
    /// approximate trimming stops there. `limit` (0 = none) caps the
    /// entries removed. Returns how many were removed.
    pub(crate) fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut removed = 0u64;
        while let Some((&key, node)) = self.nodes.iter_mut().next() {
            if let Trim::MaxLen(max) = how {
                if self.len as u64 <= max {
                    break;
                }
            }
            let entries = u64::from(node.live);
            if limit != 0 && removed + entries > limit {
                break;
            }
            let whole = match how {
                Trim::None => return 0,
                Trim::MaxLen(max) => self.len as u64 - entries >= max,
                Trim::MinId(min) => node.last < min,
            };
            if whole {
                self.drop_node(key);
                self.len -= entries as usize;
                removed += entries;
                continue;
            }
            if approx {
                break;
            }
            let raws: Vec<node::Raw> = node.cursor(key).collect();
            for raw in raws {
                let stop = match how {
                    Trim::MaxLen(max) => self.len as u64 <= max,
                    Trim::MinId(min) => raw.id >= min,
                    Trim::None => true,
                };
                if stop {
                    break;
                }
                if !raw.deleted {
                    node.kill(&raw);
                    self.len -= 1;
                    removed += 1;
                }
            }
            break;
        }
        if removed > 0 {
            self.reset_first_id();
        }
        removed
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the logical
    /// read counter of `id`, None when it cannot be known.
    pub(crate) fn estimate_read(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.len == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - self.len as u64);
            }
            if id == self.first_id {
                return Some(self.entries_added - self.len as u64 + 1);
            }
        }
        None
    }

    /// Redis's `streamRangeHasTombstones` from `start` to the end.
    pub(crate) fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.len == 0 || self.max_deleted.is_zero() || self.first_id > self.max_deleted {
            return false;
        }
        start <= self.max_deleted
    }

    /// A group's lag, None when unknown (`streamReplyWithCGLag`); negative
    /// when a group was told it read more than was ever added.
    pub(crate) fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        let added = self.entries_added as i64;
        if let Some(read) = g.entries_read {
            if !self.has_tombstones_from(g.last_id) {
                return Some(added.wrapping_sub(read as i64));
            }
        }
        self.estimate_read(g.last_id)
            .map(|r| added.wrapping_sub(r as i64))
    }
}

#[cfg(test)]
mod tests;
