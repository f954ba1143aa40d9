//! Pub/sub on the built-in node under load and misuse, over real TCP to a
//! `shardis node` process: a storm of subscribers each receiving every
//! matching message exactly once, subscribers that stop reading cut off at
//! the output buffer limits while PUBLISH keeps answering and the node's
//! memory stays bounded, and disconnected clients leaving every channel.
//! (Reply bytes are compared with redis-server in `node_vs_redis_pubsub.rs`.)

mod common;

use common::{free_port, rss_bytes, start_node, Raw, RespConn};
use std::collections::HashSet;
use std::io::Read;
use std::time::{Duration, Instant};

/// A connection that subscribes and then never reads: its receive buffer
/// is made small, so the node's buffers, not the kernel's, fill up.
fn silent_subscriber(port: u16, channel: &str) -> std::net::TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sock = rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.set_recv_buffer_size(4096).unwrap();
        let addr = format!("127.0.0.1:{port}").parse().unwrap();
        s.connect(addr).await.unwrap().into_std().unwrap()
    });
    sock.set_nonblocking(false).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut w = &sock;
    let req = format!(
        "*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{channel}\r\n",
        channel.len()
    );
    std::io::Write::write_all(&mut w, req.as_bytes()).unwrap();
    sock
}

/// Reads what the node sent until it closes the connection (bounded).
fn read_until_closed(mut sock: std::net::TcpStream) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = vec![0u8; 1 << 20];
    while Instant::now() < deadline {
        match sock.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
    false
}

fn numsub(c: &mut Raw, channel: &str) -> i64 {
    let r = c.call(&["PUBSUB", "NUMSUB", channel]);
    r.rsplit(':').next().unwrap().trim().parse().unwrap()
}

#[test]
fn a_subscriber_that_stops_reading_is_cut_off_at_the_hard_limit() {
    let node = start_node(free_port());
    let mut admin = Raw::connect(node.port);
    admin.check(
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 4mb 0 0",
        ],
        "+OK\r\n",
    );
    let slow = silent_subscriber(node.port, "feed");
    let deadline = Instant::now() + Duration::from_secs(10);
    while numsub(&mut admin, "feed") != 1 {
        assert!(Instant::now() < deadline, "the subscriber never subscribed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let base_rss = rss_bytes(node.child.id());
    let payload = "x".repeat(64 * 1024);
    let (mut max_rss, mut slowest) = (base_rss, Duration::ZERO);
    let mut cut_at = None;
    // 1 600 × 64 KB = 100 MB published at a subscriber that reads nothing.
    for i in 0..1600 {
        let t = Instant::now();
        let receivers = admin.int(&["PUBLISH", "feed", &payload]);
        slowest = slowest.max(t.elapsed());
        if receivers == 0 && cut_at.is_none() {
            cut_at = Some(i);
        }
        if i % 50 == 0 {
            max_rss = max_rss.max(rss_bytes(node.child.id()));
        }
    }
    max_rss = max_rss.max(rss_bytes(node.child.id()));
    let cut_at = cut_at.expect("the silent subscriber was never disconnected");
    println!(
        "cut off after {cut_at} messages ({} KB published); slowest PUBLISH {slowest:?}; \
         node RSS {} MB before, {} MB at most",
        cut_at * 64,
        base_rss >> 20,
        max_rss >> 20
    );
    // Published 100 MB; the node held at most the 4 MB limit plus one
    // write's worth and its allocator's slack.
    assert!(
        max_rss < base_rss + 40 * 1024 * 1024,
        "RSS grew from {base_rss} to {max_rss}"
    );
    // It was cut off, not slowed down: at most the limit plus the kernel's
    // buffers went out before the cut.
    assert!(cut_at < 400, "cut off only after {cut_at} messages");
    assert!(read_until_closed(slow), "the node kept the connection open");
    assert_eq!(numsub(&mut admin, "feed"), 0);
    // The node serves the next subscriber as usual.
    let mut sub = RespConn::connect_loopback(node.port, Duration::from_secs(10)).unwrap();
    sub.call_str(&["SUBSCRIBE", "feed"]).unwrap();
    assert_eq!(admin.int(&["PUBLISH", "feed", "hello"]), 1);
    assert_eq!(
        sub.read_reply().unwrap(),
        b"*3\r\n$7\r\nmessage\r\n$4\r\nfeed\r\n$5\r\nhello\r\n"
    );
}

#[test]
fn a_subscriber_over_the_soft_limit_for_its_period_is_cut_off() {
    let node = start_node(free_port());
    let mut admin = Raw::connect(node.port);
    // No hard limit: only the soft one (256 KB held for over 1 s) applies.
    admin.check(
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 0 256kb 1",
        ],
        "+OK\r\n",
    );
    let slow = silent_subscriber(node.port, "feed");
    let deadline = Instant::now() + Duration::from_secs(10);
    while numsub(&mut admin, "feed") != 1 {
        assert!(Instant::now() < deadline, "the subscriber never subscribed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let payload = "y".repeat(16 * 1024);
    let start = Instant::now();
    let mut cut = None;
    // At most 30 s at about 800 KB/s.
    while start.elapsed() < Duration::from_secs(30) {
        if admin.int(&["PUBLISH", "feed", &payload]) == 0 {
            cut = Some(start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let cut = cut.expect("the subscriber over the soft limit was never disconnected");
    println!("cut off after {cut:?}");
    assert!(cut > Duration::from_secs(1), "cut before the soft period");
    assert!(read_until_closed(slow));
}

#[test]
fn a_disconnected_subscriber_leaves_every_channel_and_pattern() {
    let node = start_node(free_port());
    let mut admin = Raw::connect(node.port);
    {
        let mut sub = Raw::connect(node.port);
        sub.call(&["SUBSCRIBE", "a", "b"]);
        sub.reply();
        sub.call(&["PSUBSCRIBE", "p*"]);
        sub.call(&["SSUBSCRIBE", "s"]);
        assert_eq!(admin.int(&["PUBLISH", "a", "x"]), 1);
        assert_eq!(admin.int(&["PUBLISH", "pq", "x"]), 1);
        assert_eq!(admin.int(&["SPUBLISH", "s", "x"]), 1);
        assert_eq!(admin.info_field("stats", "pubsub_channels"), 2);
        assert_eq!(admin.info_field("stats", "pubsub_patterns"), 1);
        assert_eq!(admin.info_field("stats", "pubsubshard_channels"), 1);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin.int(&["PUBSUB", "NUMPAT"]) != 0 {
        assert!(Instant::now() < deadline, "the pattern was never left");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(admin.call(&["PUBSUB", "CHANNELS"]), "*0\r\n");
    assert_eq!(admin.call(&["PUBSUB", "SHARDCHANNELS"]), "*0\r\n");
    assert_eq!(admin.int(&["PUBLISH", "a", "x"]), 0);
    assert_eq!(admin.int(&["SPUBLISH", "s", "x"]), 0);
    assert_eq!(admin.info_field("stats", "pubsub_channels"), 0);
}

/// A subscriber that keeps sending commands while large messages flood in
/// gets every reply whole and in order, and every message whole: messages
/// go between replies, never inside one (RESP2 with PING, RESP3 with ECHO).
#[test]
fn messages_interleave_with_replies_without_splitting_either() {
    const MESSAGES: usize = 600;
    const COMMANDS: usize = 400;
    let node = start_node(free_port());
    // The publisher may run far ahead of this (debug-built) reader: no
    // limit here, so only interleaving is under test.
    Raw::connect(node.port).check(
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 0 0 0",
        ],
        "+OK\r\n",
    );
    for proto in [2, 3] {
        let mut sub = RespConn::connect_loopback(node.port, Duration::from_secs(10)).unwrap();
        if proto == 3 {
            sub.call_str(&["HELLO", "3"]).unwrap();
        }
        sub.call_str(&["SUBSCRIBE", "flood"]).unwrap();
        let port = node.port;
        let publisher = std::thread::spawn(move || {
            let mut p = RespConn::connect_loopback(port, Duration::from_secs(10)).unwrap();
            // Pipelined, so messages pile up in the node and it writes them
            // in parts; sizes up to ~200 KB.
            for batch in (0..MESSAGES).collect::<Vec<_>>().chunks(20) {
                for k in batch {
                    let payload = format!("{k}:{}", "x".repeat(k * 331 % 200_000));
                    p.queue(&[b"PUBLISH", b"flood", payload.as_bytes()]);
                }
                p.flush().unwrap();
                for _ in batch {
                    assert_eq!(p.read_reply().unwrap(), b":1\r\n");
                }
            }
        });
        let (mut messages, mut replies) = (0usize, 0usize);
        let deadline = Instant::now() + Duration::from_secs(120);
        let check = |frame: Vec<u8>, messages: &mut usize, replies: &mut usize| {
            let text = String::from_utf8_lossy(&frame).into_owned();
            let head = if proto == 3 { ">3\r\n" } else { "*3\r\n" };
            if let Some(rest) =
                text.strip_prefix(&format!("{head}$7\r\nmessage\r\n$5\r\nflood\r\n"))
            {
                let body = rest.split("\r\n").nth(1).unwrap();
                let (k, xs) = body.split_once(':').unwrap();
                let k: usize = k.parse().unwrap();
                assert_eq!(k, *messages, "messages out of order");
                assert_eq!(xs.len(), k * 331 % 200_000);
                *messages += 1;
            } else {
                let want = match proto {
                    3 => format!("${}\r\n{}\r\n", replies.to_string().len(), replies),
                    _ => format!(
                        "*2\r\n$4\r\npong\r\n${}\r\n{}\r\n",
                        replies.to_string().len(),
                        replies
                    ),
                };
                assert_eq!(
                    text, want,
                    "RESP{proto}: reply {replies} broken or out of order"
                );
                *replies += 1;
            }
        };
        for batch in 0..COMMANDS / 10 {
            for i in batch * 10..batch * 10 + 10 {
                let arg = i.to_string();
                let cmd: &[u8] = if proto == 3 { b"ECHO" } else { b"PING" };
                sub.send(&[cmd, arg.as_bytes()]).unwrap();
            }
            while replies < batch * 10 + 10 {
                assert!(Instant::now() < deadline);
                check(sub.read_reply().unwrap(), &mut messages, &mut replies);
            }
        }
        while messages < MESSAGES {
            assert!(
                Instant::now() < deadline,
                "only {messages} messages arrived"
            );
            check(sub.read_reply().unwrap(), &mut messages, &mut replies);
        }
        publisher.join().unwrap();
        assert_eq!((messages, replies), (MESSAGES, COMMANDS));
    }
}

/// 200 subscribers on 20 channels, some also on patterns; 1 000 messages.
#[tokio::test]
async fn a_storm_delivers_every_message_exactly_once_to_each_matching_subscriber() {
    const SUBSCRIBERS: usize = 200;
    const CHANNELS: usize = 20;
    const PER_CHANNEL: usize = 50;
    let node = start_node(free_port());
    let addr = node.addr();
    // Subscriber i: channel i % 20; `ch:1*` (ch:1, ch:10…19) if i % 5 == 0;
    // `ch:?` (ch:0…9) if i % 7 == 0.
    let patterns = |i: usize| {
        let mut p = Vec::new();
        if i.is_multiple_of(5) {
            p.push("ch:1*");
        }
        if i.is_multiple_of(7) {
            p.push("ch:?");
        }
        p
    };
    let matches = |pat: &str, ch: usize| match pat {
        "ch:1*" => ch == 1 || ch >= 10,
        _ => ch < 10,
    };
    let expected = |i: usize| {
        (0..CHANNELS)
            .map(|ch| {
                let hits = usize::from(ch == i % CHANNELS)
                    + patterns(i).iter().filter(|p| matches(p, ch)).count();
                hits * PER_CHANNEL
            })
            .sum::<usize>()
    };
    let timeout = Duration::from_secs(60);
    let mut tasks = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(SUBSCRIBERS);
    for i in 0..SUBSCRIBERS {
        let addr = addr.clone();
        let ready = ready_tx.clone();
        let pats: Vec<&'static str> = patterns(i);
        let want = expected(i);
        tasks.push(tokio::spawn(async move {
            let mut c = shardis::client::Conn::connect(&addr, timeout)
                .await
                .unwrap();
            let channel = format!("ch:{}", i % CHANNELS);
            c.queue_raw(&command(&["SUBSCRIBE", &channel]));
            if !pats.is_empty() {
                let mut args = vec!["PSUBSCRIBE"];
                args.extend(&pats);
                c.queue_raw(&command(&args));
            }
            c.flush().await.unwrap();
            for _ in 0..1 + pats.len() {
                c.read_reply().await.unwrap();
            }
            ready.send(()).await.unwrap();
            let mut seen = HashSet::new();
            while seen.len() < want {
                let frame = c.read_reply().await.unwrap();
                let text = String::from_utf8_lossy(&frame).into_owned();
                // The last line is the payload, unique per message; a
                // pmessage also names its pattern.
                let key = text
                    .lines()
                    .filter(|l| !l.starts_with('$'))
                    .collect::<Vec<_>>()[1..]
                    .join(" ");
                assert!(seen.insert(key.clone()), "subscriber {i} got {key} twice");
            }
            // Nothing more may come.
            c.queue_raw(&command(&["PING"]));
            c.flush().await.unwrap();
            let last = c.read_reply().await.unwrap();
            assert_eq!(
                &last[..],
                b"*2\r\n$4\r\npong\r\n$0\r\n\r\n",
                "subscriber {i}"
            );
            seen.len()
        }));
    }
    for _ in 0..SUBSCRIBERS {
        ready_rx.recv().await.unwrap();
    }
    let mut publisher = shardis::client::Conn::connect(&addr, timeout)
        .await
        .unwrap();
    let mut deliveries = 0usize;
    for round in 0..PER_CHANNEL {
        for ch in 0..CHANNELS {
            let (channel, payload) = (format!("ch:{ch}"), format!("m{round}"));
            publisher.queue_raw(&command(&["PUBLISH", &channel, &payload]));
        }
        publisher.flush().await.unwrap();
        for _ in 0..CHANNELS {
            let r = publisher.read_reply().await.unwrap();
            deliveries += String::from_utf8_lossy(&r[1..])
                .trim()
                .parse::<usize>()
                .unwrap();
        }
    }
    let want: usize = (0..SUBSCRIBERS).map(expected).sum();
    assert_eq!(deliveries, want, "PUBLISH counted its receivers");
    let mut received = 0;
    for t in tasks {
        received += tokio::time::timeout(timeout, t).await.unwrap().unwrap();
    }
    assert_eq!(received, want);
    println!(
        "{SUBSCRIBERS} subscribers, {} messages published, {received} delivered",
        CHANNELS * PER_CHANNEL
    );
}

fn command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}
