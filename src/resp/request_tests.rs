//! Tests of the request decoder: every case whole, padded and cut at every
//! byte; errors with Redis's text; resumed decoding against decoding at once.

use super::*;

fn decode_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    while let Some(req) = decode_request(&mut buf, &Limits::default())? {
        out.push(req.args.iter().map(|a| a.to_vec()).collect());
    }
    Ok(out)
}

/// Like `decode_all`, through `next_frame`, consuming as a server does.
fn frames_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
    let mut buf = input.to_vec();
    let mut spans = Spans::new();
    let mut out = Vec::new();
    while let Some(frame) = next_frame(&buf, &Limits::default(), &mut spans)? {
        let len = match frame {
            Frame::Spans { len } => {
                if !spans.is_empty() {
                    out.push(spans.iter().map(|&(s, e)| buf[s..e].to_vec()).collect());
                }
                len
            }
            Frame::Inline { len, args } => {
                out.push(args);
                len
            }
        };
        buf.drain(..len);
    }
    Ok(out)
}

fn v(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

#[test]
fn decodes_valid_requests_whole_padded_and_cut_at_every_byte() {
    type Case<'a> = (&'a [u8], Vec<Vec<Vec<u8>>>);
    let cases: &[Case] = &[
        (b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", vec![v(&["GET", "k"])]),
        (b"*1\r\n$0\r\n\r\n", vec![v(&[""])]),
        (
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n",
            vec![v(&["SET", "k", "a\r\nb"])],
        ),
        (b"PING\r\n", vec![v(&["PING"])]),
        (b"set k \"a b\"\n", vec![v(&["set", "k", "a b"])]),
        (
            b"echo \"\\x41\\n\" 'it\\'s'\r\n",
            vec![vec![b"echo".to_vec(), b"A\n".to_vec(), b"it's".to_vec()]],
        ),
        (b"\r\n\n  \r\nPING\r\n", vec![v(&["PING"])]),
        (b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", vec![v(&["PING"])]),
    ];
    for (input, want) in cases {
        assert_eq!(
            &decode_all(input).unwrap(),
            want,
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert_eq!(&frames_all(input).unwrap(), want);
        // Empty requests, then an incomplete one: nothing to execute yet.
        let mut cut = b"*0\r\n\r\n".to_vec();
        cut.extend_from_slice(&input[..input.len() - 1]);
        assert_eq!(frames_all(&cut).unwrap(), Vec::<Vec<Vec<u8>>>::new());
        // Trailing bytes of a following request must not change the first.
        let mut padded = input.to_vec();
        padded.extend_from_slice(b"*1\r\n$4\r\nPI");
        assert_eq!(&decode_all(&padded).unwrap(), want);
        assert_eq!(&frames_all(&padded).unwrap(), want);
        // Cut at every byte: nothing until complete, then exactly the requests.
        for cut in 0..input.len() {
            let mut buf = BytesMut::from(&input[..cut]);
            let mut got = Vec::new();
            while let Some(req) = decode_request(&mut buf, &Limits::default()).unwrap() {
                got.push(req.args.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            }
            buf.extend_from_slice(&input[cut..]);
            while let Some(req) = decode_request(&mut buf, &Limits::default()).unwrap() {
                got.push(req.args.iter().map(|a| a.to_vec()).collect());
            }
            assert_eq!(&got, want, "cut at {cut}");
            assert!(buf.is_empty());
        }
    }
}

/// Feeds `input` to one decoder in pieces cut at `cuts`, decoding after
/// every piece as a session does after every read.
fn decode_in_pieces(
    input: &[u8],
    cuts: &[usize],
    limits: Limits,
) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
    let mut decoder = RequestDecoder::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(fed, input.len());
        buf.extend_from_slice(&input[fed..cut]);
        fed = cut;
        while let Some(req) = decoder.decode(&mut buf)? {
            out.push(req.args.iter().map(|a| a.to_vec()).collect());
        }
    }
    Ok(out)
}

#[test]
fn a_resumed_decoder_agrees_at_every_split_and_byte_by_byte() {
    let mut big = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000\r\n".to_vec();
    big.extend(vec![b'v'; 1000]);
    big.extend_from_slice(b"\r\nPING\r\n*0\r\n*2\r\n$4\r\nECHO\r\n$2\r\n\r\n\r\n");
    let want = decode_all(&big).unwrap();
    assert_eq!(want.len(), 3);
    for cut in 0..big.len() {
        assert_eq!(
            decode_in_pieces(&big, &[cut], Limits::default()).unwrap(),
            want,
            "cut {cut}"
        );
    }
    let every: Vec<usize> = (0..big.len()).collect();
    assert_eq!(
        decode_in_pieces(&big, &every, Limits::default()).unwrap(),
        want
    );
}

#[test]
fn multibulk_raw_is_the_exact_input_and_args_slice_it() {
    let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    let mut buf = BytesMut::from(&input[..]);
    let req = decode_request(&mut buf, &Limits::default())
        .unwrap()
        .unwrap();
    assert_eq!(&req.raw[..], &input[..]);
    let base = req.raw.as_ptr() as usize;
    let p = req.args[1].as_ptr() as usize;
    assert!(p >= base && p < base + req.raw.len(), "zero-copy slice");
}

#[test]
fn inline_requests_are_reencoded_as_multibulk() {
    let mut buf = BytesMut::from(&b"GET k\r\n"[..]);
    let req = decode_request(&mut buf, &Limits::default())
        .unwrap()
        .unwrap();
    assert_eq!(&req.raw[..], b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
}

#[test]
fn malformed_requests_get_redis_errors() {
    let cases: &[(&[u8], &str)] = &[
        (b"*x\r\n", "Protocol error: invalid multibulk length"),
        (
            b"*3000000000\r\n",
            "Protocol error: invalid multibulk length",
        ),
        (
            b"*2147483647\r\n",
            "Protocol error: invalid multibulk length",
        ),
        (b"*1\r\nGET\r\n", "Protocol error: expected '$', got 'G'"),
        (b"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"),
        (b"*1\r\n$abc\r\n", "Protocol error: invalid bulk length"),
        (
            b"*1\r\n$600000000\r\n",
            "Protocol error: invalid bulk length",
        ),
        (
            b"*1\r\n$3\r\nGETxx",
            "Protocol error: bulk string not terminated by CRLF",
        ),
        (
            b"SET k \"abc\r\n",
            "Protocol error: unbalanced quotes in request",
        ),
        (
            b"SET k \"abc\"x\r\n",
            "Protocol error: unbalanced quotes in request",
        ),
        (
            b"SET k 'abc\r\n",
            "Protocol error: unbalanced quotes in request",
        ),
    ];
    for (input, want) in cases {
        let mut buf = BytesMut::from(*input);
        let err = decode_request(&mut buf, &Limits::default()).unwrap_err();
        assert_eq!(frames_all(input).unwrap_err(), err);
        assert_eq!(
            err.to_string(),
            *want,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn oversized_lines_are_refused_before_buffering_more() {
    let limits = Limits::default();
    let mut buf = BytesMut::from(&vec![b'a'; 70_000][..]);
    assert_eq!(
        decode_request(&mut buf, &limits).unwrap_err(),
        ProtocolError::TooBigInline
    );
    let mut big = b"*".to_vec();
    big.extend(vec![b'1'; 70_000]);
    let mut buf = BytesMut::from(&big[..]);
    assert_eq!(
        decode_request(&mut buf, &limits).unwrap_err(),
        ProtocolError::TooBigMultibulkCount
    );
    let small = Limits {
        max_args: 2,
        ..limits
    };
    let mut buf = BytesMut::from(&b"*3\r\n"[..]);
    assert_eq!(
        decode_request(&mut buf, &small).unwrap_err(),
        ProtocolError::InvalidMultibulkLength
    );
    let tiny_buffer = Limits {
        max_query_buffer: 16,
        ..limits
    };
    let mut buf = BytesMut::from(&b"*1\r\n$100\r\n0123456789abcdef0123"[..]);
    assert_eq!(
        decode_request(&mut buf, &tiny_buffer).unwrap_err(),
        ProtocolError::QueryBufferFull
    );
}

proptest::proptest! {
    #[test]
    fn decoder_never_panics_on_arbitrary_bytes(data in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
        let mut buf = BytesMut::from(&data[..]);
        let limits = Limits { max_bulk_len: 1 << 20, ..Limits::default() };
        while let Ok(Some(_)) = decode_request(&mut buf, &limits) {}
    }

    /// The in-place parser never panics and executes exactly what the
    /// copying decoder returns, with the same error at the same point.
    #[test]
    fn next_frame_agrees_with_decode_request(data in proptest::collection::vec(
        proptest::prop_oneof![
            proptest::strategy::Just(b'*'), proptest::strategy::Just(b'$'),
            proptest::strategy::Just(b'\r'), proptest::strategy::Just(b'\n'),
            proptest::strategy::Just(b'1'), proptest::strategy::Just(b'2'),
            proptest::strategy::Just(b' '), proptest::strategy::Just(b'"'),
            proptest::num::u8::ANY,
        ], 0..128)) {
        let limits = Limits { max_bulk_len: 1 << 20, max_query_buffer: 64, ..Limits::default() };
        let mut buf = BytesMut::from(&data[..]);
        let mut want = Vec::new();
        let want_end = loop {
            match decode_request(&mut buf, &limits) {
                Ok(Some(req)) => want.push(req.args.iter().map(|a| a.to_vec()).collect::<Vec<_>>()),
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        let mut rest = data.clone();
        let mut spans = Spans::new();
        let mut got = Vec::new();
        let got_end = loop {
            match next_frame(&rest, &limits, &mut spans) {
                Ok(Some(Frame::Spans { len })) => {
                    if !spans.is_empty() {
                        got.push(spans.iter().map(|&(s, e)| rest[s..e].to_vec()).collect());
                    }
                    rest.drain(..len);
                }
                Ok(Some(Frame::Inline { len, args })) => {
                    got.push(args);
                    rest.drain(..len);
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        proptest::prop_assert_eq!(got, want);
        proptest::prop_assert_eq!(got_end, want_end);
    }

    /// Decoding in pieces, resuming between them, gives the same
    /// requests and the same error as decoding all the bytes at once.
    #[test]
    fn resumed_decoding_in_pieces_equals_decoding_at_once(
        data in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just(b'*'), proptest::strategy::Just(b'$'),
                proptest::strategy::Just(b'\r'), proptest::strategy::Just(b'\n'),
                proptest::strategy::Just(b'1'), proptest::strategy::Just(b'2'),
                proptest::strategy::Just(b' '), proptest::strategy::Just(b'"'),
                proptest::num::u8::ANY,
            ], 0..128),
        cuts in proptest::collection::vec(0usize..128, 0..10),
    ) {
        let limits = Limits { max_bulk_len: 1 << 20, ..Limits::default() };
        let mut cuts = cuts;
        cuts.sort_unstable();
        let at_once = decode_in_pieces(&data, &[], limits);
        let in_pieces = decode_in_pieces(&data, &cuts, limits);
        proptest::prop_assert_eq!(in_pieces, at_once);
    }

    /// Well-formed pipelines cut anywhere decode to the same requests.
    #[test]
    fn resumed_decoding_of_valid_pipelines(
        reqs in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 1..5),
            1..5),
        cuts in proptest::collection::vec(0usize..600, 0..16),
    ) {
        let mut input = Vec::new();
        for r in &reqs {
            let refs: Vec<&[u8]> = r.iter().map(|a| a.as_slice()).collect();
            let mut b = BytesMut::new();
            encode::command(&mut b, &refs);
            input.extend_from_slice(&b);
        }
        let mut cuts = cuts;
        cuts.sort_unstable();
        proptest::prop_assert_eq!(decode_in_pieces(&input, &cuts, Limits::default()).unwrap(), reqs);
    }

    #[test]
    fn encoded_commands_round_trip(args in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..20), 1..6)) {
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let req = Request::from_args(&refs);
        let got: Vec<Vec<u8>> = req.args.iter().map(|a| a.to_vec()).collect();
        proptest::prop_assert_eq!(got, args);
    }
}
