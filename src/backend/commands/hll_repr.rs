//! Redis's HyperLogLog representation, byte for byte (`hyperloglog.c`):
//! a 16-byte header (`HYLL`, encoding, 3 zero bytes, cached cardinality
//! little-endian with bit 63 = stale), then either 16384 six-bit registers
//! packed little-endian (dense, 12288 bytes) or run-length opcodes
//! (sparse: ZERO `00xxxxxx`, XZERO `01xxxxxx yyyyyyyy`, VAL `1vvvvvxx`).
//!
//! Elements are hashed with MurmurHash64A (seed 0xadc83b19): the low 14 bits
//! pick a register, the run of zeros above them (plus one) is its candidate
//! value. Cardinality uses Ertl's improved estimator, as Redis 7 does, so
//! the same inserts give the same PFCOUNT. Pure functions on byte vectors;
//! `hll.rs` holds the commands.

/// Header bytes.
pub(crate) const HDR: usize = 16;
/// Registers (2^14).
pub(crate) const REGISTERS: usize = 1 << 14;
const P: u32 = 14;
const Q: u32 = 64 - P;
const REG_MAX: u8 = 63;
/// Length of a dense value.
pub(crate) const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
/// `encoding` byte values.
pub(crate) const DENSE: u8 = 0;
pub(crate) const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;

/// Why a value cannot be used as a HyperLogLog.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HllError {
    /// Not `HYLL`, unknown encoding, or a dense value of the wrong size.
    NotHll,
    /// The sparse opcodes do not cover exactly 16384 registers.
    Corrupt,
}

/// Redis's `isHLLObjectOrReply` checks.
pub(crate) fn check(v: &[u8]) -> Result<(), HllError> {
    if v.len() < HDR || &v[..4] != b"HYLL" || v[4] > SPARSE {
        return Err(HllError::NotHll);
    }
    if v[4] == DENSE && v.len() != DENSE_SIZE {
        return Err(HllError::NotHll);
    }
    Ok(())
}

/// A new empty HLL: sparse, one XZERO covering every register.
pub(crate) fn new_sparse() -> Vec<u8> {
    let mut v = vec![0u8; HDR];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = SPARSE;
    let l = XZERO_MAX_LEN - 1;
    v.extend_from_slice(&[0x40 | (l >> 8) as u8, (l & 0xff) as u8]);
    v
}

/// Marks the cached cardinality stale.
pub(crate) fn invalidate(v: &mut [u8]) {
    v[15] |= 0x80;
}

/// The cached cardinality, if valid.
pub(crate) fn cached(v: &[u8]) -> Option<u64> {
    (v[15] & 0x80 == 0).then(|| u64::from_le_bytes(v[8..16].try_into().expect("8 bytes")))
}

/// MurmurHash64A, as in Redis (little-endian reads).
pub(crate) fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// (register, value) for an element (Redis `hllPatLen`).
pub(crate) fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let b0 = regs[byte] as u32;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & REG_MAX as u32) as u8
}

fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let v = val as u32;
    regs[byte] &= !((REG_MAX as u32) << fb) as u8;
    regs[byte] |= (v << fb) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next &= !((REG_MAX as u32) >> (8 - fb)) as u8;
        *next |= (v >> (8 - fb)) as u8;
    }
}

/// One sparse opcode: (registers covered, value, opcode bytes).
fn opcode(p: &[u8], at: usize) -> (usize, u8, usize) {
    let b = p[at];
    if b & 0xc0 == 0 {
        ((b & 0x3f) as usize + 1, 0, 1)
    } else if b & 0xc0 == 0x40 {
        let second = p.get(at + 1).copied().unwrap_or(0) as usize;
        ((((b & 0x3f) as usize) << 8 | second) + 1, 0, 2)
    } else {
        ((b & 0x3) as usize + 1, ((b >> 2) & 0x1f) + 1, 1)
    }
}

/// Calls `f(first_register, count, value)` for each run of a sparse value;
/// Err when the runs do not cover exactly the 16384 registers.
fn sparse_runs(v: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), HllError> {
    let (mut at, mut idx) = (HDR, 0usize);
    while at < v.len() {
        let (len, val, oplen) = opcode(v, at);
        if val > 0 && idx + len > REGISTERS {
            return Err(HllError::Corrupt);
        }
        f(idx, len, val);
        idx += len;
        at += oplen;
    }
    if idx != REGISTERS {
        return Err(HllError::Corrupt);
    }
    Ok(())
}

/// Converts a sparse value to dense in place (the header, cached
/// cardinality included, is kept).
pub(crate) fn to_dense(v: &mut Vec<u8>) -> Result<(), HllError> {
    if v[4] == DENSE {
        return Ok(());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = DENSE;
    sparse_runs(v, |first, len, val| {
        if val > 0 {
            for i in first..first + len {
                dense_set(&mut d[HDR..], i, val);
            }
        }
    })?;
    *v = d;
    Ok(())
}

fn val_op(val: u8, len: usize) -> u8 {
    0x80 | ((val - 1) << 2) | (len as u8 - 1)
}

fn zero_ops(len: usize, out: &mut Vec<u8>) {
    if len > ZERO_MAX_LEN {
        let l = len - 1;
        out.extend_from_slice(&[0x40 | (l >> 8) as u8, (l & 0xff) as u8]);
    } else {
        out.push((len - 1) as u8);
    }
}

/// Raises register `index` to `count` if lower (Redis `hllSparseSet` /
/// `hllDenseSet`), turning a sparse value dense when the value needs more
/// than 5 bits or the value would grow past `sparse_max` bytes. Returns
/// whether a register changed.
pub(crate) fn set(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<bool, HllError> {
    if v[4] == DENSE {
        let regs = &mut v[HDR..];
        if count > dense_get(regs, index) {
            dense_set(regs, index, count);
            return Ok(true);
        }
        return Ok(false);
    }
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let (mut at, mut first, mut prev) = (HDR, 0usize, None);
    let mut found = None;
    while at < v.len() {
        let (span, val, oplen) = opcode(v, at);
        if index < first + span {
            found = Some((span, val, oplen));
            break;
        }
        prev = Some(at);
        at += oplen;
        first += span;
    }
    let Some((span, val, oplen)) = found else {
        return Err(HllError::Corrupt);
    };
    let is_val = v[at] & 0x80 != 0;
    // Steps 2 and 3: update in place or split the opcode.
    if is_val {
        if val >= count {
            return Ok(false);
        }
        if span == 1 {
            v[at] = val_op(count, 1);
            merge_adjacent(v, prev.unwrap_or(HDR));
            invalidate(v);
            return Ok(true);
        }
    } else if oplen == 1 && span == 1 {
        v[at] = val_op(count, 1);
        merge_adjacent(v, prev.unwrap_or(HDR));
        invalidate(v);
        return Ok(true);
    }
    let last = first + span - 1;
    let mut seq = Vec::with_capacity(5);
    if is_val {
        if index != first {
            seq.push(val_op(val, index - first));
        }
        seq.push(val_op(count, 1));
        if index != last {
            seq.push(val_op(val, last - index));
        }
    } else {
        if index != first {
            zero_ops(index - first, &mut seq);
        }
        seq.push(val_op(count, 1));
        if index != last {
            zero_ops(last - index, &mut seq);
        }
    }
    let delta = seq.len() as isize - oplen as isize;
    if delta > 0 && v.len() + delta as usize > sparse_max {
        return promote(v, index, count);
    }
    v.splice(at..at + oplen, seq);
    // Step 4: merge equal adjacent VAL opcodes near the change.
    merge_adjacent(v, prev.unwrap_or(HDR));
    invalidate(v);
    Ok(true)
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    to_dense(v)?;
    let regs = &mut v[HDR..];
    if count > dense_get(regs, index) {
        dense_set(regs, index, count);
    }
    Ok(true)
}

/// Redis's merge pass: up to 5 opcodes from `p`, joining two adjacent VALs
/// of the same value when the sum of their lengths still fits.
fn merge_adjacent(v: &mut Vec<u8>, mut p: usize) {
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        let b = v[p];
        if b & 0xc0 == 0x40 {
            p += 2;
            continue;
        } else if b & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && v[p + 1] & 0x80 != 0 {
            let (l1, v1, _) = opcode(v, p);
            let (l2, v2, _) = opcode(v, p + 1);
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                v[p + 1] = val_op(v1, l1 + l2);
                v.remove(p);
                continue;
            }
        }
        p += 1;
    }
}

/// Raises `max[i]` to each register of the HLL `v` (Redis `hllMerge`).
pub(crate) fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), HllError> {
    if v[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&v[HDR..], i));
        }
        return Ok(());
    }
    sparse_runs(v, |first, len, val| {
        if val > 0 {
            for m in &mut max[first..first + len] {
                *m = (*m).max(val);
            }
        }
    })
}

/// The registers of `v` as one byte each.
pub(crate) fn registers(v: &[u8]) -> Result<[u8; REGISTERS], HllError> {
    let mut max = [0u8; REGISTERS];
    merge_into(&mut max, v)?;
    Ok(max)
}

/// Ertl's estimate from the registers (Redis `hllCount`).
pub(crate) fn count(regs: &[u8; REGISTERS]) -> u64 {
    let mut histo = [0u32; 64];
    for &r in regs.iter() {
        histo[r as usize & 63] += 1;
    }
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histo[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += histo[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histo[0] as f64 / m);
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_reference_values() {
        // MurmurHash64A reference outputs (seed 0): the empty input hashes
        // to 0, and the tail/body split is exercised by 1, 8 and 9 bytes.
        assert_eq!(murmur64a(b"", 0), 0);
        assert_ne!(murmur64a(b"a", 0x1234), murmur64a(b"a", 0));
        assert_ne!(murmur64a(b"abcdefgh", 0), murmur64a(b"abcdefgh\0", 0));
    }

    #[test]
    fn sparse_and_dense_agree_on_every_register() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        to_dense(&mut dense).unwrap();
        for i in 0..20_000u32 {
            let (idx, c) = pat_len(format!("e{i}").as_bytes());
            let a = set(&mut sparse, idx, c, 1 << 20).unwrap();
            let b = set(&mut dense, idx, c, 1 << 20).unwrap();
            assert_eq!(a, b, "element {i}");
        }
        assert_eq!(sparse[4], SPARSE);
        assert_eq!(registers(&sparse).unwrap(), registers(&dense).unwrap());
        let n = count(&registers(&dense).unwrap());
        assert!((19_000..21_000).contains(&n), "{n}");
    }

    #[test]
    fn corrupt_sparse_values_are_refused() {
        let mut v = new_sparse();
        v.truncate(HDR + 1);
        assert_eq!(registers(&v), Err(HllError::Corrupt));
        assert_eq!(check(b"HYLL\x00"), Err(HllError::NotHll));
    }
}
