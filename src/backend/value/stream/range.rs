//! Reading a stream's entries between two IDs: seek to the node holding
//! the first (or last) one by its master ID, walk its bytes without
//! decoding, and decode only the live entries in range, one per `next`,
//! so `COUNT n` decodes n entries. Used by [`super::Stream::range`].

use super::node::{Cursor, Node, Raw};
use super::StreamId;
use crate::backend::value::Elem;
use std::collections::btree_map;
use std::collections::BTreeMap;

/// The live entries from `start` to `end`: ID and flattened pairs.
pub(crate) struct Range<'a> {
    nodes: btree_map::Range<'a, StreamId, Node>,
    start: StreamId,
    end: StreamId,
    rev: bool,
    /// The node being read, with a cursor over it (forwards) or its
    /// entries still to give, last one at the back (backwards).
    node: Option<(&'a Node, Cursor<'a>)>,
    back: Vec<Raw>,
    done: bool,
}

impl<'a> Range<'a> {
    pub(super) fn new(
        nodes: &'a BTreeMap<StreamId, Node>,
        start: StreamId,
        end: StreamId,
        rev: bool,
    ) -> Range<'a> {
        // The node holding `start` is the last one whose master ID is not
        // after it.
        let from = nodes.range(..=start).next_back().map_or(start, |(k, _)| *k);
        Range {
            nodes: nodes.range(from..=end.max(from)),
            start,
            end,
            rev,
            node: None,
            back: Vec::new(),
            done: start > end,
        }
    }

    /// The next entry of the current node, in reading order.
    fn step(&mut self) -> Option<Raw> {
        if self.rev {
            self.back.pop()
        } else {
            self.node.as_mut()?.1.next()
        }
    }

    /// Moves to the next node with entries in range; false when none is left.
    fn open(&mut self) -> bool {
        loop {
            let next = if self.rev {
                self.nodes.next_back()
            } else {
                self.nodes.next()
            };
            let Some((&key, node)) = next else {
                return false;
            };
            if node.last < self.start {
                if self.rev {
                    // Every node before this one ends earlier still.
                    return false;
                }
                continue;
            }
            let cursor = node.cursor(key);
            if self.rev {
                self.back.clear();
                self.back.extend(cursor);
            }
            self.node = Some((node, node.cursor(key)));
            return true;
        }
    }
}

impl Iterator for Range<'_> {
    type Item = (StreamId, Vec<Elem>);

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some(raw) = self.step() else {
                if !self.open() {
                    self.done = true;
                }
                continue;
            };
            let past = if self.rev {
                raw.id < self.start
            } else {
                raw.id > self.end
            };
            if past {
                self.done = true;
                break;
            }
            let before = if self.rev {
                raw.id > self.end
            } else {
                raw.id < self.start
            };
            if raw.deleted || before {
                continue;
            }
            let node = self.node.as_ref().expect("open").0;
            return Some((raw.id, node.fields(&raw)));
        }
        None
    }
}
