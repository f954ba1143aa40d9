//! Fuzzing as properties, run by `cargo test` with bounded case counts: the
//! request decoder, reply framing (against redis-protocol's decoders) and the
//! config parser take arbitrary input without panicking and agree with
//! their specifications on generated valid input. (The glob's properties live
//! beside it, in `src/glob/tests.rs`.)

use bytes::BytesMut;
use proptest::prelude::*;

use shardis::proxy::config::Config;
use shardis::resp::{decode_request, next_frame, reply_len, Frame, Limits, Spans};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------- requests

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        proptest::collection::vec(proptest::sample::select(&b"ab \r\n\"'\\$*1"[..]), 0..8),
    ]
}

fn multibulk(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Requests, each a list of arguments.
type Decoded = Vec<Vec<Vec<u8>>>;

/// Decodes every request in `input` with both decoders (they must agree);
/// also returns how many bytes the copying decoder left unconsumed.
fn decode_all(input: &[u8]) -> Result<(Decoded, usize), String> {
    let limits = Limits::default();
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    while let Some(req) = decode_request(&mut buf, &limits).map_err(|e| format!("{e:?}"))? {
        out.push(req.args.iter().map(|a| a.to_vec()).collect());
    }
    // The in-place parser, consuming as a server does.
    let mut rest = input.to_vec();
    let mut spans = Spans::new();
    let mut again: Decoded = Vec::new();
    while let Some(f) = next_frame(&rest, &limits, &mut spans).map_err(|e| format!("{e:?}"))? {
        let len = match f {
            Frame::Spans { len } => {
                if !spans.is_empty() {
                    again.push(spans.iter().map(|&(s, e)| rest[s..e].to_vec()).collect());
                }
                len
            }
            Frame::Inline { len, args } => {
                again.push(args);
                len
            }
        };
        rest.drain(..len);
    }
    assert_eq!(again, out, "next_frame and decode_request disagree");
    Ok((out, buf.len()))
}

proptest! {
    #![proptest_config(config(300))]

    /// A valid request decodes to its arguments; every proper prefix of it
    /// is "need more" (nothing consumed); a second request behind it is
    /// left for the next call.
    #[test]
    fn a_valid_request_cut_anywhere_waits_then_decodes_the_same(
        args in proptest::collection::vec(arg(), 1..6),
        next in proptest::collection::vec(arg(), 1..3),
    ) {
        let wire = multibulk(&args);
        for cut in 0..wire.len() {
            let (got, left) = decode_all(&wire[..cut]).unwrap();
            prop_assert!(got.is_empty(), "cut {cut} decoded {got:?}");
            prop_assert_eq!(left, cut, "cut {} consumed bytes", cut);
        }
        let mut two = wire.clone();
        two.extend_from_slice(&multibulk(&next));
        let (got, left) = decode_all(&two).unwrap();
        prop_assert_eq!(got, vec![args, next]);
        prop_assert_eq!(left, 0);
    }

    /// Inline requests (what telnet sends) decode to their words, cut or whole.
    #[test]
    fn an_inline_request_cut_anywhere_waits_then_decodes_the_same(
        words in proptest::collection::vec("[a-zA-Z0-9:_{}-]{1,12}", 1..6),
    ) {
        let wire = format!("{}\r\n", words.join(" ")).into_bytes();
        for cut in 0..wire.len() {
            let (got, _) = decode_all(&wire[..cut]).unwrap();
            prop_assert!(got.is_empty(), "cut {cut} decoded {got:?}");
        }
        let want: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        prop_assert_eq!(decode_all(&wire).unwrap().0, vec![want]);
    }

    /// Arbitrary bytes, and bytes near the protocol's alphabet, never panic
    /// either decoder (an error is fine).
    #[test]
    fn arbitrary_bytes_never_panic_the_request_decoders(
        data in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..512),
            proptest::collection::vec(proptest::sample::select(&b"*$\r\n0123-9 \"'\\x"[..]), 0..256),
        ]
    ) {
        let _ = decode_all(&data);
    }
}

// ----------------------------------------------------------------- replies

/// A RESP2 or RESP3 reply (no attributes) as bytes.
fn reply() -> impl Strategy<Value = Vec<u8>> {
    let simple = "[ -~&&[^\r\n]]{0,12}";
    let leaf = prop_oneof![
        simple.prop_map(|s| format!("+{s}\r\n").into_bytes()),
        simple.prop_map(|s| format!("-ERR {s}\r\n").into_bytes()),
        any::<i64>().prop_map(|n| format!(":{n}\r\n").into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(|b| bulk('$', &b)),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(|b| bulk('!', &b)),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(|b| {
            let mut v = b"txt:".to_vec();
            v.extend_from_slice(&b);
            bulk('=', &v)
        }),
        Just(b"_\r\n".to_vec()),
        Just(b"#t\r\n".to_vec()),
        Just(b"#f\r\n".to_vec()),
        prop_oneof![
            Just("3.14"),
            Just("-1"),
            Just("inf"),
            Just("-inf"),
            Just("1e10")
        ]
        .prop_map(|d| format!(",{d}\r\n").into_bytes()),
        "-?[1-9][0-9]{0,40}".prop_map(|n| format!("({n}\r\n").into_bytes()),
    ];
    // Sets and maps hold only what redis-protocol can hash (strings and
    // integers); arrays and pushes hold anything.
    let hashable = prop_oneof![
        "[a-z]{0,6}".prop_map(|s| format!("+{s}\r\n").into_bytes()),
        any::<i64>().prop_map(|n| format!(":{n}\r\n").into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(|b| bulk('$', &b)),
    ];
    let flat = (
        proptest::sample::select(&['~', '%'][..]),
        proptest::collection::vec(hashable, 0..6),
    )
        .prop_map(|(kind, items)| aggregate(kind, &items));
    leaf.prop_recursive(4, 32, 4, move |inner| {
        prop_oneof![
            (
                proptest::sample::select(&['*', '>'][..]),
                proptest::collection::vec(inner, 0..4),
            )
                .prop_map(|(kind, items)| aggregate(kind, &items)),
            flat.clone(),
        ]
    })
}

/// `kind` with a count, then the items (pairs for a map, an odd one dropped).
fn aggregate(kind: char, items: &[Vec<u8>]) -> Vec<u8> {
    let n = if kind == '%' {
        items.len() / 2
    } else {
        items.len()
    };
    let mut out = format!("{kind}{n}\r\n").into_bytes();
    for it in items.iter().take(if kind == '%' { n * 2 } else { n }) {
        out.extend_from_slice(it);
    }
    out
}

fn bulk(kind: char, b: &[u8]) -> Vec<u8> {
    let mut out = format!("{kind}{}\r\n", b.len()).into_bytes();
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
    out
}

proptest! {
    #![proptest_config(config(400))]

    /// The framer finds exactly the end of any reply: whole, padded with the
    /// next one, and "need more" when cut anywhere; redis-protocol's RESP3
    /// decoder ends the frame at the same byte.
    #[test]
    fn reply_ends_agree_with_redis_protocol(r in reply()) {
        prop_assert_eq!(reply_len(&r).unwrap(), Some(r.len()));
        let mut padded = r.clone();
        padded.extend_from_slice(b"+NEXT\r\n");
        prop_assert_eq!(reply_len(&padded).unwrap(), Some(r.len()));
        for cut in 0..r.len() {
            prop_assert_eq!(reply_len(&r[..cut]).unwrap(), None, "cut {}", cut);
        }
        let mut buf = BytesMut::from(&padded[..]);
        let theirs = redis_protocol::resp3::decode::complete::decode_bytes_mut(&mut buf);
        match theirs {
            Ok(Some((_, consumed, _))) => prop_assert_eq!(consumed, r.len()),
            other => prop_assert!(false, "redis-protocol did not decode {:?}: {:?}",
                String::from_utf8_lossy(&r), other.map(|o| o.map(|(_, n, _)| n))),
        }
    }

    /// RESP2 replies (with RESP2's null bulk and null array) against
    /// redis-protocol's RESP2 decoder.
    #[test]
    fn resp2_reply_ends_agree_with_redis_protocol(
        items in proptest::collection::vec(prop_oneof![
            Just(b"$-1\r\n".to_vec()),
            Just(b"*-1\r\n".to_vec()),
            any::<i64>().prop_map(|n| format!(":{n}\r\n").into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(|b| bulk('$', &b)),
        ], 0..5)
    ) {
        let mut r = format!("*{}\r\n", items.len()).into_bytes();
        items.iter().for_each(|i| r.extend_from_slice(i));
        prop_assert_eq!(reply_len(&r).unwrap(), Some(r.len()));
        let mut buf = BytesMut::from(&r[..]);
        buf.extend_from_slice(b"+NEXT\r\n");
        let theirs = redis_protocol::resp2::decode::decode_bytes_mut(&mut buf);
        prop_assert!(matches!(theirs, Ok(Some((_, n, _))) if n == r.len()), "{:?}", theirs.map(|o| o.map(|(_, n, _)| n)));
    }

    /// Arbitrary bytes never panic the framer; where both it and
    /// redis-protocol find a complete frame, they find the same end.
    #[test]
    fn arbitrary_bytes_never_panic_the_reply_framer(
        data in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..256),
            proptest::collection::vec(proptest::sample::select(&b"*$%~>|_#,(!=+-:\r\n0123t-"[..]), 0..128),
        ]
    ) {
        let ours = reply_len(&data);
        let mut buf = BytesMut::from(&data[..]);
        if let (Ok(Some(n)), Ok(Some((_, m, _)))) =
            (&ours, redis_protocol::resp3::decode::complete::decode_bytes_mut(&mut buf))
        {
            // Attributes (`|`) are frames of their own to redis-protocol.
            if !data.contains(&b'|') {
                prop_assert_eq!(*n, m);
            }
        }
    }
}

// ------------------------------------------------------------------ config

/// TOML-ish text: section headers, known and unknown keys, values of every
/// type (and broken ones), in any order.
fn toml_ish() -> impl Strategy<Value = String> {
    let header = proptest::sample::select(
        &[
            "[proxy]",
            "[ring]",
            "[migration]",
            "[up]",
            "[[nodes]]",
            "[bogus]",
            "[proxy",
            "[[nodes]",
            "",
        ][..],
    );
    let key = proptest::sample::select(
        &[
            "listen",
            "connect_timeout_ms",
            "request_timeout_ms",
            "max_clients",
            "pipeline_depth",
            "connections_per_node",
            "threads",
            "max_bulk_len",
            "max_args",
            "max_query_buffer",
            "state_file",
            "points",
            "vnodes",
            "batch",
            "max_keys_per_sec",
            "copy_rate",
            "timeout_ms",
            "nodes",
            "first_node_port",
            "addr",
            "name",
            "weight",
            "bogus",
            "a.b",
            "\"quoted\"",
        ][..],
    );
    let value = proptest::sample::select(
        &[
            "0",
            "1",
            "-1",
            "99999999999999999999",
            "7001",
            "\"127.0.0.1:7001\"",
            "\"x\"",
            "\"\"",
            "\"a b\"",
            "\"ketama\"",
            "\"vnode\"",
            "true",
            "[]",
            "[1, 2]",
            "{}",
            "1.5",
            "\"unterminated",
            "",
            "=",
            "'lit'",
        ][..],
    );
    let line = prop_oneof![
        header.prop_map(String::from),
        (key, value).prop_map(|(k, v)| format!("{k} = {v}")),
        "[ -~]{0,12}",
    ];
    proptest::collection::vec(line, 0..10).prop_map(|lines| lines.join("\n"))
}

/// A field path the error names: `section.key`, `nodes[i].key`, `nodes:`,
/// or, for a syntax error, the line.
fn names_a_field_or_line(e: &str) -> bool {
    ["proxy.", "ring.", "migration.", "up.", "nodes", "line "]
        .iter()
        .any(|f| e.contains(f))
}

proptest! {
    #![proptest_config(config(400))]

    /// Any text: loading never panics; an error is one line that starts with
    /// the file's path and names the field (or the line) at fault.
    #[test]
    fn config_errors_name_the_file_and_the_field(text in toml_ish()) {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("shardis-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fuzz.toml");
        std::fs::write(&path, &text).unwrap();
        let result = Config::load(&path);
        let _ = std::fs::remove_file(&path);
        if let Err(e) = result {
            let prefix = format!("{}: ", path.display());
            prop_assert!(e.starts_with(&prefix), "{text:?} -> {e}");
            prop_assert!(!e.contains('\n'), "{text:?} -> {e}");
            prop_assert!(names_a_field_or_line(&e[prefix.len()..]), "{text:?} -> {e}");
        }
    }
}

// ------------------------------------------------------------ the process

mod common;

/// Arbitrary bytes from many clients never panic the proxy (over built-in
/// nodes): each client gets replies or a protocol error and a close, and the
/// proxy keeps serving everyone else.
#[test]
fn arbitrary_bytes_over_tcp_never_panic_the_proxy() {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};
    use std::time::Duration;

    let cluster = common::Cluster::builtin(2);
    let port = cluster.proxy.port;
    // Requests for random rows of the command table with random arguments,
    // pipelined, sometimes with one byte changed: the routing paths with
    // argument counts and values nobody planned (CLUSTER, which can change
    // the topology, left out).
    let names: Vec<&str> = shardis::resp::command::TABLE
        .iter()
        .map(|s| s.name)
        .filter(|n| *n != "cluster")
        .collect();
    let request = (
        proptest::sample::select(names),
        proptest::collection::vec(
            proptest::sample::select(
                &[
                    "k",
                    "{t}a",
                    "{t}b",
                    "0",
                    "1",
                    "-1",
                    "",
                    "*?[",
                    "99999999999999999999",
                    "help",
                    "x y",
                ][..],
            ),
            0..6,
        ),
    )
        .prop_map(|(name, args)| {
            let mut a: Vec<Vec<u8>> = vec![name.as_bytes().to_vec()];
            a.extend(args.iter().map(|s| s.as_bytes().to_vec()));
            multibulk(&a)
        });
    let pipeline = (
        proptest::collection::vec(request, 1..8),
        proptest::option::of((any::<proptest::sample::Index>(), any::<u8>())),
    )
        .prop_map(|(reqs, corrupt)| {
            let mut wire = reqs.concat();
            if let Some((at, b)) = corrupt {
                let i = at.index(wire.len());
                wire[i] = b;
            }
            wire
        });
    let bytes = prop_oneof![
        pipeline,
        proptest::collection::vec(any::<u8>(), 0..256),
        proptest::collection::vec(
            proptest::sample::select(&b"*$\r\n0123456789-+: \"'\\xabGETSETPING{}"[..]),
            0..256,
        ),
    ];
    let mut runner = proptest::test_runner::TestRunner::new(config(300));
    let cases = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&bytes, |data| {
            let n = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            // The proxy may close first (a protocol error): writes can fail.
            let _ = s.write_all(&data);
            let _ = s.shutdown(Shutdown::Write);
            // On end of input it sends what it owes, then closes: read to the end.
            let mut out = Vec::new();
            let r = s.read_to_end(&mut out);
            prop_assert!(
                !matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut),
                "no close within 10 s after {:?}",
                String::from_utf8_lossy(&data)
            );
            if n.is_multiple_of(25) {
                let mut p =
                    common::RespConn::connect_loopback(port, Duration::from_secs(10)).unwrap();
                use common::RespCmd;
                prop_assert_eq!(p.cmd(&["PING"]), b"+PONG\r\n".to_vec());
                cluster.proxy.assert_no_panic();
            }
            Ok(())
        })
        .unwrap();
    cluster.proxy.assert_no_panic();
}
