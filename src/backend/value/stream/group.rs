//! A stream's consumer groups: the last delivered ID, the logical read
//! counter, the pending entries list (PEL) and the consumers, each with
//! its own PEL, as Redis keeps them (`streamCG`, `streamConsumer`).

use super::StreamId;
use crate::backend::value::Elem;
use std::collections::{BTreeMap, BTreeSet};

/// A delivered, unacknowledged entry.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    /// The consumer that owns it.
    pub(crate) consumer: Elem,
    /// When it was last delivered (ms).
    pub(crate) delivery_time: u64,
    /// How many times it was delivered.
    pub(crate) delivery_count: u64,
}

/// A consumer of a group.
#[derive(Debug, Clone, Default)]
pub(crate) struct Consumer {
    /// When it last read or claimed (ms).
    pub(crate) seen_time: u64,
    /// The IDs it owns in the group's PEL.
    pub(crate) pel: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Debug, Clone, Default)]
pub(crate) struct Group {
    /// The last ID delivered to the group.
    pub(crate) last_id: StreamId,
    /// Entries the group read (None: unknown, Redis's -1).
    pub(crate) entries_read: Option<u64>,
    /// Delivered, unacknowledged entries.
    pub(crate) pel: BTreeMap<StreamId, Pending>,
    /// Consumers by name.
    pub(crate) consumers: BTreeMap<Elem, Consumer>,
}

/// Bytes counted per group, per PEL entry and per consumer.
const GROUP_OVERHEAD: usize = 128;
const PENDING_OVERHEAD: usize = 96;
const CONSUMER_OVERHEAD: usize = 96;

impl Group {
    /// A group at `last_id`.
    pub(crate) fn new(last_id: StreamId, entries_read: Option<u64>) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// Estimated bytes (the consumers' names and PEL entries).
    pub(crate) fn mem(&self) -> usize {
        GROUP_OVERHEAD
            + self.pel.len() * PENDING_OVERHEAD
            + self
                .consumers
                .keys()
                .map(|c| CONSUMER_OVERHEAD + c.len())
                .sum::<usize>()
    }

    /// The consumer `name`, created (seen now) if new; true if created.
    pub(crate) fn consumer(&mut self, name: &[u8], now: u64) -> (&mut Consumer, bool) {
        let created = !self.consumers.contains_key(name);
        if created {
            self.consumers.insert(
                name.into(),
                Consumer {
                    seen_time: now,
                    pel: BTreeSet::new(),
                },
            );
        }
        (self.consumers.get_mut(name).expect("present"), created)
    }

    /// Deletes consumer `name`, dropping its pending entries from the
    /// group; the number it had, None if there was no such consumer.
    pub(crate) fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Acknowledges `id`: true if it was pending.
    pub(crate) fn ack(&mut self, id: StreamId) -> bool {
        let Some(p) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(c) = self.consumers.get_mut(&p.consumer) {
            c.pel.remove(&id);
        }
        true
    }

    /// Records `id` as delivered to `consumer` now: a new PEL entry, or an
    /// existing one moved to it with its count bumped (`bump`) or kept.
    pub(crate) fn deliver(&mut self, id: StreamId, consumer: &[u8], now: u64, bump: bool) {
        match self.pel.get_mut(&id) {
            Some(p) => {
                if *p.consumer != *consumer {
                    if let Some(old) = self.consumers.get_mut(&p.consumer) {
                        old.pel.remove(&id);
                    }
                    p.consumer = consumer.into();
                }
                p.delivery_time = now;
                if bump {
                    p.delivery_count += 1;
                }
            }
            None => {
                self.pel.insert(
                    id,
                    Pending {
                        consumer: consumer.into(),
                        delivery_time: now,
                        delivery_count: 1,
                    },
                );
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }
}
