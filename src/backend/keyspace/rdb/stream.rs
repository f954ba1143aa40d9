//! A stream in a Redis DUMP payload (`RDB_TYPE_STREAM_LISTPACKS`, `_2` from
//! Redis 7.0, `_3` from 7.2), as `rdbLoadObject` reads it:
//!
//! ```text
//! node count, per node: master ID (16 bytes BE) | listpack of entries
//! length | last ID (ms, seq)
//! _2/_3 only: first ID | max deleted ID | entries added
//! group count, per group: name | last ID | _2/_3: entries read
//!   PEL count, per entry: ID (16 bytes BE) | delivery time (ms LE) | delivery count
//!   consumer count, per consumer: name | seen time (ms LE) | _3: active time
//!     PEL count, per entry: ID (must be in the group's PEL)
//! ```
//! A listpack holds the master entry (count, deleted, field count, fields,
//! 0), then per entry: flags, ms and seq offsets from the master ID, the
//! values (same fields as the master) or field count and pairs, and the
//! entry's own listpack length. Before `_2` the first ID is the first
//! entry's, nothing was deleted, entries added is the length and a group's
//! entries read is estimated, as Redis does.

use super::packed::{self, Item};
use super::read::Rdb;
use crate::backend::value::stream::{Group, Pending, Stream, StreamId};
use crate::backend::value::Thresholds;
use std::borrow::Cow;
use std::collections::BTreeMap;

const DELETED: i64 = 1;
const SAME_FIELDS: i64 = 2;

fn id(r: &mut Rdb) -> Option<StreamId> {
    Some(StreamId::new(r.len()?, r.len()?))
}

fn raw_id(r: &mut Rdb) -> Option<StreamId> {
    let (ms, seq) = r.raw_id()?;
    Some(StreamId::new(ms, seq))
}

pub(super) fn load(r: &mut Rdb, ty: u8, t: &Thresholds) -> Option<Stream> {
    let mut s = Stream::default();
    let mut newest: Option<StreamId> = None;
    for _ in 0..r.count(2)? {
        let key = r.string()?;
        let master = raw_id(&mut Rdb(key.get(..16).filter(|_| key.len() == 16)?))?;
        let blob = r.string()?;
        node(&mut s, &mut newest, master, &packed::listpack(&blob)?, t)?;
    }
    let length = r.len()?;
    let last_id = id(r)?;
    if length != s.len() as u64 || newest.is_some_and(|n| n > last_id) {
        return None;
    }
    s.last_id = last_id;
    if ty >= 19 {
        s.first_id = id(r)?;
        s.max_deleted = id(r)?;
        s.entries_added = r.len()?;
        if length > s.entries_added {
            return None;
        }
    } else {
        s.reset_first_id();
        s.max_deleted = StreamId::MIN;
        s.entries_added = length;
    }
    for _ in 0..r.count(4)? {
        let name = r.string()?;
        let last = id(r)?;
        let read = if ty >= 19 {
            Some(r.len()?).filter(|&n| n != u64::MAX)
        } else {
            s.estimate_read(last)
        };
        let mut g = Group::new(last, read);
        let mut pel = BTreeMap::new();
        for _ in 0..r.count(16 + 8 + 1)? {
            let id = raw_id(r)?;
            let (time, count) = (r.ms_time()?, r.len()?);
            if pel.insert(id, (time, count, false)).is_some() {
                return None;
            }
        }
        for _ in 0..r.count(1 + 8 + 1)? {
            let cname = r.string()?;
            let seen = r.ms_time()?;
            if ty == 21 {
                r.ms_time()?;
            }
            if !g.consumer(&cname, seen).1 {
                return None;
            }
            for _ in 0..r.count(16)? {
                let id = raw_id(r)?;
                let (time, count, owned) = pel.get_mut(&id)?;
                if *owned {
                    return None;
                }
                *owned = true;
                g.consumers.get_mut(&cname[..])?.pel.insert(id);
                let pe = Pending {
                    consumer: cname[..].into(),
                    delivery_time: *time,
                    delivery_count: *count,
                };
                g.pel.insert(id, pe);
            }
        }
        // A pending entry no consumer owns is refused, as Redis's deep
        // sanitization refuses it.
        if pel.values().any(|p| !p.2) || s.groups.insert(name[..].into(), g).is_some() {
            return None;
        }
    }
    Some(s)
}

fn int<'a>(it: &mut impl Iterator<Item = Item<'a>>) -> Option<i64> {
    it.next()?.int()
}

/// Appends the entries of one listpack node; deleted ones stay tombstones.
fn node(
    s: &mut Stream,
    newest: &mut Option<StreamId>,
    master: StreamId,
    lp: &[Item],
    t: &Thresholds,
) -> Option<()> {
    let mut it = lp.iter().copied();
    let (count, deleted) = (int(&mut it)?, int(&mut it)?);
    let nmaster = usize::try_from(int(&mut it)?).ok()?;
    if nmaster == 0 || nmaster > lp.len() {
        return None;
    }
    let master_fields: Vec<Item> = (0..nmaster).map(|_| it.next()).collect::<Option<_>>()?;
    if int(&mut it)? != 0 {
        return None;
    }
    let (mut live, mut dead) = (0, 0);
    let mut fields: Vec<Cow<[u8]>> = Vec::new();
    while let Some(flags) = it.next() {
        let flags = flags.int()?;
        let ms = master.ms.checked_add(int(&mut it)? as u64)?;
        let seq = master.seq.checked_add(int(&mut it)? as u64)?;
        let id = StreamId::new(ms, seq);
        if newest.is_some_and(|n| id <= n) || id < master {
            return None;
        }
        *newest = Some(id);
        fields.clear();
        let want_count = if flags & SAME_FIELDS != 0 {
            for f in &master_fields {
                fields.push(f.bytes());
                fields.push(it.next()?.bytes());
            }
            nmaster + 3
        } else {
            let n = usize::try_from(int(&mut it)?).ok()?;
            if n == 0 || n > lp.len() {
                return None;
            }
            for _ in 0..2 * n {
                fields.push(it.next()?.bytes());
            }
            2 * n + 4
        };
        if int(&mut it)? != want_count as i64 {
            return None;
        }
        let refs: Vec<&[u8]> = fields.iter().map(|f| f.as_ref()).collect();
        s.append(id, &refs, t);
        if flags & DELETED != 0 {
            s.delete(id);
            dead += 1;
        } else {
            live += 1;
        }
    }
    (live == count && dead == deleted && live + dead > 0).then_some(())
}
