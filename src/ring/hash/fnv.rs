//! The four FNV hashes as twemproxy computes them (`nc_fnv.c`).
//!
//! Two quirks are kept on purpose, because placement depends on them: every
//! key byte is read through a signed `char`, so bytes ≥ 0x80 are sign-extended
//! before the xor; and `fnv1a_64` is not 64-bit at all: it runs in 32 bits
//! with the low halves of the 64-bit offset basis and prime.

const FNV_64_INIT: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_64_PRIME: u64 = 0x0000_0100_0000_01b3;
const FNV_32_INIT: u32 = 2_166_136_261;
const FNV_32_PRIME: u32 = 16_777_619;

/// `hash_fnv1_64`: 64-bit FNV-1 over sign-extended bytes, truncated to 32 bits.
pub(crate) fn fnv1_64(key: &[u8]) -> u32 {
    let mut hash = FNV_64_INIT;
    for &b in key {
        hash = hash.wrapping_mul(FNV_64_PRIME);
        hash ^= b as i8 as u64;
    }
    hash as u32
}

/// `hash_fnv1a_64`, twemproxy's default: FNV-1a in 32 bits with the
/// truncated 64-bit constants.
pub(crate) fn fnv1a_64(key: &[u8]) -> u32 {
    let mut hash = FNV_64_INIT as u32;
    for &b in key {
        hash ^= b as i8 as u32;
        hash = hash.wrapping_mul(FNV_64_PRIME as u32);
    }
    hash
}

/// `hash_fnv1_32`: 32-bit FNV-1 over sign-extended bytes.
pub(crate) fn fnv1_32(key: &[u8]) -> u32 {
    let mut hash = FNV_32_INIT;
    for &b in key {
        hash = hash.wrapping_mul(FNV_32_PRIME);
        hash ^= b as i8 as u32;
    }
    hash
}

/// `hash_fnv1a_32`: 32-bit FNV-1a over sign-extended bytes.
pub(crate) fn fnv1a_32(key: &[u8]) -> u32 {
    let mut hash = FNV_32_INIT;
    for &b in key {
        hash ^= b as i8 as u32;
        hash = hash.wrapping_mul(FNV_32_PRIME);
    }
    hash
}
