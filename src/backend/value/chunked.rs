//! A sorted sequence kept in bounded chunks: insert, remove, rank and
//! index lookups in O(log n + n / CHUNK + CHUNK) instead of the O(n)
//! memmove of one big `Vec`, so a sorted set of millions of members stays
//! fast, while iteration remains a walk over contiguous memory.
//!
//! Used by `zset.rs` for its order. Knows nothing about scores or members:
//! callers keep the sequence sorted by inserting where `partition_point`
//! says.

/// A chunk splits in two past this many items.
const CHUNK: usize = 512;

/// The sequence.
#[derive(Debug, Clone)]
pub(crate) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    /// Number of items.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The chunk holding global index `i` (or the end), and the offset in it.
    fn locate(&self, mut i: usize) -> (usize, usize) {
        for (k, c) in self.chunks.iter().enumerate() {
            if i < c.len() {
                return (k, i);
            }
            i -= c.len();
        }
        match self.chunks.len() {
            0 => (0, 0),
            n => (n - 1, self.chunks[n - 1].len() + i),
        }
    }

    /// The item at index `i` (which must be below `len`).
    pub(crate) fn get(&self, i: usize) -> &T {
        let (k, o) = self.locate(i);
        &self.chunks[k][o]
    }

    /// The number of leading items for which `pred` holds (the items must
    /// be partitioned by it, as a sorted sequence is by a bound).
    pub(crate) fn partition_point(&self, pred: impl Fn(&T) -> bool) -> usize {
        let k = self.chunks.partition_point(|c| c.last().is_some_and(&pred));
        let before: usize = self.chunks[..k].iter().map(Vec::len).sum();
        before + self.chunks.get(k).map_or(0, |c| c.partition_point(&pred))
    }

    /// Inserts `v` at index `i` (0..=len).
    pub(crate) fn insert(&mut self, i: usize, v: T) {
        if self.chunks.is_empty() {
            self.chunks.push(Vec::with_capacity(8));
        }
        let (k, o) = self.locate(i);
        let chunk = &mut self.chunks[k];
        chunk.insert(o.min(chunk.len()), v);
        if chunk.len() > CHUNK {
            let tail = chunk.split_off(CHUNK / 2);
            self.chunks.insert(k + 1, tail);
        }
        self.len += 1;
    }

    /// Removes and returns the item at index `i` (which must be below `len`).
    pub(crate) fn remove(&mut self, i: usize) -> T {
        let (k, o) = self.locate(i);
        let v = self.chunks[k].remove(o);
        if self.chunks[k].is_empty() {
            self.chunks.remove(k);
        }
        self.len -= 1;
        v
    }

    /// Removes indexes `start..end`, returning them in order: whole runs of
    /// each chunk at once.
    pub(crate) fn drain(&mut self, start: usize, end: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(end.saturating_sub(start).min(4096));
        let mut left = end.saturating_sub(start);
        let (mut k, mut o) = self.locate(start);
        while left > 0 && k < self.chunks.len() {
            let c = &mut self.chunks[k];
            let take = c.len().saturating_sub(o).min(left);
            out.extend(c.drain(o..o + take));
            (left, self.len) = (left - take, self.len - take);
            if c.is_empty() {
                self.chunks.remove(k);
            } else {
                k += 1;
            }
            o = 0;
        }
        out
    }

    /// Items `start..end` in order, without walking the ones before.
    pub(crate) fn range(
        &self,
        start: usize,
        end: usize,
    ) -> impl DoubleEndedIterator<Item = &T> + '_ {
        let (k, o) = self.locate(start);
        let first = self.chunks.get(k).map_or(&[][..], |c| &c[o.min(c.len())..]);
        let rest = self.chunks.get(k + 1..).unwrap_or(&[]);
        let n = end.saturating_sub(start);
        let mut items: Vec<&T> = Vec::with_capacity(n.min(4096));
        items.extend(
            first
                .iter()
                .chain(rest.iter().flat_map(|c| c.iter()))
                .take(n),
        );
        items.into_iter()
    }

    /// Every item in order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_sorted_vec_under_random_inserts_and_removes() {
        let (mut c, mut v) = (Chunked::default(), Vec::new());
        let mut x: u64 = 12345;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = x % 5000;
            if step % 3 == 2 && !v.is_empty() {
                let i = (x as usize) % v.len();
                assert_eq!(c.remove(i), v.remove(i));
            } else {
                let at = v.partition_point(|&y| y < n);
                assert_eq!(c.partition_point(|&y| y < n), at);
                v.insert(at, n);
                c.insert(at, n);
            }
        }
        assert_eq!(c.len(), v.len());
        assert!(c.iter().eq(v.iter()));
        assert!(c.iter().rev().eq(v.iter().rev()));
        for i in (0..v.len()).step_by(97) {
            assert_eq!(c.get(i), &v[i]);
        }
        let (a, b) = (v.len() / 3, v.len() / 2);
        assert!(c.range(a, b).eq(v[a..b].iter()));
        assert!(c.range(a, v.len() + 10).eq(v[a..].iter()));
        assert_eq!(c.drain(a, b), v.drain(a..b).collect::<Vec<_>>());
        assert!(c.iter().eq(v.iter()));
    }
}
