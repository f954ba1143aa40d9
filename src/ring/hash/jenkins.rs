//! Bob Jenkins's hashes as twemproxy computes them: `one_at_a_time`
//! (`nc_one_at_a_time.c`, which reads bytes as signed chars) and `jenkins`
//! (lookup3's `hashlittle` with initial value 13, `nc_jenkins.c`).
//!
//! twemproxy's `jenkins` picks one of three read paths by the alignment of
//! the key's address; on a little-endian machine all three give the same
//! value as the byte-at-a-time path below, which is the one kept.

/// `hash_one_at_a_time`.
pub(crate) fn one_at_a_time(key: &[u8]) -> u32 {
    let mut value: u32 = 0;
    for &b in key {
        value = value.wrapping_add(b as i8 as u32);
        value = value.wrapping_add(value << 10);
        value ^= value >> 6;
    }
    value = value.wrapping_add(value << 3);
    value ^= value >> 11;
    value.wrapping_add(value << 15)
}

const JENKINS_INITVAL: u32 = 13;

fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn final_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// Little-endian u32 of up to four bytes (missing high bytes are zero).
fn le(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .rev()
        .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
}

/// `hash_jenkins`.
pub(crate) fn jenkins(key: &[u8]) -> u32 {
    let init = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(JENKINS_INITVAL);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(le(&k[0..4]));
        b = b.wrapping_add(le(&k[4..8]));
        c = c.wrapping_add(le(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    if k.is_empty() {
        // Zero-length tails need no mixing (also the empty key).
        return c;
    }
    a = a.wrapping_add(le(&k[..k.len().min(4)]));
    if k.len() > 4 {
        b = b.wrapping_add(le(&k[4..k.len().min(8)]));
    }
    if k.len() > 8 {
        c = c.wrapping_add(le(&k[8..]));
    }
    final_mix(&mut a, &mut b, &mut c);
    c
}
