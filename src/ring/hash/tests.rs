//! Hash tests: the hash tag rule, and every twemproxy key hash against
//! values computed by twemproxy 0.5.0's own C (`src/hashkit`, x86-64) for keys
//! chosen to hit each quirk: bytes ≥ 0x80 (signed `char`), every tail length
//! of the block hashes, the empty key, UTF-8 and a long key.

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

/// The hashes of [`GOLDEN`], in its column order: twemproxy's order without
/// md5 (which has its own test).
fn golden_order() -> impl Iterator<Item = KeyHash> {
    KeyHash::ALL.into_iter().filter(|&h| h != KeyHash::Md5)
}

/// `(key, hash of each of golden_order())`, printed by twemproxy's hashkit.
const GOLDEN: &[(&[u8], [u32; 11])] = &[
    (b"", [0, 0, 0, 0, 2216829733, 2216829733, 2166136261, 2166136261, 0, 0, 3735928572]),
    (b"a", [3392050242, 31879, 26807, 3904355907, 2248259518, 2248273036, 84696446, 3826002220, 2472816263, 1262581116, 3768813200]),
    (b"ab", [1172708952, 8156415, 7811, 2659403885, 3035314104, 3041237098, 1886858552, 1294271946, 1535905475, 3820310011, 3249891675]),
    (b"abc", [3977453403, 2088017366, 13604, 891568578, 1806675403, 88168267, 1134309195, 440920331, 3843582778, 2064434216, 2403423744]),
    (b"abcd", [3448463878, 1956489270, 28034, 3984772369, 4219752341, 3993445597, 3118363509, 3459545533, 984896216, 4016735919, 3574732058]),
    (b"apple", [2297466611, 3662830516, 10542, 2838417488, 473199127, 1488911807, 67176023, 280767167, 3738850110, 4142305122, 1442444624]),
    (b"hello world", [1045060183, 4060494820, 3402, 222957957, 2979073647, 37540583, 1418570095, 3582672807, 1333368947, 1578702139, 355681275]),
    (b"user:1000", [3043211087, 3781445233, 8052, 2675185635, 3550362913, 2927313545, 2796551329, 1350311305, 3723237737, 2384768711, 76303748]),
    (b"{user1000}.following", [1612515252, 3012718522, 30220, 1980515311, 3054281128, 834706038, 4171578120, 635925110, 31357003, 2799879989, 2835324245]),
    (b"\xff", [2925896852, 7920, 32512, 4278190080, 2046707744, 2046707310, 4210270944, 4193493326, 44489640, 3679652508, 3784723880]),
    (b"\x80\xff\x7f\x00", [493566574, 95881788, 23074, 3659675891, 1838944363, 3347066487, 1879953899, 1167125239, 1029140459, 143786332, 613525783]),
    (b"ab\xe9", [2087468527, 2088021268, 14409, 944319484, 2488291905, 4206748569, 3160658113, 2981610777, 307729637, 1806632351, 2301080244]),
    (b"\xc3\xa9t\xc3\xa9", [2144029493, 3861292903, 17617, 1154575572, 3995086359, 3933641815, 3199958167, 200187927, 3432339831, 3664841419, 2303093779]),
    (b"key\x0d\x0a\x00\xfe", [1396260924, 2176491840, 7646, 501111078, 2084736973, 604060813, 1960092365, 2150211277, 1308149931, 3248955750, 1394734277]),
    (b"\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87\xf0\x9f\x94\x91", [3080013310, 605010295, 9563, 626738446, 1073114315, 2763319011, 2628884203, 3773671555, 2248436396, 238427212, 1404400362]),
    (b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", [2862924896, 3455222993, 26366, 3875423928, 3266299615, 756023439, 1526671519, 1373724879, 3035079375, 1633503750, 1566463568]),
    (b"\xc8\xc9\xca\xcb\xcc\xcd\xce\xcf\xd0\xd1\xd2\xd3\xd4\xd5\xd6\xd7\xd8\xd9\xda\xdb\xdc\xdd\xde\xdf\xe0\xe1\xe2\xe3\xe4\xe5\xe6\xe7\xe8\xe9\xea\xeb\xec\xed\xee\xef\xf0\xf1\xf2\xf3\xf4\xf5\xf6\xf7\xf8\xf9\xfa\xfb\xfc\xfd\xfe\xff", [666230315, 3815710649, 4441, 291075010, 3012902261, 3382363661, 3566286613, 630363053, 1146243058, 4150775852, 3280482326]),
    (b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", [514203068, 3387394134, 24078, 1577999759, 296812437, 3963686965, 889212725, 2888067797, 488790092, 1260914005, 1509326664]),
];

#[test]
fn every_twemproxy_hash_matches_its_c_values() {
    for (key, want) in GOLDEN {
        for (hash, &value) in golden_order().zip(want) {
            assert_eq!(hash.hash(key), value, "{hash} of {key:?}");
        }
    }
}

#[test]
fn md5_key_hash_is_the_ketama_key_hash() {
    assert_eq!(KeyHash::Md5.hash(b"apple"), 3195025439);
    assert_eq!(KeyHash::Md5.hash(b"apple"), md5_u32(b"apple"));
}

#[test]
fn hash_names_round_trip_and_stay_case_sensitive() {
    for h in KeyHash::ALL {
        assert_eq!(h.name().parse::<KeyHash>(), Ok(h));
        assert_eq!(h.to_string(), h.name());
    }
    assert!("FNV1A_64".parse::<KeyHash>().is_err());
    let err = "sha1".parse::<KeyHash>().unwrap_err();
    assert!(err.contains("'sha1'") && err.contains("fnv1a_64"), "{err}");
}

#[test]
fn crc32_stays_within_fifteen_bits() {
    for (key, _) in GOLDEN {
        assert!(KeyHash::Crc32.hash(key) <= 0x7fff);
    }
}

#[test]
fn other_tag_delimiters_follow_the_same_rule() {
    assert_eq!(tagged(b"user:1000:name", [b':', b':']), b"1000");
    assert_eq!(tagged(b"a[b]c", [b'[', b']']), b"b");
    assert_eq!(tagged(b"a[]c", [b'[', b']']), b"a[]c");
    assert_eq!(tagged(b"{x}", [b'[', b']']), b"{x}");
}
