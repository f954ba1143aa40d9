//! Tests of the twemproxy placement: point counts from twemproxy's float
//! arithmetic, server order and slots of `modula`, default names, hash tags,
//! the empty key, `random`, and epochs keeping the placement.

use super::super::{points, Ring, RingConfig};
use super::*;

fn servers(weights: &[u32]) -> Vec<NodeSpec> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &weight)| NodeSpec {
            name: server_name("127.0.0.1", 7001 + i as u16),
            addr: format!("127.0.0.1:{}", 7001 + i),
            weight,
        })
        .collect()
}

fn placement(hash: KeyHash, distribution: Distribution) -> Placement {
    Placement {
        hash,
        distribution,
        hash_tag: None,
    }
}

#[test]
fn ketama_point_counts_follow_twemproxy_floats() {
    // Printed by twemproxy's own formula compiled with cc on x86-64.
    let many = vec![1u32; 100];
    let cases: &[(&[u32], &[u64])] = &[
        (
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            &[28, 56, 84, 116, 144, 172, 200, 232, 260, 288],
        ),
        (&[3, 5, 7], &[96, 160, 224]),
        (&[1, 1, 1, 1, 1, 1, 1], &[160; 7]),
        (&[1, 1000], &[0, 316]),
        (&many, &[156; 100]),
        (&many[..50], &[156; 50]),
    ];
    for (weights, want) in cases {
        let ns = servers(weights);
        let got: Vec<u64> = (0..ns.len())
            .map(|i| points::count(&ns, i, RingConfig::default()))
            .collect();
        assert_eq!(&got, want, "weights {weights:?}");
    }
}

#[test]
fn a_server_without_points_is_kept_and_never_chosen() {
    let ring = Ring::twemproxy(servers(&[1, 1000]), Placement::default(), 1).unwrap();
    assert_eq!(ring.points_of(0), 0);
    for i in 0..1000 {
        assert_eq!(ring.locate(format!("k{i}").as_bytes()), 1);
    }
    // The shardis scheme refuses the same weights instead.
    assert!(Ring::new(servers(&[1, 1000]), RingConfig::default(), 1).is_err());
}

#[test]
fn default_names_drop_only_the_memcached_port() {
    assert_eq!(server_name("10.0.0.1", 6379), "10.0.0.1:6379");
    assert_eq!(server_name("10.0.0.1", 11211), "10.0.0.1");
    assert_eq!(server_name("cache-a", 11212), "cache-a:11212");
}

#[test]
fn modula_orders_servers_by_name_length_then_bytes() {
    let mut ns = servers(&[1, 2, 1]);
    ns[0].name = "bb".into();
    ns[1].name = "c".into();
    ns[2].name = "a".into();
    let t = Twem::new(&ns, placement(KeyHash::Md5, Distribution::Modula)).unwrap();
    // a (idx 2), c (idx 1, weight 2), bb (idx 0).
    assert_eq!(t.slots, vec![2, 1, 1, 0]);
    let ring = Ring::twemproxy(ns, placement(KeyHash::Md5, Distribution::Modula), 1).unwrap();
    for h in 0..8u64 {
        assert_eq!(ring.locate_hash(h), [2, 1, 1, 0][(h % 4) as usize]);
    }
    assert_eq!(ring.total_points(), 0);
    assert!((ring.share_of(1) - 0.5).abs() < 1e-12);
}

#[test]
fn modula_places_by_hash_mod_total_weight() {
    let ns = servers(&[1; 10]);
    let p = placement(KeyHash::Fnv1a64, Distribution::Modula);
    let ring = Ring::twemproxy(ns.clone(), p, 1).unwrap();
    let order: Vec<usize> = twemproxy_order(&ns).collect();
    for key in [&b"a"[..], b"apple", b"user:1000", b"\xff\x80"] {
        let h = KeyHash::Fnv1a64.hash(key);
        assert_eq!(ring.locate(key), order[(h % 10) as usize], "{key:?}");
    }
}

#[test]
fn the_key_hash_is_the_pool_hash_of_the_tagged_key() {
    let mut p = placement(KeyHash::Murmur, Distribution::Ketama);
    let ring = Ring::twemproxy(servers(&[1; 4]), p, 1).unwrap();
    // No hash_tag: braces are part of the key.
    assert_eq!(
        ring.key_hash(b"{a}b"),
        u64::from(KeyHash::Murmur.hash(b"{a}b"))
    );
    assert_eq!(ring.key_hash(b""), 0);
    p.hash_tag = Some(*b"{}");
    let ring = Ring::twemproxy(servers(&[1; 4]), p, 1).unwrap();
    assert_eq!(
        ring.key_hash(b"{a}b"),
        u64::from(KeyHash::Murmur.hash(b"a"))
    );
    assert_eq!(
        ring.key_hash(b"{}b"),
        u64::from(KeyHash::Murmur.hash(b"{}b"))
    );
    // Points stay MD5 whatever the key hash: the ring matches md5 ketama.
    let md5 = Ring::twemproxy(
        servers(&[1; 4]),
        placement(KeyHash::Md5, Distribution::Ketama),
        1,
    )
    .unwrap();
    let shardis = Ring::new(servers(&[1; 4]), RingConfig::default(), 1).unwrap();
    for i in 0..2000 {
        let key = format!("key:{i}");
        assert_eq!(md5.locate(key.as_bytes()), shardis.locate(key.as_bytes()));
    }
}

#[test]
fn random_spreads_over_every_server_ignoring_weights() {
    let p = placement(KeyHash::Md5, Distribution::Random);
    let ring = Ring::twemproxy(servers(&[1, 5, 1]), p, 1).unwrap();
    let mut seen = [0u32; 3];
    for _ in 0..3000 {
        seen[ring.locate(b"same key")] += 1;
    }
    assert!(seen.iter().all(|&n| n > 700), "{seen:?}");
}

#[test]
fn a_new_epoch_keeps_the_placement() {
    let p = Placement {
        hash: KeyHash::Crc32a,
        distribution: Distribution::Modula,
        hash_tag: Some(*b"::"),
    };
    let ring = Ring::twemproxy(servers(&[1; 3]), p, 1).unwrap();
    let next = ring.with_nodes(servers(&[1; 4])).unwrap();
    assert_eq!(next.placement(), Some(p));
    assert_eq!(next.epoch(), 2);
    assert_eq!(
        Ring::new(servers(&[1]), RingConfig::default(), 1)
            .unwrap()
            .placement(),
        None
    );
}

#[test]
fn names_too_long_for_twemproxys_label_buffer_are_refused() {
    let mut ns = servers(&[1; 2]);
    // 160 points: labels "{name}-0" to "{name}-39".
    ns[0].name = "n".repeat(MAX_LABEL_BYTES - 3);
    assert!(Ring::twemproxy(ns.clone(), Placement::default(), 1).is_ok());
    ns[0].name = "n".repeat(MAX_LABEL_BYTES - 2);
    let err = Ring::twemproxy(ns.clone(), Placement::default(), 1).err();
    assert!(matches!(err, Some(RingError::LabelTooLong(_))), "{err:?}");
    // Modula never hashes a label.
    assert!(Ring::twemproxy(ns, placement(KeyHash::Md5, Distribution::Modula), 1).is_ok());
}

#[test]
fn distribution_names_round_trip() {
    for d in Distribution::ALL {
        assert_eq!(d.name().parse::<Distribution>(), Ok(d));
    }
    assert!("Ketama".parse::<Distribution>().is_err());
}
