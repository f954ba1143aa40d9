//! Redis's compact encodings inside a DUMP payload: ziplist (`ziplist.c`),
//! listpack (`listpack.c`), intset (`intset.c`) and zipmap (`zipmap.c`).
//! Each blob is checked whole: header sizes against the blob, every entry
//! inside it, the terminator at its very end. None is a malformed blob.

use std::borrow::Cow;

/// One entry of a ziplist or listpack.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Item<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl<'a> Item<'a> {
    /// The entry as Redis replies with it.
    pub(super) fn bytes(self) -> Cow<'a, [u8]> {
        match self {
            Item::Str(s) => Cow::Borrowed(s),
            Item::Int(i) => Cow::Owned(i.to_string().into_bytes()),
        }
    }

    /// The entry as an integer (a stream's counters and IDs).
    pub(super) fn int(self) -> Option<i64> {
        match self {
            Item::Int(i) => Some(i),
            Item::Str(s) => std::str::from_utf8(s).ok()?.parse().ok(),
        }
    }

    /// The entry as a score.
    pub(super) fn score(self) -> Option<f64> {
        let f = match self {
            Item::Int(i) => i as f64,
            Item::Str(s) => std::str::from_utf8(s).ok()?.parse().ok()?,
        };
        (!f.is_nan()).then_some(f)
    }
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |a, &x| (a << 8) | x as u64)
}

/// Sign-extends the low `bits` of `v`.
fn signed(v: u64, bits: u32) -> i64 {
    ((v << (64 - bits)) as i64) >> (64 - bits)
}

fn get(b: &[u8], at: usize, n: usize) -> Option<&[u8]> {
    b.get(at..at.checked_add(n)?)
}

/// The entries of a listpack.
pub(super) fn listpack(b: &[u8]) -> Option<Vec<Item<'_>>> {
    if b.len() < 7 || le(&b[..4]) != b.len() as u64 || b[b.len() - 1] != 0xff {
        return None;
    }
    let declared = le(&b[4..6]) as usize;
    let end = b.len() - 1;
    let mut items = Vec::new();
    let mut at = 6;
    while at < end {
        let e = b[at];
        let (item, size) = match e {
            0x00..=0x7f => (Item::Int(e as i64), 1),
            0x80..=0xbf => {
                let n = (e & 0x3f) as usize;
                (Item::Str(get(b, at + 1, n)?), 1 + n)
            }
            0xc0..=0xdf => {
                let v = (((e & 0x1f) as u64) << 8) | *b.get(at + 1)? as u64;
                (Item::Int(signed(v, 13)), 2)
            }
            0xe0..=0xef => {
                let n = (((e & 0x0f) as usize) << 8) | *b.get(at + 1)? as usize;
                (Item::Str(get(b, at + 2, n)?), 2 + n)
            }
            0xf0 => {
                let n = le(get(b, at + 1, 4)?) as usize;
                (Item::Str(get(b, at + 5, n)?), 5 + n)
            }
            0xf1..=0xf4 => {
                let w = [2, 3, 4, 8][(e - 0xf1) as usize];
                let v = le(get(b, at + 1, w)?);
                (Item::Int(signed(v, 8 * w as u32)), 1 + w)
            }
            _ => return None,
        };
        let back = match size {
            0..=127 => 1,
            128..=16383 => 2,
            16384..=2097151 => 3,
            2097152..=268435455 => 4,
            _ => 5,
        };
        let stored = get(b, at + size, back)?;
        // The back length is 7 bits a byte, most significant byte first.
        let len = stored
            .iter()
            .fold(0u64, |a, &x| (a << 7) | (x & 0x7f) as u64);
        if len != size as u64 {
            return None;
        }
        items.push(item);
        at += size + back;
    }
    (at == end && (declared == 65535 || declared == items.len())).then_some(items)
}

/// The entries of a ziplist.
pub(super) fn ziplist(b: &[u8]) -> Option<Vec<Item<'_>>> {
    if b.len() < 11 || le(&b[..4]) != b.len() as u64 || b[b.len() - 1] != 0xff {
        return None;
    }
    let (tail, declared) = (le(&b[4..8]) as usize, le(&b[8..10]) as usize);
    let end = b.len() - 1;
    let mut items = Vec::new();
    let (mut at, mut prev, mut last) = (10, 0usize, 10);
    while at < end {
        let start = at;
        let prevlen = if b[at] < 254 {
            at += 1;
            b[start] as usize
        } else if b[at] == 254 {
            at += 5;
            le(get(b, start + 1, 4)?) as usize
        } else {
            return None;
        };
        if prevlen != prev {
            return None;
        }
        let e = *b.get(at)?;
        let (item, size) = match e >> 6 {
            0 => {
                let n = (e & 0x3f) as usize;
                (Item::Str(get(b, at + 1, n)?), 1 + n)
            }
            1 => {
                let n = (((e & 0x3f) as usize) << 8) | *b.get(at + 1)? as usize;
                (Item::Str(get(b, at + 2, n)?), 2 + n)
            }
            2 if e == 0x80 => {
                let n = u32::from_be_bytes(get(b, at + 1, 4)?.try_into().ok()?) as usize;
                (Item::Str(get(b, at + 5, n)?), 5 + n)
            }
            2 => return None,
            _ => {
                let w = match e {
                    0xc0 => 2,
                    0xd0 => 4,
                    0xe0 => 8,
                    0xf0 => 3,
                    0xfe => 1,
                    0xf1..=0xfd => {
                        items.push(Item::Int((e & 0x0f) as i64 - 1));
                        (prev, last, at) = (at + 1 - start, start, at + 1);
                        continue;
                    }
                    _ => return None,
                };
                let v = le(get(b, at + 1, w)?);
                (Item::Int(signed(v, 8 * w as u32)), 1 + w)
            }
        };
        items.push(item);
        (prev, last, at) = (at + size - start, start, at + size);
    }
    let tail_ok = tail == last || (items.is_empty() && tail == 10);
    let count_ok = declared == 65535 || declared == items.len();
    (at == end && tail_ok && count_ok).then_some(items)
}

/// The members of an intset, which must be strictly ascending.
pub(super) fn intset(b: &[u8]) -> Option<Vec<i64>> {
    if b.len() < 8 {
        return None;
    }
    let (w, n) = (le(&b[..4]) as usize, le(&b[4..8]) as usize);
    if !matches!(w, 2 | 4 | 8) || n.checked_mul(w)? != b.len() - 8 {
        return None;
    }
    let v: Vec<i64> = b[8..]
        .chunks(w)
        .map(|c| signed(le(c), 8 * w as u32))
        .collect();
    v.windows(2).all(|p| p[0] < p[1]).then_some(v)
}

/// The field-value pairs of a zipmap (Redis before 2.6).
pub(super) fn zipmap(b: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut at = 1;
    let mut pairs = Vec::new();
    let len = |at: &mut usize| -> Option<usize> {
        let x = *b.get(*at)?;
        *at += 1;
        match x {
            0..=253 => Some(x as usize),
            254 => {
                let n = le(get(b, *at, 4)?) as usize;
                *at += 4;
                Some(n)
            }
            _ => None,
        }
    };
    while *b.get(at)? != 0xff {
        let n = len(&mut at)?;
        let f = get(b, at, n)?;
        at += n;
        let n = len(&mut at)?;
        let free = *b.get(at)? as usize;
        let v = get(b, at + 1, n)?;
        at += 1 + n + free;
        pairs.push((f, v));
    }
    (at + 1 == b.len()).then_some(pairs)
}
