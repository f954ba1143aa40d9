//! A stream's body in the DUMP payload (type 5, see `keyspace/dump.rs`):
//!
//! ```text
//! last id | first id | max deleted id | entries added (u64 LE)
//! entries: count (u64), per entry: id, field count (u32), len-prefixed elements
//! groups:  count (u64), per group: name, last id, entries read (u64, MAX = unknown),
//!          PEL count (u64), per entry: id, consumer, delivery time, delivery count,
//!          consumers count (u64), per consumer: name, seen time
//! ```
//! An ID is ms then seq, u64 LE each; an element is len (u32 LE) + bytes.
//! Decoding refuses anything inconsistent: IDs out of order, an entry
//! after the last ID, a pending entry of an unknown consumer.

use super::{Group, Pending, Stream, StreamId};
use crate::backend::value::reader::Reader;
use crate::backend::value::Thresholds;

fn put_u64(p: &mut Vec<u8>, v: u64) {
    p.extend_from_slice(&v.to_le_bytes());
}

fn put_id(p: &mut Vec<u8>, id: StreamId) {
    put_u64(p, id.ms);
    put_u64(p, id.seq);
}

fn put_elem(p: &mut Vec<u8>, e: &[u8]) {
    p.extend_from_slice(&(e.len() as u32).to_le_bytes());
    p.extend_from_slice(e);
}

impl Stream {
    /// Appends the stream's body to a payload.
    pub(crate) fn encode(&self, p: &mut Vec<u8>) {
        put_id(p, self.last_id);
        put_id(p, self.first_id);
        put_id(p, self.max_deleted);
        put_u64(p, self.entries_added);
        put_u64(p, self.len() as u64);
        for (id, fields) in self.range(StreamId::MIN, StreamId::MAX, false) {
            put_id(p, id);
            p.extend_from_slice(&(fields.len() as u32).to_le_bytes());
            fields.iter().for_each(|f| put_elem(p, f));
        }
        put_u64(p, self.groups.len() as u64);
        for (name, g) in &self.groups {
            put_elem(p, name);
            put_id(p, g.last_id);
            put_u64(p, g.entries_read.unwrap_or(u64::MAX));
            put_u64(p, g.pel.len() as u64);
            for (id, pe) in &g.pel {
                put_id(p, *id);
                put_elem(p, &pe.consumer);
                put_u64(p, pe.delivery_time);
                put_u64(p, pe.delivery_count);
            }
            put_u64(p, g.consumers.len() as u64);
            for (name, c) in &g.consumers {
                put_elem(p, name);
                put_u64(p, c.seen_time);
            }
        }
    }

    /// The stream in a payload body, if it is consistent.
    pub(crate) fn decode(body: &[u8]) -> Option<Stream> {
        let mut r = Reader(body);
        let (last_id, first_id, max_deleted) = (id(&mut r)?, id(&mut r)?, id(&mut r)?);
        let entries_added = r.u64()?;
        let mut s = Stream::default();
        let mut fields: Vec<&[u8]> = Vec::new();
        for _ in 0..r.count(20)? {
            let id = id(&mut r)?;
            let n = r.u32()?;
            if n == 0 || n % 2 == 1 || n > r.0.len() / 4 || id <= s.last_id || id > last_id {
                return None;
            }
            fields.clear();
            for _ in 0..n {
                fields.push(r.elem()?);
            }
            s.append(id, &fields, &Thresholds::default());
        }
        if (s.len() as u64) > entries_added {
            return None;
        }
        (s.last_id, s.first_id, s.max_deleted) = (last_id, first_id, max_deleted);
        s.entries_added = entries_added;
        for _ in 0..r.count(4 + 40)? {
            let name = r.elem()?;
            let last = id(&mut r)?;
            let read = r.u64()?;
            let mut g = Group::new(last, (read != u64::MAX).then_some(read));
            let mut pel = Vec::new();
            for _ in 0..r.count(16 + 4 + 16)? {
                let id = id(&mut r)?;
                let consumer = r.elem()?;
                let (delivery_time, delivery_count) = (r.u64()?, r.u64()?);
                pel.push((id, consumer, delivery_time, delivery_count));
            }
            for _ in 0..r.count(4 + 8)? {
                let c = r.elem()?;
                let seen = r.u64()?;
                if g.consumer(c, seen).1 {
                    continue;
                }
                return None;
            }
            for (id, consumer, delivery_time, delivery_count) in pel {
                let c = g.consumers.get_mut(consumer)?;
                if !c.pel.insert(id) {
                    return None;
                }
                let pe = Pending {
                    consumer: consumer.into(),
                    delivery_time,
                    delivery_count,
                };
                g.pel.insert(id, pe);
            }
            if s.groups.insert(name.into(), g).is_some() {
                return None;
            }
        }
        r.0.is_empty().then_some(s)
    }
}

fn id(r: &mut Reader) -> Option<StreamId> {
    Some(StreamId::new(r.u64()?, r.u64()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_with_groups_round_trips_and_lies_are_refused() {
        let t = Thresholds::default();
        let mut s = Stream::default();
        for i in 1..=5 {
            s.append(StreamId::new(i, 0), &[b"f", b"v", b"g", b""], &t);
        }
        s.delete(StreamId::new(2, 0));
        s.max_deleted = StreamId::new(2, 0);
        let mut g = Group::new(StreamId::new(4, 0), Some(4));
        g.consumer(b"alice", 7);
        g.consumer(b"bob", 8);
        g.deliver(StreamId::new(3, 0), b"alice", 9, true);
        g.deliver(StreamId::new(4, 0), b"bob", 10, true);
        s.groups.insert(b"g".to_vec().into(), g);
        let mut p = Vec::new();
        s.encode(&mut p);
        let back = Stream::decode(&p).expect("decodes");
        let mut again = Vec::new();
        back.encode(&mut again);
        assert_eq!(again, p);
        assert_eq!(back.len(), 4);
        assert_eq!(back.groups[&b"g"[..]].consumers[&b"bob"[..]].pel.len(), 1);
        for cut in 0..p.len() {
            assert!(Stream::decode(&p[..cut]).is_none(), "cut at {cut}");
        }
    }
}
