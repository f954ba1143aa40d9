//! The CRC hashes as twemproxy computes them (`nc_crc16.c`, `nc_crc32.c`).
//!
//! `crc16` is twemproxy 0.5.0's (the last release): the XMODEM table
//! (polynomial 0x1021, MSB first, as Redis Cluster slots use) driven by a
//! 32-bit accumulator that is never cut to 16 bits, so the hash keeps
//! growing past 0xffff; its bytes are read as signed chars, which the
//! `& 0xff` makes harmless. (twemproxy's unreleased master replaced it with
//! the kernel's reflected CRC-16; released nutcracker binaries, Debian's
//! included, place keys by this one.) `crc32` is
//! libmemcached's: bits 16..31 of the standard CRC-32, masked to 15 bits, so
//! it only ever yields 0..=32767. `crc32a` is the standard CRC-32. The tables
//! are generated at compile time from the polynomials.

const CRC16_TABLE: [u16; 256] = msb_table_16(0x1021);
const CRC32_TABLE: [u32; 256] = reflected_table_32(0xEDB8_8320);

const fn msb_table_16(poly: u16) -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 0x8000 != 0 {
                (c << 1) ^ poly
            } else {
                c << 1
            };
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

/// `hash_crc16` of twemproxy 0.5.0.
pub(crate) fn crc16(key: &[u8]) -> u32 {
    let mut crc: u32 = 0;
    for &b in key {
        let i = ((crc >> 8) ^ u32::from(b)) & 0xff;
        crc = (crc << 8) ^ u32::from(CRC16_TABLE[i as usize]);
    }
    crc
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
