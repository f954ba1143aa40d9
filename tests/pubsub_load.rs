//! Pub/sub through the proxy under load and under change: a publish storm
//! (1 000 subscribers over 100 channels and patterns, every delivery
//! counted: each matching subscriber gets each message exactly once), a
//! subscriber that does not read closed at its output limit while the
//! others keep receiving, and subscriptions that survive REMOVENODE of
//! their node, ADDNODE, and the death of their node.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::*;
use shardis::client::Conn;
use shardis::resp::encode;

const TIMEOUT: Duration = Duration::from_secs(20);
/// The payload that ends a subscriber's count: published on `ctl` after
/// every other message was acknowledged by every node.
const END: &str = "END___";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn command(args: &[&str]) -> BytesMut {
    let mut out = BytesMut::new();
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    encode::command(&mut out, &args);
    out
}

/// What one subscriber listens to.
#[derive(Clone)]
struct Sub {
    channels: Vec<String>,
    patterns: Vec<String>,
    resp3: bool,
}

impl Sub {
    fn matches(&self, channel: &str) -> bool {
        self.channels.iter().any(|c| c == channel)
            || self
                .patterns
                .iter()
                .any(|p| channel.starts_with(p.trim_end_matches('*')))
    }
}

/// Connects and subscribes; returns once every confirmation arrived.
async fn subscribe(port: u16, s: &Sub) -> Conn {
    let mut c = Conn::connect(&format!("127.0.0.1:{port}"), TIMEOUT)
        .await
        .unwrap();
    let mut frames = 0;
    if s.resp3 {
        c.queue_raw(&command(&["HELLO", "3"]));
        frames += 1;
    }
    let mut chans = vec!["SUBSCRIBE", "ctl"];
    chans.extend(s.channels.iter().map(|c| c.as_str()));
    c.queue_raw(&command(&chans));
    frames += chans.len() - 1;
    if !s.patterns.is_empty() {
        let mut pats = vec!["PSUBSCRIBE"];
        pats.extend(s.patterns.iter().map(|c| c.as_str()));
        c.queue_raw(&command(&pats));
        frames += pats.len() - 1;
    }
    c.flush().await.unwrap();
    for _ in 0..frames {
        let r = c.read_reply().await.unwrap();
        assert!(!r.starts_with(b"-"), "{}", String::from_utf8_lossy(&r));
    }
    c
}

/// Reads messages until the END marker; counts each payload (the last
/// element: six characters).
async fn count_until_end(c: &mut Conn) -> HashMap<String, u32> {
    let mut got: HashMap<String, u32> = HashMap::new();
    loop {
        let f = c.read_reply().await.unwrap();
        let s = String::from_utf8_lossy(&f);
        assert!(
            s.starts_with("*3\r\n$7\r\nmessage")
                || s.starts_with(">3\r\n$7\r\nmessage")
                || s.starts_with("*4\r\n$8\r\npmessage")
                || s.starts_with(">4\r\n$8\r\npmessage"),
            "not a message: {s:?}"
        );
        let payload = s[s.len() - 8..s.len() - 2].to_string();
        if payload == END {
            return got;
        }
        *got.entry(payload).or_default() += 1;
    }
}

/// Publishes `msgs` (channel, payload) pipelined; returns the sum of the
/// receiver counts PUBLISH answered.
async fn publish_all(port: u16, msgs: &[(String, String)]) -> i64 {
    let mut p = Conn::connect(&format!("127.0.0.1:{port}"), TIMEOUT)
        .await
        .unwrap();
    let mut total = 0;
    for batch in msgs.chunks(50) {
        for (ch, m) in batch {
            p.queue_raw(&command(&["PUBLISH", ch, m]));
        }
        p.flush().await.unwrap();
        for _ in batch {
            let r = p.read_reply().await.unwrap();
            let s = String::from_utf8_lossy(&r);
            total += s
                .trim()
                .strip_prefix(':')
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or_else(|| panic!("PUBLISH answered {s:?}"));
        }
    }
    total
}

#[test]
fn publish_storm_reaches_every_matching_subscriber_exactly_once() {
    if !have_tool("redis-server") {
        return;
    }
    const SUBSCRIBERS: usize = 1000;
    const CHANNELS: usize = 100;
    const PER_CHANNEL: usize = 5;
    let c = Cluster::redis(3);
    let port = c.proxy.port;
    let subs: Vec<Sub> = (0..SUBSCRIBERS)
        .map(|i| {
            let resp3 = i % 10 == 1;
            if i % 4 == 0 {
                Sub {
                    channels: vec![],
                    patterns: vec![format!("ch:{}*", (i / 4) % 10)],
                    resp3,
                }
            } else {
                let mut channels = vec![format!("ch:{}", i % CHANNELS)];
                let other = format!("ch:{}", (i * 7 + 3) % CHANNELS);
                if other != channels[0] {
                    channels.push(other);
                }
                Sub {
                    channels,
                    patterns: vec![],
                    resp3,
                }
            }
        })
        .collect();
    let msgs: Vec<(String, String)> = (0..CHANNELS * PER_CHANNEL)
        .map(|i| (format!("ch:{}", i % CHANNELS), format!("{i:06}")))
        .collect();
    let rt = runtime();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(240), async {
            let gate = Arc::new(tokio::sync::Semaphore::new(100));
            let mut conns = Vec::new();
            for s in &subs {
                let (s, gate) = (s.clone(), gate.clone());
                conns.push(tokio::spawn(async move {
                    let _p = gate.acquire().await.unwrap();
                    subscribe(port, &s).await
                }));
            }
            let mut readers = Vec::new();
            for h in conns {
                let mut conn = h.await.unwrap();
                readers.push(tokio::spawn(async move { count_until_end(&mut conn).await }));
            }
            let started = Instant::now();
            let total = publish_all(port, &msgs).await;
            let want_total: usize = msgs
                .iter()
                .map(|(ch, _)| subs.iter().filter(|s| s.matches(ch)).count())
                .sum();
            assert_eq!(total, want_total as i64, "PUBLISH counts");
            let end = publish_all(port, &[("ctl".into(), END.into())]).await;
            assert_eq!(end, SUBSCRIBERS as i64);
            let mut delivered = 0;
            for (s, r) in subs.iter().zip(readers) {
                let got = r.await.unwrap();
                for (ch, m) in &msgs {
                    let n = got.get(m).copied().unwrap_or(0);
                    let want = u32::from(s.matches(ch));
                    assert_eq!(n, want, "message {m} on {ch}: {n} deliveries");
                }
                assert_eq!(got.values().sum::<u32>() as usize, got.len());
                delivered += got.len();
            }
            assert_eq!(delivered, want_total);
            println!(
                "{delivered} deliveries to {SUBSCRIBERS} subscribers, each exactly once, in {:?}",
                started.elapsed()
            );
        })
        .await
        .expect("the storm ends in time");
    });
    c.proxy.assert_no_panic();
}

#[test]
fn a_subscriber_that_does_not_read_is_closed_while_others_keep_receiving() {
    if !have_tool("redis-server") {
        return;
    }
    let nodes = vec![start_redis(free_port()), start_redis(free_port())];
    let c = Cluster::over(
        nodes,
        "client_output_hard_limit = 1048576\nclient_output_soft_limit = 0\n",
    );
    let port = c.proxy.port;
    let payload = "x".repeat(8192);
    let rt = runtime();
    rt.block_on(async {
        let sub = Sub {
            channels: vec!["big".into()],
            patterns: vec![],
            resp3: false,
        };
        // The slow one subscribes and then never reads.
        let mut slow = subscribe(port, &sub).await;
        let mut fast = subscribe(port, &sub).await;
        let reader = tokio::spawn(async move {
            let mut n = 0;
            loop {
                let f = fast.read_reply().await.unwrap();
                if f.ends_with(b"END___\r\n") {
                    return n;
                }
                n += 1;
            }
        });
        const MSGS: usize = 2000;
        let mut p = Conn::connect(&format!("127.0.0.1:{port}"), TIMEOUT)
            .await
            .unwrap();
        for _ in 0..MSGS {
            p.queue_raw(&command(&["PUBLISH", "big", &payload]));
            p.flush().await.unwrap();
            p.read_reply().await.unwrap();
        }
        p.queue_raw(&command(&["PUBLISH", "big", END]));
        p.flush().await.unwrap();
        assert_eq!(&p.read_reply().await.unwrap()[..], b":1\r\n", "the slow one is gone");
        assert_eq!(reader.await.unwrap(), MSGS, "the reading subscriber got everything");
        // The slow one finds its connection closed after what was written.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match slow.fill_until(tokio::time::Instant::from_std(deadline)).await {
                Ok(()) => {
                    while slow.try_reply().unwrap().is_some() {}
                }
                Err(shardis::client::ClientError::Closed) => break,
                Err(e) => panic!("slow subscriber: {e}"),
            }
        }
    });
    let mut q = Raw::connect(port);
    assert!(q.info_field("stats", "client_output_buffer_limit_disconnections") >= 1);
    c.proxy.assert_no_panic();
}
