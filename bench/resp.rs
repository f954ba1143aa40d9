//! RESP hot-path benchmarks: `cargo bench --bench resp`.
//!
//! Every request the proxy serves is decoded once ([`decode_request`]), looked
//! up once in the command table ([`lookup`]), and every reply from a node is
//! framed once ([`reply_len`]) before it is forwarded unchanged. These are the
//! per-request costs of the proxy outside the network, for GET, SET of 100 B
//! and MSET of 100 keys.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use shardis::resp::{decode_request, encode, lookup, reply_len, Limits};

/// A multibulk request of `args`.
fn frame(args: &[&[u8]]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode::command(&mut out, args);
    out.to_vec()
}

fn keys(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("user:{}", 100_000 + i * 7919).into_bytes())
        .collect()
}

fn requests() -> Vec<(&'static str, Vec<u8>)> {
    let value = vec![b'v'; 100];
    let ks = keys(100);
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for k in &ks {
        mset.push(k);
        mset.push(&value);
    }
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(ks.iter().map(|k| k.as_slice()));
    vec![
        ("GET", frame(&[b"GET", b"user:1000042"])),
        ("SET 100B", frame(&[b"SET", b"user:1000042", &value])),
        ("MGET-100", frame(&mget)),
        ("MSET-100 100B", frame(&mset)),
    ]
}

fn decode(c: &mut Criterion) {
    let limits = Limits::default();
    let mut g = c.benchmark_group("decode_request");
    for (name, bytes) in requests() {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || BytesMut::from(&bytes[..]),
                |buf| {
                    black_box(
                        decode_request(buf, &limits)
                            .expect("valid")
                            .expect("complete"),
                    )
                },
                BatchSize::SmallInput,
            )
        });
    }
    // A pipelined read of 16 GETs, decoded one after the other as a session does.
    let get = frame(&[b"GET", b"user:1000042"]);
    let pipeline: Vec<u8> = get.iter().copied().cycle().take(get.len() * 16).collect();
    g.throughput(Throughput::Elements(16));
    g.bench_function("16 pipelined GETs", |b| {
        b.iter_batched_ref(
            || BytesMut::from(&pipeline[..]),
            |buf| {
                while let Some(r) = decode_request(buf, &limits).expect("valid") {
                    black_box(r);
                }
            },
            BatchSize::SmallInput,
        )
    });
    // Arrival cut in two: the first call finds an incomplete frame.
    let (name, mset) = &requests()[3];
    g.throughput(Throughput::Bytes(mset.len() as u64));
    g.bench_function(format!("{name}, incomplete then complete"), |b| {
        b.iter_batched_ref(
            || BytesMut::from(&mset[..mset.len() / 2]),
            |buf| {
                assert!(decode_request(buf, &limits).expect("valid").is_none());
                buf.extend_from_slice(&mset[mset.len() / 2..]);
                black_box(
                    decode_request(buf, &limits)
                        .expect("valid")
                        .expect("complete"),
                )
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn command_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("lookup");
    for name in [
        &b"GET"[..],
        b"get",
        b"MSET",
        b"ZRANGEBYSCORE",
        b"nosuchcommand",
    ] {
        g.bench_function(String::from_utf8_lossy(name).into_owned(), |b| {
            b.iter(|| black_box(lookup(black_box(name))))
        });
    }
    g.finish();
}

fn replies() -> Vec<(&'static str, Vec<u8>)> {
    let value = vec![b'v'; 100];
    let mut mget = BytesMut::new();
    encode::array_len(&mut mget, 100);
    for i in 0..100 {
        if i % 10 == 9 {
            mget.extend_from_slice(b"$-1\r\n");
        } else {
            encode::bulk(&mut mget, &value);
        }
    }
    let mut bulk = BytesMut::new();
    encode::bulk(&mut bulk, &value);
    vec![
        ("+OK", b"+OK\r\n".to_vec()),
        (":integer", b":1000042\r\n".to_vec()),
        ("bulk 100B", bulk.to_vec()),
        ("MGET-100 array", mget.to_vec()),
    ]
}

fn framing(c: &mut Criterion) {
    let mut g = c.benchmark_group("reply_len");
    for (name, bytes) in replies() {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| black_box(reply_len(black_box(&bytes)).expect("valid")))
        });
    }
    g.finish();
}

criterion_group!(benches, decode, command_lookup, framing);
criterion_main!(benches);
