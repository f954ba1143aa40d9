//! Paul Hsieh's SuperFastHash as twemproxy computes it (`nc_hsieh.c`).
//!
//! The quirk kept: with three trailing bytes, the last one is read through a
//! signed `char`, so a byte ≥ 0x80 is sign-extended before `<< 18`; every
//! other byte is read unsigned.

fn get16(b: &[u8]) -> u32 {
    u32::from(b[0]) | (u32::from(b[1]) << 8)
}

/// `hash_hsieh`; the empty key hashes to 0.
pub(crate) fn hsieh(key: &[u8]) -> u32 {
    if key.is_empty() {
        return 0;
    }
    let mut hash: u32 = 0;
    let mut blocks = key.chunks_exact(4);
    for block in &mut blocks {
        hash = hash.wrapping_add(get16(&block[0..2]));
        let tmp = (get16(&block[2..4]) << 11) ^ hash;
        hash = (hash << 16) ^ tmp;
        hash = hash.wrapping_add(hash >> 11);
    }
    let tail = blocks.remainder();
    match tail.len() {
        3 => {
            hash = hash.wrapping_add(get16(tail));
            hash ^= hash << 16;
            hash ^= (tail[2] as i8 as u32) << 18;
            hash = hash.wrapping_add(hash >> 11);
        }
        2 => {
            hash = hash.wrapping_add(get16(tail));
            hash ^= hash << 11;
            hash = hash.wrapping_add(hash >> 17);
        }
        1 => {
            hash = hash.wrapping_add(u32::from(tail[0]));
            hash ^= hash << 10;
            hash = hash.wrapping_add(hash >> 1);
        }
        _ => {}
    }
    hash ^= hash << 3;
    hash = hash.wrapping_add(hash >> 5);
    hash ^= hash << 4;
    hash = hash.wrapping_add(hash >> 17);
    hash ^= hash << 25;
    hash.wrapping_add(hash >> 6)
}
