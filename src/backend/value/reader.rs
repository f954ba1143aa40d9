//! A cursor over a DUMP payload's body that refuses to read past its end:
//! the one reader of the node's payload format, for every value type
//! (`keyspace::dump`) and the stream's own body (`stream::codec`).

pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    pub(crate) fn u32(&mut self) -> Option<usize> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// A length-prefixed element.
    pub(crate) fn elem(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()?;
        self.take(n)
    }

    /// A count of items that take at least `min` bytes each.
    pub(crate) fn count(&mut self, min: usize) -> Option<u64> {
        let n = self.u64()?;
        (n <= (self.0.len() / min) as u64).then_some(n)
    }
}
