//! Hash functions behind the ring: hash tags and the MD5-derived point and key
//! hashes of both schemes.
//!
//! Called by [`super::Ring`] when it builds points and locates keys, and by the
//! simulator and benches that want the raw numbers. Pure functions over byte
//! slices; they never allocate.

use md5::{Digest, Md5};

/// Returns the part of `key` that decides its placement (the Redis Cluster rule,
/// also twemproxy's `hash_tag: "{}"`): if the key contains a `{`, and a `}` after
/// that first `{`, and at least one byte between them, only those bytes are
/// hashed; otherwise the whole key is.
///
/// `{user1000}.following` → `user1000`; `foo{}{bar}` → the whole key (the first
/// pair is empty); `foo{{bar}}` → `{bar`; `foo{bar}{zap}` → `bar`.
pub(crate) fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = memchr::memchr(b'{', key) else {
        return key;
    };
    match memchr::memchr(b'}', &key[open + 1..]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tag_follows_the_redis_cluster_rule() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"{user1000}.following", b"user1000"),
            (b"{user1000}.followers", b"user1000"),
            (b"foo{}{bar}", b"foo{}{bar}"),
            (b"foo{{bar}}", b"{bar"),
            (b"foo{bar}{zap}", b"bar"),
            (b"foo", b"foo"),
            (b"", b""),
            (b"{", b"{"),
            (b"}{", b"}{"),
            (b"{}", b"{}"),
            (b"a{b", b"a{b"),
            (b"a}b{c}", b"c"),
            (b"{a}", b"a"),
        ];
        for (key, want) in cases {
            assert_eq!(
                hash_tag(key),
                *want,
                "key {:?}",
                String::from_utf8_lossy(key)
            );
        }
    }

    #[test]
    fn hashes_match_twemproxy_golden_values() {
        // From twemproxy's own tests (test_hashkit / ketama).
        assert_eq!(ketama_hash(b"server1-8", 0), 3853726576);
        assert_eq!(ketama_hash(b"server1-8", 3), 2667054752);
        assert_eq!(md5_u32(b"apple"), 3195025439);
    }

    #[test]
    fn md5_u64_extends_md5_u32() {
        for key in [&b"apple"[..], b"", b"user:1"] {
            assert_eq!(md5_u64(key) as u32, md5_u32(key));
        }
    }
}
