//! The CRC hashes as twemproxy computes them (`nc_crc16.c`, `nc_crc32.c`).
//!
//! `crc16` is the reflected CRC-16 of the Linux kernel (polynomial 0xA001,
//! initial value 0) — not the XMODEM CRC16 of Redis Cluster slots. `crc32` is
//! libmemcached's: bits 16..31 of the standard CRC-32, masked to 15 bits, so
//! it only ever yields 0..=32767. `crc32a` is the standard CRC-32. The tables
//! are generated at compile time from the polynomials.

const CRC16_TABLE: [u16; 256] = reflected_table_16(0xA001);
const CRC32_TABLE: [u32; 256] = reflected_table_32(0xEDB8_8320);

const fn reflected_table_16(poly: u16) -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u16;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ poly } else { c >> 1 };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

const fn reflected_table_32(poly: u32) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ poly } else { c >> 1 };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// `hash_crc16`.
pub(crate) fn crc16(key: &[u8]) -> u32 {
    let mut crc: u16 = 0;
    for &b in key {
        crc = (crc >> 8) ^ CRC16_TABLE[((crc ^ u16::from(b)) & 0xff) as usize];
    }
    u32::from(crc)
}

/// The standard (reflected, inverted) CRC-32 of `key`.
fn crc32_full(key: &[u8]) -> u32 {
    let mut crc = u32::MAX;
    for &b in key {
        crc = (crc >> 8) ^ CRC32_TABLE[((crc ^ u32::from(b)) & 0xff) as usize];
    }
    !crc
}

/// `hash_crc32`: libmemcached's 15-bit variant. (twemproxy reads the bytes
/// as signed chars here, which the `& 0xff` makes harmless.)
pub(crate) fn crc32(key: &[u8]) -> u32 {
    (crc32_full(key) >> 16) & 0x7fff
}

/// `hash_crc32a`: the standard CRC-32.
pub(crate) fn crc32a(key: &[u8]) -> u32 {
    crc32_full(key)
}
