//! The pub/sub load tests' tools: subscribers that count every delivery,
//! a pipelined publisher, and waits on the ring and on the nodes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use shardis::client::Conn;
use shardis::resp::encode;

pub const TIMEOUT: Duration = Duration::from_secs(20);
/// The payload that ends a subscriber's count: published on `ctl` after
/// every other message was acknowledged by every node.
pub const END: &str = "END___";

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn command(args: &[&str]) -> BytesMut {
    let mut out = BytesMut::new();
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    encode::command(&mut out, &args);
    out
}

/// What one subscriber listens to.
#[derive(Clone)]
pub struct Sub {
    pub channels: Vec<String>,
    pub patterns: Vec<String>,
    pub resp3: bool,
}

impl Sub {
    pub fn matches(&self, channel: &str) -> bool {
        self.channels.iter().any(|c| c == channel)
            || self
                .patterns
                .iter()
                .any(|p| channel.starts_with(p.trim_end_matches('*')))
    }
}

/// Connects and subscribes; returns once every confirmation arrived.
pub async fn subscribe(port: u16, s: &Sub) -> Conn {
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
pub async fn count_until_end(c: &mut Conn) -> HashMap<String, u32> {
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
pub async fn publish_all(port: u16, msgs: &[(String, String)]) -> i64 {
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

/// A connection for one request at a time.
pub async fn conn(port: u16) -> Conn {
    Conn::connect(&format!("127.0.0.1:{port}"), TIMEOUT)
        .await
        .unwrap()
}

pub async fn call(c: &mut Conn, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.call_str(args).await.unwrap()).into_owned()
}

/// The subscriber ids (`id:<i>` channels) a node holds.
pub async fn held_by(node: u16) -> Vec<usize> {
    let r = call(&mut conn(node).await, &["PUBSUB", "CHANNELS", "id:*"]).await;
    r.split("\r\n")
        .filter_map(|l| l.strip_prefix("id:"))
        .map(|i| i.parse().unwrap())
        .collect()
}

pub async fn wait_until(what: &str, mut ok: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ok().await {
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn ring_ok(port: u16) -> bool {
    call(&mut conn(port).await, &["CLUSTER", "RINGINFO"])
        .await
        .contains("state:ok")
}

/// Messages of `range` each subscriber in `who` got not exactly once:
/// (lost, duplicated).
pub fn misses(
    got: &[HashMap<String, u32>],
    who: impl Iterator<Item = usize>,
    range: std::ops::Range<u64>,
) -> (usize, usize) {
    let (mut lost, mut dup) = (0, 0);
    for i in who {
        for seq in range.clone() {
            match got[i].get(&format!("{seq:06}")).copied().unwrap_or(0) {
                0 => lost += 1,
                1 => {}
                _ => dup += 1,
            }
        }
    }
    (lost, dup)
}
