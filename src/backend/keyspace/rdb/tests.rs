//! Hand-made and real Redis payloads, every flip and cut of them, and
//! random bytes: all answered without a panic.

use super::*;
use crate::backend::value::stream::StreamId;
use proptest::prelude::*;

/// The stream DUMPed from Redis 5 in Redis's own test suite
/// (`unit/type/stream-cgroups`, "Loading from legacy ... persistence").
const LEGACY_STREAM: &str = include_str!("legacy_stream.hex");

fn unhex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `body` with an RDB version and its checksum after it.
fn wrap(body: &[u8], version: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

fn coll(p: &[u8]) -> Coll {
    match decode(p, &Thresholds::default()) {
        Ok(Value::Coll(c)) => c,
        other => panic!("{other:?}"),
    }
}

#[test]
fn strings_in_every_encoding() {
    let t = Thresholds::default();
    let cases: [(&[u8], &[u8]); 4] = [
        (b"\x00\x03abc", b"abc"),
        (b"\x00\xc0\x85", b"-123"),
        (b"\x00\xc2\x00\x00\x00\x80", b"-2147483648"),
        (b"\x00\xc3\x05\x0a\x00a\xe0\x00\x00", b"aaaaaaaaaa"),
    ];
    for (body, want) in cases {
        match decode(&wrap(body, 9), &t) {
            Ok(Value::Str(s)) => assert_eq!(s.as_ref(), want),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn version_checksum_and_format_errors() {
    let t = Thresholds::default();
    let ok = wrap(b"\x00\x01x", 10);
    assert!(decode(&ok, &t).is_ok());
    let newer = wrap(b"\x00\x01x", 11);
    assert_eq!(decode(&newer, &t).unwrap_err(), RdbError::Checksum);
    let mut bad_crc = ok.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    assert_eq!(decode(&bad_crc, &t).unwrap_err(), RdbError::Checksum);
    for body in [
        &b"\x00\x02x"[..],
        b"\x00\x01xy",
        b"\x02\x00",
        b"\x07\x00",
        b"\x0b\x00",
    ] {
        assert_eq!(decode(&wrap(body, 10), &t).unwrap_err(), RdbError::Format);
    }
}

#[test]
fn compact_encodings_are_read() {
    // Intset of 16-bit members 1, 300.
    let mut b = b"\x0b\x0c\x02\x00\x00\x00\x02\x00\x00\x00\x01\x00\x2c\x01".to_vec();
    let Coll::Set(s) = coll(&wrap(&b, 9)) else {
        panic!()
    };
    assert_eq!(s.len(), 2);
    (b[12], b[13]) = (1, 0); // 1, 1: not ascending
    assert!(decode(&wrap(&b, 9), &Thresholds::default()).is_err());
    // Listpack hash {f: 7, g: -1}: 18 bytes, 4 entries.
    let lp = b"\x12\x00\x00\x00\x04\x00\x81f\x02\x07\x01\x81g\x02\xdf\xff\x02\xff";
    let mut body = vec![16, lp.len() as u8];
    body.extend_from_slice(lp);
    let Coll::Hash(h) = coll(&wrap(&body, 10)) else {
        panic!()
    };
    let mut pairs: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
    pairs.sort();
    assert_eq!(
        pairs,
        [
            (b"f".to_vec(), b"7".to_vec()),
            (b"g".to_vec(), b"-1".to_vec())
        ]
    );
    // Ziplist list ["ab", 5]: header 10, entries 4 + 2, end 1.
    let zl = b"\x11\x00\x00\x00\x0e\x00\x00\x00\x02\x00\x00\x02ab\x04\xf6\xff";
    let mut body = vec![10, zl.len() as u8];
    body.extend_from_slice(zl);
    let Coll::List(l) = coll(&wrap(&body, 9)) else {
        panic!()
    };
    assert_eq!(
        l.items.iter().map(|i| i.to_vec()).collect::<Vec<_>>(),
        [b"ab".to_vec(), b"5".to_vec()]
    );
}

#[test]
fn the_redis_5_stream_loads_as_redis_loads_it() {
    let p = unhex(LEGACY_STREAM);
    let Coll::Stream(s) = coll(&p) else { panic!() };
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s.first_id, s.last_id),
        (StreamId::new(5, 0), StreamId::new(6, 0))
    );
    assert_eq!((s.entries_added, s.max_deleted), (2, StreamId::MIN));
    let g1 = &s.groups[&b"g1"[..]];
    assert_eq!((g1.entries_read, g1.pel.len()), (Some(1), 4));
    assert_eq!(s.groups[&b"g2"[..]].entries_read, Some(0));
}

/// Every single-byte flip and every truncation, checksum fixed up so the
/// body parser sees them: an answer each, never a panic.
#[test]
fn flips_and_cuts_of_the_stream_never_panic() {
    let p = unhex(LEGACY_STREAM);
    let body = &p[..p.len() - 10];
    let t = Thresholds::default();
    for i in 0..body.len() {
        for bit in [0x01, 0x80, 0xff] {
            let mut b = body.to_vec();
            b[i] ^= bit;
            let _ = decode(&wrap(&b, 9), &t);
        }
        assert!(decode(&wrap(&body[..i], 9), &t).is_err(), "cut at {i}");
    }
}

proptest! {
    #[test]
    fn random_bodies_never_panic(ty in 0u8..24, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut b = vec![ty];
        b.extend_from_slice(&body);
        let _ = decode(&wrap(&b, 10), &Thresholds::default());
    }

    #[test]
    fn random_bytes_never_panic(p in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode(&p, &Thresholds::default());
    }
}
