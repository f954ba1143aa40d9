//! Settings: memory values and CONFIG SET's all-or-nothing validation.

use super::*;

#[test]
fn memory_values_parse_like_redis() {
    let cases: &[(&str, Option<u64>)] = &[
        ("0", Some(0)),
        ("100", Some(100)),
        ("1k", Some(1000)),
        ("1kb", Some(1024)),
        ("100mb", Some(104_857_600)),
        ("2GB", Some(2 << 30)),
        ("abc", None),
        ("-1", None),
        ("1tb", None),
    ];
    for &(s, want) in cases {
        assert_eq!(parse_memory(s.as_bytes()), want, "{s}");
    }
}

#[test]
fn set_validates_everything_before_changing_anything() {
    let s = Settings::new(0, 512 << 20, 7001);
    let err = s.set(&[(b"maxmemory", b"1mb"), (b"maxmemory-samples", b"0")]);
    assert_eq!(
        err,
        Err(SetError::FailedOwned(
            "maxmemory-samples".into(),
            "argument must be between 1 and 2147483647 inclusive".into()
        ))
    );
    assert_eq!(s.maxmemory.load(Relaxed), 0);
    s.set(&[
        (b"maxmemory", b"1mb"),
        (b"MAXMEMORY-POLICY", b"ALLKEYS-LFU"),
    ])
    .unwrap();
    assert_eq!(s.maxmemory.load(Relaxed), 1 << 20);
    assert_eq!(s.policy(), Policy::AllkeysLfu);
    assert_eq!(s.get(b"maxmemory-policy")[0].1, "allkeys-lfu");
    assert_eq!(s.get(b"hash-max-ziplist-entries")[0].1, "512");
    s.set(&[(b"hash-max-ziplist-value", b"1kb")]).unwrap();
    assert_eq!(s.int("hash-max-listpack-value"), Some(1024));
}
