//! Tests of `store.rs`.

use super::*;
use crate::backend::keyspace::entry::ENTRY_OVERHEAD;

fn put(store: &Store, key: &[u8], value: &[u8], expire_at: u64, now: u64) {
    let h = store.hash(key);
    store.lock(h, now).put(h, key, value, expire_at);
}

#[test]
fn insert_get_remove_keep_memory_accounting_exact() {
    let store = Store::new();
    put(&store, b"k", b"value", 0, 1000);
    assert_eq!(store.used_memory(), BASE_MEMORY + 1 + 5 + ENTRY_OVERHEAD);
    let h = store.hash(b"k");
    let mut s = store.lock(h, 1000);
    assert_eq!(
        s.get(h, b"k").map(|e| e.value().to_vec()),
        Some(b"value".to_vec())
    );
    s.update(h, b"k", |e| e.append(&[0; 100]));
    drop(s);
    assert!(store.used_memory() >= BASE_MEMORY + 106 + ENTRY_OVERHEAD);
    store.lock(h, 1000).remove(h, b"k");
    assert_eq!(store.used_memory(), BASE_MEMORY);
}

#[test]
fn overwriting_reuses_the_entry_and_keeps_accounting_exact() {
    let store = Store::new();
    let h = store.hash(b"k");
    for (len, ttl) in [(100, 0), (100, 5000), (10, 0), (1000, 9000), (1000, 0)] {
        put(&store, b"k", &vec![b'v'; len], ttl, 1000);
        assert_eq!(store.used_memory(), BASE_MEMORY + 1 + len + ENTRY_OVERHEAD);
        let mut s = store.lock(h, 1000);
        assert_eq!(s.get(h, b"k").unwrap().value(), &vec![b'v'; len][..]);
        assert_eq!(s.get(h, b"k").unwrap().expire_at, ttl);
        assert_eq!(s.shard.expires, (ttl != 0) as usize);
        assert_eq!(s.len(), 1);
    }
    // An expired entry is replaced by a fresh one, not revived.
    put(&store, b"k", b"old", 1500, 1000);
    put(&store, b"k", b"new", 0, 2000);
    let mut s = store.lock(h, 2000);
    assert_eq!(s.get(h, b"k").unwrap().value(), b"new");
    assert_eq!(s.shard.expires, 0);
}

#[test]
fn expired_entries_are_absent_and_removed_on_access() {
    let store = Store::new();
    put(&store, b"gone", b"v", 1500, 1000);
    put(&store, b"kept", b"v", 5000, 1000);
    let now = 2000;
    let (hg, hk) = (store.hash(b"gone"), store.hash(b"kept"));
    assert!(store.lock(hg, now).get(hg, b"gone").is_none());
    assert!(store.lock(hk, now).get(hk, b"kept").is_some());
    assert_eq!(store.counts(), (1, 1));
    assert_eq!(store.counters.expired_keys.load(Relaxed), 1);
}

#[test]
fn hash_spreads_keys_over_all_shards() {
    let store = Store::new();
    let mut seen = [0usize; SHARDS];
    for i in 0..64_000 {
        seen[Store::shard_of(store.hash(format!("key:{i}").as_bytes()))] += 1;
    }
    assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
}

#[test]
fn flush_empties_every_shard() {
    let store = Store::new();
    for i in 0..1000 {
        put(&store, format!("k{i}").as_bytes(), b"v", 0, 1);
    }
    assert_eq!(store.counts().0, 1000);
    drop(store.flush());
    assert_eq!(store.counts(), (0, 0));
    assert_eq!(store.used_memory(), BASE_MEMORY);
}
