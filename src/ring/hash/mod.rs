//! Hash functions behind the ring: hash tags, the MD5-derived point and key
//! hashes of both schemes, and every key hash twemproxy offers ([`KeyHash`]),
//! one file per family.
//!
//! Called by [`super::Ring`] when it builds points and locates keys, and by the
//! simulator and benches that want the raw numbers. Pure functions over byte
//! slices; they never allocate.

mod crc;
mod fnv;
mod hsieh;
mod jenkins;
mod murmur;
#[cfg(test)]
mod tests;

use md5::{Digest, Md5};
use std::fmt;
use std::str::FromStr;

/// A key hash of twemproxy's `hash:` setting, computed bit for bit as
/// twemproxy does (its signed-`char` reads and 32-bit truncations included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyHash {
    OneAtATime,
    Md5,
    Crc16,
    Crc32,
    Crc32a,
    Fnv1_64,
    /// twemproxy's default.
    Fnv1a64,
    Fnv1_32,
    Fnv1a32,
    Hsieh,
    Murmur,
    Jenkins,
}

impl KeyHash {
    /// Every hash, in twemproxy's order.
    pub const ALL: [KeyHash; 12] = [
        KeyHash::OneAtATime,
        KeyHash::Md5,
        KeyHash::Crc16,
        KeyHash::Crc32,
        KeyHash::Crc32a,
        KeyHash::Fnv1_64,
        KeyHash::Fnv1a64,
        KeyHash::Fnv1_32,
        KeyHash::Fnv1a32,
        KeyHash::Hsieh,
        KeyHash::Murmur,
        KeyHash::Jenkins,
    ];

    /// twemproxy's name for it (`hash: fnv1a_64`).
    pub fn name(self) -> &'static str {
        match self {
            KeyHash::OneAtATime => "one_at_a_time",
            KeyHash::Md5 => "md5",
            KeyHash::Crc16 => "crc16",
            KeyHash::Crc32 => "crc32",
            KeyHash::Crc32a => "crc32a",
            KeyHash::Fnv1_64 => "fnv1_64",
            KeyHash::Fnv1a64 => "fnv1a_64",
            KeyHash::Fnv1_32 => "fnv1_32",
            KeyHash::Fnv1a32 => "fnv1a_32",
            KeyHash::Hsieh => "hsieh",
            KeyHash::Murmur => "murmur",
            KeyHash::Jenkins => "jenkins",
        }
    }

    /// The 32-bit hash of `key` (already cut to its hash tag).
    #[inline]
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            KeyHash::OneAtATime => jenkins::one_at_a_time(key),
            KeyHash::Md5 => md5_u32(key),
            KeyHash::Crc16 => crc::crc16(key),
            KeyHash::Crc32 => crc::crc32(key),
            KeyHash::Crc32a => crc::crc32a(key),
            KeyHash::Fnv1_64 => fnv::fnv1_64(key),
            KeyHash::Fnv1a64 => fnv::fnv1a_64(key),
            KeyHash::Fnv1_32 => fnv::fnv1_32(key),
            KeyHash::Fnv1a32 => fnv::fnv1a_32(key),
            KeyHash::Hsieh => hsieh::hsieh(key),
            KeyHash::Murmur => murmur::murmur(key),
            KeyHash::Jenkins => jenkins::jenkins(key),
        }
    }
}

impl FromStr for KeyHash {
    type Err = String;

    /// twemproxy compares the name exactly (case-sensitive); so does this.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyHash::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = KeyHash::ALL.iter().map(|h| h.name()).collect();
                format!("unknown hash '{s}' (expected one of {})", names.join(", "))
            })
    }
}

impl fmt::Display for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Returns the part of `key` that decides its placement (the Redis Cluster rule,
/// also twemproxy's `hash_tag: "{}"`): if the key contains a `{`, and a `}` after
/// that first `{`, and at least one byte between them, only those bytes are
/// hashed; otherwise the whole key is.
///
/// `{user1000}.following` → `user1000`; `foo{}{bar}` → the whole key (the first
/// pair is empty); `foo{{bar}}` → `{bar`; `foo{bar}{zap}` → `bar`.
pub(crate) fn hash_tag(key: &[u8]) -> &[u8] {
    tagged(key, [b'{', b'}'])
}

/// twemproxy's `hash_tag` with any two delimiters (`server_pool_idx`): the
/// bytes between the first `open` and the first `close` after it, when there
/// is at least one; otherwise the whole key. `[b'{', b'}']` is [`hash_tag`].
pub(crate) fn tagged(key: &[u8], [open_byte, close_byte]: [u8; 2]) -> &[u8] {
    let Some(open) = memchr::memchr(open_byte, key) else {
        return key;
    };
    match memchr::memchr(close_byte, &key[open + 1..]) {
        // `len > 0`: an empty tag would send every `{}`-key to one node.
        Some(len) if len > 0 => &key[open + 1..open + 1 + len],
        _ => key,
    }
}

/// The MD5 digest of `data`.
#[inline]
pub(crate) fn md5(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// The four-byte group `alignment` (0..4) of MD5(`label`) as a little-endian
/// u32: twemproxy's `ketama_hash`, one ketama point (the golden values of
/// twemproxy's own tests are checked against it).
#[cfg(test)]
fn ketama_hash(label: &[u8], alignment: usize) -> u32 {
    let d = md5(label);
    le_u32(&d, alignment)
}

/// First four bytes of MD5(`data`) as a little-endian u32: twemproxy's
/// `hash_md5`, the ketama key hash.
#[inline]
pub(crate) fn md5_u32(data: &[u8]) -> u32 {
    le_u32(&md5(data), 0)
}

/// First eight bytes of MD5(`data`) as a little-endian u64: the vnode scheme's
/// key and point hash.
#[inline]
pub(crate) fn md5_u64(data: &[u8]) -> u64 {
    let d = md5(data);
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// Little-endian u32 from the four-byte group `group` of a digest.
#[inline]
pub(crate) fn le_u32(digest: &[u8; 16], group: usize) -> u32 {
    let i = group * 4;
    u32::from_le_bytes([digest[i], digest[i + 1], digest[i + 2], digest[i + 3]])
}
