//! MurmurHash2 as twemproxy computes it (`nc_murmur.c`): seed
//! `0xdeadbeef * len`, blocks read little-endian (the x86 byte order
//! twemproxy runs on), the tail bytes unsigned.

const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// `hash_murmur`.
pub(crate) fn murmur(key: &[u8]) -> u32 {
    let len = key.len() as u32;
    let seed = 0xdead_beef_u32.wrapping_mul(len);
    let mut h = seed ^ len;
    let mut blocks = key.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if tail.len() == 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}
