//! RESP hot-path benchmarks: `cargo bench --bench resp`.
//!
//! Every request the proxy serves is decoded once ([`decode_request`]), looked
//! up once in the command table ([`lookup`]), and every reply from a node is
//! framed once ([`reply_len`]) before it is forwarded unchanged. These are the
//! per-request costs of the proxy outside the network, for GET, SET of 100 B
//! and MSET of 100 keys.
//!
//! `arrival in 64 KB reads`: a large request or reply arriving in 64 KB
//! pieces, framed after every piece as the session and the upstream reader
//! do. `from scratch` re-parses from byte 0 on each read (the decoder and
//! framer before they kept their place); `resumed` is [`RequestDecoder`] /
//! [`ReplyFramer`]. One value of 64 MB or 512 MB, and many small elements
//! (an MSET / an array reply) of 4 MB and 16 MB.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use shardis::proxy::policy::lookup;
use shardis::resp::reply::ReplyFramer;
use shardis::resp::{decode_request, encode, reply_len, Limits, RequestDecoder};

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

const PIECE: usize = 64 * 1024;
const MB: usize = 1024 * 1024;

/// `SET k <len bytes>` as one request.
fn big_set(len: usize) -> Vec<u8> {
    let value = vec![b'v'; len];
    frame(&[b"SET", b"k", &value])
}

/// An MSET of about `len` bytes, in 64-byte key/value pairs.
fn many_arg_mset(len: usize) -> Vec<u8> {
    let pairs = len / 64;
    let keys: Vec<Vec<u8>> = (0..pairs)
        .map(|i| format!("key:{i:020}").into_bytes())
        .collect();
    let value = [b'v'; 20];
    let mut args: Vec<&[u8]> = vec![b"MSET"];
    for k in &keys {
        args.push(k);
        args.push(&value);
    }
    frame(&args)
}

/// A bulk reply of `len` bytes.
fn big_bulk(len: usize) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(len + 32);
    encode::bulk(&mut out, &vec![b'v'; len]);
    out.to_vec()
}

/// An array reply of about `len` bytes, in 64-byte elements.
fn many_element_array(len: usize) -> Vec<u8> {
    let n = len / 64;
    let mut out = BytesMut::with_capacity(len + 32);
    encode::array_len(&mut out, n);
    for _ in 0..n {
        encode::bulk(&mut out, &[b'e'; 57]);
    }
    out.to_vec()
}

/// Feeds `bytes` to `frame_step` in 64 KB pieces; `frame_step` returns
/// true once the whole request or reply was framed.
fn arrive(bytes: &[u8], mut frame_step: impl FnMut(&mut BytesMut) -> bool) {
    let mut buf = BytesMut::with_capacity(PIECE);
    for piece in bytes.chunks(PIECE) {
        buf.extend_from_slice(piece);
        if frame_step(&mut buf) {
            return;
        }
    }
    panic!("never framed");
}

fn arrival(c: &mut Criterion) {
    let limits = Limits::default();
    let mut g = c.benchmark_group("arrival in 64 KB reads");
    g.sample_size(10);
    let cases: Vec<(String, Vec<u8>, Vec<u8>)> = vec![
        (
            "one 64 MB value".into(),
            big_set(64 * MB),
            big_bulk(64 * MB),
        ),
        (
            "one 512 MB value".into(),
            big_set(512 * MB),
            big_bulk(512 * MB),
        ),
        (
            "4 MB of 64 B elements".into(),
            many_arg_mset(4 * MB),
            many_element_array(4 * MB),
        ),
        (
            "16 MB of 64 B elements".into(),
            many_arg_mset(16 * MB),
            many_element_array(16 * MB),
        ),
    ];
    for (name, request, reply) in &cases {
        g.throughput(Throughput::Bytes(request.len() as u64));
        g.bench_function(format!("request from scratch, {name}"), |b| {
            b.iter(|| {
                arrive(request, |buf| {
                    decode_request(buf, &limits).expect("valid").is_some()
                })
            })
        });
        g.bench_function(format!("request resumed, {name}"), |b| {
            b.iter(|| {
                let mut d = RequestDecoder::new(limits);
                arrive(request, |buf| d.decode(buf).expect("valid").is_some())
            })
        });
        g.throughput(Throughput::Bytes(reply.len() as u64));
        g.bench_function(format!("reply from scratch, {name}"), |b| {
            b.iter(|| arrive(reply, |buf| reply_len(buf).expect("valid").is_some()))
        });
        g.bench_function(format!("reply resumed, {name}"), |b| {
            b.iter(|| {
                let mut f = ReplyFramer::new(limits.max_bulk_len);
                arrive(reply, |buf| f.next(buf).expect("valid").is_some())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, decode, command_lookup, framing, arrival);
criterion_main!(benches);
