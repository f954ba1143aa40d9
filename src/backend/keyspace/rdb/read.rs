//! The RDB primitives of a Redis DUMP payload: lengths, strings (plain,
//! int-encoded, LZF-compressed), doubles and millisecond times. Every read
//! is checked against the bytes that remain; None is a malformed payload.

use std::borrow::Cow;

/// A cursor over an RDB-encoded object.
pub(super) struct Rdb<'a>(pub(super) &'a [u8]);

impl<'a> Rdb<'a> {
    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    pub(super) fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn be64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A length, or (true) the code of a special string encoding.
    fn len_or_enc(&mut self) -> Option<(u64, bool)> {
        let b = self.byte()?;
        Some(match b >> 6 {
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.byte()? as u64, false),
            2 => match b {
                0x80 => (
                    u32::from_be_bytes(self.take(4)?.try_into().ok()?) as u64,
                    false,
                ),
                0x81 => (self.be64()?, false),
                _ => return None,
            },
            _ => ((b & 0x3f) as u64, true),
        })
    }

    /// A length.
    pub(super) fn len(&mut self) -> Option<u64> {
        match self.len_or_enc()? {
            (n, false) => Some(n),
            _ => None,
        }
    }

    /// A count of items that take at least `min` bytes each, so that a
    /// lying count fails before anything is allocated or looped over.
    pub(super) fn count(&mut self, min: usize) -> Option<usize> {
        let n = self.len()?;
        (n <= (self.0.len() / min) as u64).then_some(n as usize)
    }

    /// A string object.
    pub(super) fn string(&mut self) -> Option<Cow<'a, [u8]>> {
        let (n, enc) = self.len_or_enc()?;
        if !enc {
            return self.take(usize::try_from(n).ok()?).map(Cow::Borrowed);
        }
        let int = match n {
            0 => self.byte()? as i8 as i64,
            1 => i16::from_le_bytes(self.take(2)?.try_into().ok()?) as i64,
            2 => i32::from_le_bytes(self.take(4)?.try_into().ok()?) as i64,
            3 => {
                let (clen, len) = (self.len()?, self.len()?);
                let c = self.take(usize::try_from(clen).ok()?)?;
                return lzf(c, usize::try_from(len).ok()?).map(Cow::Owned);
            }
            _ => return None,
        };
        Some(Cow::Owned(int.to_string().into_bytes()))
    }

    /// A double written as text after a length byte (`RDB_TYPE_ZSET`).
    pub(super) fn text_double(&mut self) -> Option<f64> {
        let n = self.byte()?;
        match n {
            253 => Some(f64::NAN),
            254 => Some(f64::INFINITY),
            255 => Some(f64::NEG_INFINITY),
            n => std::str::from_utf8(self.take(n as usize)?)
                .ok()?
                .parse()
                .ok(),
        }
    }

    /// A binary double, little-endian (`RDB_TYPE_ZSET_2`).
    pub(super) fn binary_double(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A millisecond time, little-endian.
    pub(super) fn ms_time(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A raw stream ID: ms and seq, big-endian.
    pub(super) fn raw_id(&mut self) -> Option<(u64, u64)> {
        Some((self.be64()?, self.be64()?))
    }
}

/// LZF decompression (`lzf_d.c`) of `c` into exactly `len` bytes. A back
/// reference expands 3 bytes into at most 264, which bounds `len`.
pub(super) fn lzf(c: &[u8], len: usize) -> Option<Vec<u8>> {
    if len == 0 || len / 88 > c.len() {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    while i < c.len() {
        let ctrl = c[i] as usize;
        i += 1;
        if ctrl < 32 {
            let run = c.get(i..i + ctrl + 1)?;
            if out.len() + run.len() > len {
                return None;
            }
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *c.get(i)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *c.get(i)? as usize + 1;
            i += 1;
            if back > out.len() || out.len() + n + 2 > len {
                return None;
            }
            for _ in 0..n + 2 {
                out.push(out[out.len() - back]);
            }
        }
    }
    (out.len() == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_strings_and_lzf_are_read() {
        let mut r = Rdb(&[
            0x05, 0x41, 0x02, 0x80, 0, 0, 1, 0, 0xc0, 0xfe, 0xc1, 0x39, 0x30,
        ]);
        assert_eq!(r.len(), Some(5));
        assert_eq!(r.len(), Some(0x102));
        assert_eq!(r.len(), Some(0x100));
        assert_eq!(r.string().unwrap().as_ref(), b"-2");
        assert_eq!(r.string().unwrap().as_ref(), b"12345");
        assert!(r.0.is_empty());
        // "aaaaaaaaaa": literal "a", then a back reference of length 9.
        assert_eq!(
            lzf(&[0, b'a', 0xe0, 0, 0], 10).as_deref(),
            Some(&b"aaaaaaaaaa"[..])
        );
        assert_eq!(lzf(&[0, b'a', 0xe0, 0, 1], 10), None);
        assert_eq!(lzf(&[1, b'a'], 1), None);
    }
}
