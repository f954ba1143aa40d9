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
