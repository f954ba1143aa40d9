//! The DUMP payload: a versioned, checksummed serialization of one value of
//! any type, understood by built-in nodes only.
//!
//! Used by DUMP, RESTORE and MIGRATE (`commands/migrate.rs`). Parsing
//! treats the payload as hostile: every length is checked against the bytes
//! that remain before anything is allocated, and any inconsistency makes
//! the whole payload invalid.
//!
//! ```text
//! "SHD2" | type (0 string, 1 hash, 2 list, 3 set, 4 zset, 5 stream) | body | CRC-64 LE
//! string body:  the bytes
//! other bodies: count (u64 LE), then per element: len (u32 LE) + bytes,
//!               (hash: field then value; zset: member then score f64 LE)
//! stream body:  see `value/stream/codec.rs`
//! ```
//! Version 1 (`SHD1` + string bytes + CRC) is still read, so a node of the
//! previous release can migrate strings to this one.

use super::entry::Entry;
use crate::backend::value::reader::Reader;
use crate::backend::value::zset::ZSet;
use crate::backend::value::{Coll, Hash, List, Set, Thresholds};
use std::borrow::Cow;

const MAGIC_V1: &[u8; 4] = b"SHD1";
const MAGIC_V2: &[u8; 4] = b"SHD2";

/// CRC-64/Jones (the polynomial Redis uses for its own DUMP payloads).
pub(crate) fn crc64(data: &[u8]) -> u64 {
    const TABLE: [u64; 256] = {
        let mut t = [0u64; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u64;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 == 1 {
                    (c >> 1) ^ 0x95ac_9329_ac4b_c9b5
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    data.iter().fold(0u64, |crc, &b| {
        TABLE[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// A decoded payload.
#[derive(Debug)]
pub(crate) enum Value<'a> {
    /// A string, borrowed from the payload where it can be.
    Str(Cow<'a, [u8]>),
    /// Any other type.
    Coll(Coll),
}

fn put_elem(p: &mut Vec<u8>, e: &[u8]) {
    p.extend_from_slice(&(e.len() as u32).to_le_bytes());
    p.extend_from_slice(e);
}

/// The payload of an entry's value.
pub(crate) fn encode(e: &Entry) -> Vec<u8> {
    let mut p = Vec::with_capacity(e.value().len() + 32);
    p.extend_from_slice(MAGIC_V2);
    match e.coll() {
        None => {
            p.push(0);
            p.extend_from_slice(e.value());
        }
        Some(Coll::Stream(x)) => {
            p.push(5);
            x.encode(&mut p);
        }
        Some(c) => {
            p.push(match c {
                Coll::Hash(_) => 1,
                Coll::List(_) => 2,
                Coll::Set(_) => 3,
                Coll::ZSet(_) => 4,
                Coll::Stream(_) => 5,
            });
            p.extend_from_slice(&(c.len() as u64).to_le_bytes());
            match c {
                Coll::Hash(h) => h.iter().for_each(|(f, v)| {
                    put_elem(&mut p, f);
                    put_elem(&mut p, v);
                }),
                Coll::List(l) => l.items.iter().for_each(|i| put_elem(&mut p, i)),
                Coll::Set(s) => s.members().iter().for_each(|m| put_elem(&mut p, m)),
                Coll::ZSet(z) => z.iter().for_each(|(m, s)| {
                    put_elem(&mut p, m);
                    p.extend_from_slice(&s.to_le_bytes());
                }),
                Coll::Stream(_) => {}
            }
        }
    }
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// The version-1 payload of a string (what older nodes produced).
#[cfg(test)]
pub(crate) fn encode_v1(value: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(value.len() + 12);
    p.extend_from_slice(MAGIC_V1);
    p.extend_from_slice(value);
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

/// The value in a payload, if its magic, checksum and body are right.
pub(crate) fn decode<'a>(p: &'a [u8], t: &Thresholds) -> Option<Value<'a>> {
    if p.len() < 12 {
        return None;
    }
    let (body, crc) = p.split_at(p.len() - 8);
    if crc64(body).to_le_bytes() != crc {
        return None;
    }
    let (magic, body) = body.split_at(4);
    if magic == MAGIC_V1 {
        return Some(Value::Str(Cow::Borrowed(body)));
    }
    if magic != MAGIC_V2 {
        return None;
    }
    let (&ty, body) = body.split_first()?;
    if ty == 0 {
        return Some(Value::Str(Cow::Borrowed(body)));
    }
    if ty == 5 {
        let s = crate::backend::value::stream::Stream::decode(body)?;
        return Some(Value::Coll(Coll::Stream(Box::new(s))));
    }
    let mut r = Reader(body);
    let n = r.u64()?;
    // Every element takes at least 4 bytes, so a lying count fails here
    // instead of looping.
    if n > (r.0.len() / 4) as u64 {
        return None;
    }
    let coll = match ty {
        1 => {
            let mut h = Hash::default();
            for _ in 0..n {
                let (f, v) = (r.elem()?, r.elem()?);
                if !h.insert(f, v, t) {
                    return None;
                }
            }
            Coll::Hash(h)
        }
        2 => {
            let mut l = List::default();
            for _ in 0..n {
                l.push(r.elem()?, false);
            }
            l.settle(t);
            Coll::List(l)
        }
        3 => {
            let mut s = Set::default();
            for _ in 0..n {
                if !s.insert(r.elem()?, t) {
                    return None;
                }
            }
            Coll::Set(s)
        }
        4 => {
            let mut z = ZSet::default();
            for _ in 0..n {
                let m = r.elem()?;
                let score = f64::from_le_bytes(r.take(8)?.try_into().ok()?);
                if score.is_nan() || z.insert(m, score, t).is_some() {
                    return None;
                }
            }
            Coll::ZSet(z)
        }
        _ => return None,
    };
    (r.0.is_empty() && !coll.is_empty()).then_some(Value::Coll(coll))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<Entry> {
        let t = Thresholds::default();
        let (mut h, mut l, mut s, mut z) = (
            Hash::default(),
            List::default(),
            Set::default(),
            ZSet::default(),
        );
        h.insert(b"f", b"v", &t);
        l.push(b"a", false);
        l.push(b"", false);
        s.insert(b"7", &t);
        s.insert(b"x", &t);
        z.insert(b"m", -1.5, &t);
        z.insert(b"n", f64::INFINITY, &t);
        vec![
            Entry::new(b"k", b"v\r\n", 0, 0),
            Entry::with_coll(b"k", Coll::Hash(h), 0, 0),
            Entry::with_coll(b"k", Coll::List(l), 0, 0),
            Entry::with_coll(b"k", Coll::Set(s), 0, 0),
            Entry::with_coll(b"k", Coll::ZSet(z), 0, 0),
        ]
    }

    #[test]
    fn every_type_round_trips_and_any_flipped_bit_is_rejected() {
        let t = Thresholds::default();
        for e in entries() {
            let p = encode(&e);
            let back = match decode(&p, &t).expect("decodes") {
                Value::Str(v) => Entry::new(b"k", &v, 0, 0),
                Value::Coll(c) => Entry::with_coll(b"k", c, 0, 0),
            };
            assert_eq!(encode(&back), p);
            for i in 0..p.len() {
                let mut bad = p.clone();
                bad[i] ^= 1;
                assert!(decode(&bad, &t).is_none(), "flipped byte {i}");
            }
        }
        assert!(decode(b"xx", &t).is_none());
    }

    #[test]
    fn version_one_strings_are_still_read() {
        let p = encode_v1(b"old");
        assert!(matches!(
            decode(&p, &Thresholds::default()),
            Some(Value::Str(Cow::Borrowed(b"old")))
        ));
    }

    #[test]
    fn a_checksummed_body_with_a_lying_count_is_rejected() {
        let mut p = MAGIC_V2.to_vec();
        p.push(2);
        p.extend_from_slice(&u64::MAX.to_le_bytes());
        let crc = crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert!(decode(&p, &Thresholds::default()).is_none());
    }
}
