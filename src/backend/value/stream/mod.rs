//! The stream: entries by ID (`ms-seq`), laid out in nodes of up to 100
//! entries or 4 KB as Redis's listpacks are, so that approximate trimming
//! (`MAXLEN ~`), which only drops whole nodes, keeps exactly what Redis
//! keeps; plus the stream's counters and its consumer groups (`group.rs`).
//!
//! A deleted entry stays in its node as a tombstone until the node holds
//! no live entry, as in Redis; an empty stream is still a key. Never sees
//! a key or a lock; the commands are in `commands/streams*.rs`.

mod codec;
mod group;
mod listpack;
mod rax;
mod wait;

pub(crate) use group::{Group, Pending};
pub(crate) use wait::XReadOp;

use super::{Elem, Thresholds, ELEM_OVERHEAD};
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

/// One entry: its ID, field-value pairs flattened, and its tombstone.
#[derive(Debug, Clone)]
struct Item {
    id: StreamId,
    fields: Box<[Elem]>,
    deleted: bool,
}

/// One node (a listpack in Redis): the first entry's fields, its entries
/// in ID order, and the listpack's size in bytes without its two counters.
#[derive(Debug, Clone)]
struct Node {
    master: StreamId,
    master_fields: Box<[Elem]>,
    items: Vec<Item>,
    live: usize,
    deleted: usize,
    bytes: usize,
}

impl Node {
    /// The size Redis compares with `stream-node-max-bytes`.
    fn lp_bytes(&self) -> usize {
        self.bytes + listpack::int_size(self.live as i64) + listpack::int_size(self.deleted as i64)
    }
}

fn pair(i: &Item) -> (StreamId, &[Elem]) {
    (i.id, &i.fields)
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

/// Bytes counted per entry besides its fields.
const ITEM_OVERHEAD: usize = 48;
/// Bytes counted per node.
const NODE_OVERHEAD: usize = 96;
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

    /// Estimated bytes: entries, nodes and consumer groups.
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
        let fields: Box<[Elem]> = fields.iter().map(|f| Elem::from(*f)).collect();
        let data: usize = fields.iter().map(|f| f.len()).sum();
        self.mem += ITEM_OVERHEAD + data + fields.len() * ELEM_OVERHEAD;
        let full = self.nodes.values().next_back().is_none_or(|n| {
            n.lp_bytes() + data >= max_bytes
                || (max_entries != 0 && n.live + n.deleted >= max_entries)
        });
        if full {
            let master_fields: Box<[Elem]> = fields.iter().step_by(2).cloned().collect();
            self.mem += NODE_OVERHEAD;
            let node = Node {
                master: id,
                bytes: listpack::master_bytes(&master_fields),
                master_fields,
                items: Vec::new(),
                live: 0,
                deleted: 0,
            };
            self.nodes.insert(id, node);
        }
        let node = self.nodes.values_mut().next_back().expect("a node");
        node.bytes += listpack::entry_bytes(node.master, &node.master_fields, id, &fields);
        node.items.push(Item {
            id,
            fields,
            deleted: false,
        });
        node.live += 1;
        self.len += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.len == 1 {
            self.first_id = id;
        }
    }

    /// The entries from `start` to `end` inclusive, forwards or backwards.
    pub(crate) fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (StreamId, &[Elem])> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        let from = self
            .nodes
            .range(..=start)
            .next_back()
            .map_or(start, |(k, _)| *k);
        let nodes = self.nodes.range(from..=end).map(|(_, n)| n);
        let keep = move |i: &&Item| !i.deleted && i.id >= start && i.id <= end;
        if rev {
            Box::new(
                nodes
                    .rev()
                    .flat_map(|n| n.items.iter().rev())
                    .filter(keep)
                    .map(pair),
            )
        } else {
            Box::new(nodes.flat_map(|n| n.items.iter()).filter(keep).map(pair))
        }
    }

    /// The fields of the live entry `id`.
    pub(crate) fn get(&self, id: StreamId) -> Option<&[Elem]> {
        self.range(id, id, false).next().map(|(_, f)| f)
    }

    /// The first (or last) live entry.
    pub(crate) fn edge(&self, last: bool) -> Option<(StreamId, &[Elem])> {
        self.range(StreamId::MIN, StreamId::MAX, last).next()
    }

    /// Deletes the live entry `id` (XDEL's part; the caller updates
    /// `max_deleted` and `first_id`).
    pub(crate) fn delete(&mut self, id: StreamId) -> bool {
        let Some((&key, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let Ok(at) = node.items.binary_search_by(|i| i.id.cmp(&id)) else {
            return false;
        };
        if node.items[at].deleted {
            return false;
        }
        self.len -= 1;
        if node.live == 1 {
            self.drop_node(key);
        } else {
            node.items[at].deleted = true;
            node.live -= 1;
            node.deleted += 1;
        }
        true
    }

    fn drop_node(&mut self, key: StreamId) -> usize {
        let Some(node) = self.nodes.remove(&key) else {
            return 0;
        };
        let bytes: usize = node
            .items
            .iter()
            .map(|i| {
                ITEM_OVERHEAD
                    + i.fields.iter().map(|f| f.len()).sum::<usize>()
                    + i.fields.len() * ELEM_OVERHEAD
            })
            .sum();
        self.mem -= bytes + NODE_OVERHEAD;
        node.live
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
            let entries = node.live as u64;
            if limit != 0 && removed + entries > limit {
                break;
            }
            let whole = match how {
                Trim::None => return 0,
                Trim::MaxLen(max) => self.len as u64 - entries >= max,
                Trim::MinId(min) => node.items.last().is_some_and(|i| i.id < min),
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
            let mut from_node = 0;
            for item in node.items.iter_mut() {
                let stop = match how {
                    Trim::MaxLen(max) => self.len as u64 <= max,
                    Trim::MinId(min) => item.id >= min,
                    Trim::None => true,
                };
                if stop {
                    break;
                }
                if !item.deleted {
                    item.deleted = true;
                    from_node += 1;
                    self.len -= 1;
                }
            }
            node.live -= from_node;
            node.deleted += from_node;
            removed += from_node as u64;
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
