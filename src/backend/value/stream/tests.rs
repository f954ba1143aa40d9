use super::*;

const T: Thresholds = Thresholds::REDIS_DEFAULTS;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

#[test]
fn nodes_hold_one_hundred_entries_and_approximate_trims_drop_whole_nodes() {
    let mut s = Stream::default();
    for i in 1..=250 {
        s.append(id(i, 0), &[b"f", b"v"], &T);
    }
    assert_eq!((s.len(), s.node_count()), (250, 3));
    assert_eq!(s.trim(Trim::MaxLen(120), true, 10_000), 100);
    assert_eq!(s.len(), 150);
    assert_eq!(s.trim(Trim::MaxLen(120), false, 0), 30);
    assert_eq!(s.edge(false).map(|e| e.0), Some(id(131, 0)));
    assert_eq!(s.first_id, id(131, 0));
    assert_eq!(s.trim(Trim::MinId(id(201, 0)), false, 0), 70);
    assert_eq!((s.len(), s.node_count()), (50, 1));
}

#[test]
fn deleting_leaves_tombstones_until_a_node_is_empty() {
    let mut s = Stream::default();
    for i in 1..=3 {
        s.append(id(1, i), &[b"a", b"1", b"b", b"2"], &T);
    }
    assert!(s.delete(id(1, 2)));
    assert!(!s.delete(id(1, 2)));
    assert!(!s.delete(id(9, 9)));
    let ids: Vec<_> = s
        .range(StreamId::MIN, StreamId::MAX, true)
        .map(|e| e.0)
        .collect();
    assert_eq!(ids, vec![id(1, 3), id(1, 1)]);
    assert!(s.delete(id(1, 1)) && s.delete(id(1, 3)));
    assert_eq!((s.len(), s.node_count()), (0, 0));
    assert_eq!(s.last_id, id(1, 3));
    let before = s.mem();
    s.append(id(2, 0), &[b"x", b"y"], &T);
    assert!(s.mem() > before);
}

#[test]
fn ids_step_and_format_like_redis() {
    assert_eq!(id(1, u64::MAX).incr(), Some(id(2, 0)));
    assert_eq!(StreamId::MAX.incr(), None);
    assert_eq!(id(2, 0).decr(), Some(id(1, u64::MAX)));
    assert_eq!(StreamId::MIN.decr(), None);
    assert_eq!(id(5, 7).to_string(), "5-7");
}

/// Every live entry, forwards.
fn all(s: &Stream) -> Vec<(StreamId, Vec<Elem>)> {
    s.range(StreamId::MIN, StreamId::MAX, false).collect()
}

fn elems(f: &[&[u8]]) -> Vec<Elem> {
    f.iter().map(|x| Elem::from(*x)).collect()
}

#[test]
fn entries_round_trip_with_differing_fields_integers_and_huge_values() {
    let huge = vec![b'x'; 1 << 20];
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"type", b"click", b"n", b"12345"],
        vec![b"type", b"view", b"n", b"-7"],
        vec![b"n", b"1", b"type", b"x"],
        vec![b"type", b"click"],
        vec![b"a", b"007", b"b", b"-0", b"c", b"+1", b"d", b""],
        vec![
            b"min",
            b"-9223372036854775808",
            b"max",
            b"9223372036854775807",
        ],
        vec![b"big", &huge, b"type", b"9223372036854775808"],
        vec![b"type", b"click", b"n", b"0"],
    ];
    let mut s = Stream::default();
    let ids = [
        id(5, 0),
        id(5, 1),
        id(5, 9),
        id(6, 0),
        id(1000, 3),
        id(u64::MAX - 1, u64::MAX),
        id(u64::MAX, 0),
        id(u64::MAX, u64::MAX),
    ];
    for (i, f) in ids.iter().zip(&cases) {
        s.append(*i, f, &T);
    }
    let want: Vec<_> = ids
        .iter()
        .zip(&cases)
        .map(|(i, f)| (*i, elems(f)))
        .collect();
    assert_eq!(all(&s), want);
    let back: Vec<_> = s.range(StreamId::MIN, StreamId::MAX, true).collect();
    assert_eq!(back, want.iter().rev().cloned().collect::<Vec<_>>());
    assert_eq!(s.get(id(5, 9)), Some(elems(&cases[2])));
    assert!(s.contains(id(6, 0)) && !s.contains(id(6, 1)));
    assert_eq!(
        s.range(id(5, 1), id(999, 0), false)
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        vec![id(5, 1), id(5, 9), id(6, 0)]
    );
    assert!(s.mem() > huge.len());
}

#[test]
fn deletes_and_exact_trims_at_node_boundaries_keep_the_rest_readable() {
    let mut s = Stream::default();
    for i in 1..=300u64 {
        let v = i.to_string();
        s.append(id(i / 7, i), &[b"f", v.as_bytes()], &T);
    }
    assert_eq!(s.node_count(), 3);
    // The last entry of the first node, the first of the second.
    assert!(s.delete(id(100 / 7, 100)) && s.delete(id(101 / 7, 101)));
    assert!(!s.contains(id(100 / 7, 100)));
    let ids: Vec<u64> = all(&s).iter().map(|e| e.0.seq).collect();
    assert_eq!(ids.len(), 298);
    assert!(!ids.contains(&100) && !ids.contains(&101));
    let rev: Vec<u64> = s
        .range(id(13, 98), id(14, 103), true)
        .map(|e| e.0.seq)
        .collect();
    assert_eq!(rev, vec![103, 102, 99, 98]);
    // Exactly to a node boundary: the first node goes whole.
    assert_eq!(s.trim(Trim::MaxLen(199), false, 0), 99);
    assert_eq!((s.len(), s.node_count()), (199, 2));
    assert_eq!(s.first_id, id(102 / 7, 102));
    assert_eq!(s.trim(Trim::MinId(id(200 / 7, 200)), false, 0), 98);
    assert_eq!(
        s.edge(false),
        Some((id(200 / 7, 200), elems(&[b"f", b"200"])))
    );
    assert_eq!(
        s.edge(true),
        Some((id(300 / 7, 300), elems(&[b"f", b"300"])))
    );
    for i in 200..=300u64 {
        assert!(s.delete(id(i / 7, i)), "{i}");
    }
    assert_eq!((s.len(), s.node_count(), s.mem()), (0, 0, 0));
}

#[test]
fn a_hundred_thousand_entries_cost_their_bytes_not_objects() {
    let mut s = Stream::default();
    for i in 0..100_000u64 {
        let (u, n) = (format!("u{}", i % 1000), i.to_string());
        s.append(
            id(1_700_000_000_000 + i / 50, i % 50),
            &[b"type", b"click", b"user", u.as_bytes(), b"n", n.as_bytes()],
            &T,
        );
    }
    assert_eq!((s.len(), s.node_count()), (100_000, 1000));
    // ~17 bytes of entry and under 2 of node per entry.
    assert!(s.mem() < 25 * 100_000, "{}", s.mem());
    let heap: usize = s.nodes.values().map(|n| n.heap()).sum();
    assert_eq!(s.mem(), heap + s.node_count() * NODE_OVERHEAD);
    let e = s
        .get(id(1_700_000_000_000 + 99_999 / 50, 99_999 % 50))
        .expect("last");
    assert_eq!(
        e,
        elems(&[b"type", b"click", b"user", b"u999", b"n", b"99999"])
    );
    assert_eq!(all(&s).len(), 100_000);
    assert_eq!(
        s.range(StreamId::MIN, StreamId::MAX, true).take(3).count(),
        3
    );
    let copy = s.clone();
    assert_eq!(copy.mem(), s.mem());
}
