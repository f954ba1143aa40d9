//! Pub/sub on the built-in node and on a real redis-server 7, side by side:
//! the same scripts (several connections: subscribers, publishers) run on
//! both, in RESP2 and in RESP3, and every byte each connection receives —
//! replies, confirmations, messages, refusals — must be the same.
//!
//! After each step, every open connection sends `PING <sentinel>` and reads
//! up to its answer, so the transcript of a step is exactly what the server
//! sent before it (a message published by the step, on every connection).
//! Skips when `redis-server` is missing, unless `SHARDIS_REQUIRE_REDIS=1`.

mod common;
// Only its reply sorting is used here.
#[allow(dead_code)]
#[path = "node_vs_redis/harness.rs"]
mod harness;

use common::{free_port, have_tool, start_node, start_redis, RespConn};
use std::time::Duration;

const SENTINEL: &str = "sentinel-7f3a";
const CONNS: usize = 3;

/// One step: `(connection, marker, command)`. Markers: `""` compare as is;
/// `"~"` the frames' order is Redis's hash-table order: compare them
/// sorted, with the count each frame ends with compared in sequence;
/// `"~a"` sort one array reply's elements; `"!"` run, compare nothing
/// (HELLO: version and id); `"!3"` compare in RESP2 only.
type Step = (usize, &'static str, &'static [&'static str]);

const SCRIPTS: &[&[Step]] = &[
    // Arity, and the commands on a connection that never subscribed.
    &[
        (0, "", &["SUBSCRIBE"]),
        (0, "", &["PSUBSCRIBE"]),
        (0, "", &["SSUBSCRIBE"]),
        (0, "", &["UNSUBSCRIBE"]),
        (0, "", &["PUNSUBSCRIBE"]),
        (0, "", &["SUNSUBSCRIBE"]),
        (0, "", &["UNSUBSCRIBE", "a"]),
        (0, "", &["PUNSUBSCRIBE", "a", "b"]),
        (0, "", &["SUNSUBSCRIBE", "a", "b", "c"]),
        (0, "", &["PUBLISH"]),
        (0, "", &["PUBLISH", "a"]),
        (0, "", &["PUBLISH", "a", "m"]),
        (0, "", &["PUBLISH", "a", "m", "x"]),
        (0, "", &["SPUBLISH"]),
        (0, "", &["SPUBLISH", "a"]),
        (0, "", &["SPUBLISH", "a", "m"]),
        (0, "", &["SPUBLISH", "a", "m", "x"]),
        (0, "", &["PING"]),
        (0, "", &["PING", "x"]),
        (0, "", &["PING", "x", "y"]),
    ],
    // PUBSUB at every argument count, with nothing subscribed.
    &[
        (0, "", &["PUBSUB"]),
        (0, "", &["PUBSUB", "HELP"]),
        (0, "", &["PUBSUB", "help", "x"]),
        (0, "", &["PUBSUB", "FOO"]),
        (0, "", &["PUBSUB", "FOO", "x"]),
        (0, "", &["PUBSUB", "CHANNELS"]),
        (0, "", &["PUBSUB", "CHANNELS", "*"]),
        (0, "", &["PUBSUB", "channels", "a", "b"]),
        (0, "", &["PUBSUB", "NUMSUB"]),
        (0, "", &["PUBSUB", "NUMSUB", "a"]),
        (0, "", &["PUBSUB", "NUMSUB", "a", "b", "a"]),
        (0, "", &["PUBSUB", "NUMPAT"]),
        (0, "", &["PUBSUB", "NUMPAT", "x"]),
        (0, "", &["PUBSUB", "SHARDCHANNELS"]),
        (0, "", &["PUBSUB", "SHARDCHANNELS", "*"]),
        (0, "", &["PUBSUB", "SHARDCHANNELS", "a", "b"]),
        (0, "", &["PUBSUB", "SHARDNUMSUB"]),
        (0, "", &["PUBSUB", "SHARDNUMSUB", "a"]),
        (0, "", &["PUBSUB", "shardnumsub", "a", "b"]),
    ],
    // Confirmations and counts; messages to channel, pattern and shard
    // subscribers; PUBSUB with subscribers.
    &[
        (1, "", &["SUBSCRIBE", "news"]),
        (1, "", &["SUBSCRIBE", "news", "sport", "news"]),
        (1, "", &["PSUBSCRIBE", "n*", "n*"]),
        (
            2,
            "",
            &["PSUBSCRIBE", "n*", "h?llo", "h[ae]llo", "h[^e]llo", "*"],
        ),
        (2, "", &["SSUBSCRIBE", "news", "s2"]),
        (1, "", &["SSUBSCRIBE", "s2"]),
        (0, "", &["PUBLISH", "news", "hi"]),
        (0, "", &["PUBLISH", "sport", "goal\r\nbinary\0x"]),
        (0, "", &["PUBLISH", "nobody", ""]),
        (0, "", &["PUBLISH", "", "empty channel"]),
        (0, "~", &["PUBLISH", "hello", "p"]),
        (0, "~", &["PUBLISH", "hallo", "p"]),
        (0, "~", &["PUBLISH", "hillo", "p"]),
        (0, "", &["SPUBLISH", "news", "shard"]),
        (0, "", &["SPUBLISH", "s2", "two"]),
        (0, "", &["SPUBLISH", "sport", "none"]),
        (0, "~a", &["PUBSUB", "CHANNELS"]),
        (0, "~a", &["PUBSUB", "CHANNELS", "n*"]),
        (0, "", &["PUBSUB", "CHANNELS", "x*"]),
        (
            0,
            "",
            &["PUBSUB", "NUMSUB", "news", "sport", "nobody", "n*"],
        ),
        (0, "", &["PUBSUB", "NUMPAT"]),
        (0, "~a", &["PUBSUB", "SHARDCHANNELS"]),
        (0, "", &["PUBSUB", "SHARDCHANNELS", "s?"]),
        (0, "", &["PUBSUB", "SHARDNUMSUB", "news", "s2", "news2"]),
        (1, "", &["UNSUBSCRIBE", "sport", "never"]),
        (1, "", &["PUNSUBSCRIBE", "n*"]),
        (1, "", &["SUNSUBSCRIBE", "s2"]),
        (0, "", &["PUBLISH", "sport", "gone"]),
        (0, "", &["PUBSUB", "NUMSUB", "news", "sport"]),
        (2, "~", &["PUNSUBSCRIBE"]),
        (2, "", &["PUNSUBSCRIBE"]),
        (2, "~", &["SUNSUBSCRIBE"]),
        (2, "", &["PING"]),
        (1, "", &["UNSUBSCRIBE"]),
        (1, "", &["UNSUBSCRIBE"]),
        (1, "", &["PING"]),
        (0, "", &["PUBSUB", "NUMPAT"]),
        (0, "", &["PUBSUB", "CHANNELS"]),
    ],
    // Subscribe mode: what a RESP2 subscriber may run, and Redis's refusals.
    &[
        (0, "", &["SUBSCRIBE", "a"]),
        (0, "", &["PING"]),
        (0, "", &["PING", "x"]),
        (0, "", &["PING", "x", "y"]),
        (0, "!3", &["GET", "k"]),
        (0, "!3", &["SET", "k", "v"]),
        (0, "", &["ECHO", "x"]),
        (0, "", &["ECHO"]),
        (0, "", &["nosuchcommand", "x"]),
        (0, "", &["CONFIG", "GET", "timeout"]),
        (0, "", &["CONFIG", "GET"]),
        (0, "", &["CONFIG", "FOO"]),
        (0, "", &["CONFIG"]),
        (0, "!3", &["CLIENT", "ID"]),
        (0, "", &["CLIENT", "SETNAME"]),
        (0, "", &["OBJECT", "ENCODING", "k"]),
        (0, "", &["PUBSUB", "NUMPAT"]),
        (0, "", &["PUBSUB", "NUMPAT", "x"]),
        (0, "", &["PUBSUB", "CHANNELS", "a", "b"]),
        (0, "", &["PUBSUB", "FOO"]),
        (0, "", &["PUBLISH", "a", "self"]),
        (0, "!3", &["HELLO", "3"]),
        (0, "", &["RESET", "x"]),
        (0, "", &["DBSIZE"]),
        (0, "", &["SELECT", "0"]),
        (0, "", &["PSUBSCRIBE", "*"]),
        (0, "", &["SSUBSCRIBE", "s"]),
        (0, "", &["UNSUBSCRIBE"]),
        (0, "", &["PUNSUBSCRIBE"]),
        (0, "!3", &["GET", "k"]),
        (0, "", &["SUNSUBSCRIBE"]),
        (0, "", &["GET", "k"]),
        (0, "", &["PING"]),
    ],
    // RESET leaves everything (messages already sent still arrive first);
    // QUIT in subscribe mode.
    &[
        (1, "", &["SUBSCRIBE", "c"]),
        (1, "", &["PSUBSCRIBE", "c*"]),
        (0, "", &["PUBLISH", "c", "before reset"]),
        (1, "", &["RESET"]),
        (1, "", &["PING"]),
        (0, "", &["PUBLISH", "c", "after reset"]),
        (2, "", &["SSUBSCRIBE", "q"]),
        (2, "", &["QUIT"]),
        (0, "", &["SPUBLISH", "q", "after quit"]),
        (0, "", &["PUBSUB", "SHARDNUMSUB", "q"]),
    ],
    // The subscriber output limit, as CONFIG shows and changes it.
    &[
        (0, "", &["CONFIG", "GET", "client-output-buffer-limit"]),
        (
            0,
            "",
            &["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 2"],
        ),
        (
            0,
            "",
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "master 1 2 3",
            ],
        ),
        (
            0,
            "",
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub 1 2 x",
            ],
        ),
        (
            0,
            "",
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub -1 2 3",
            ],
        ),
        (
            0,
            "",
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub 1 2 1kb",
            ],
        ),
        (
            0,
            "",
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub  1 2 3",
            ],
        ),
        (
            0,
            "",
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "pubsub 1kb 2mb 3",
            ],
        ),
        (0, "", &["CONFIG", "GET", "client-output-buffer-limit"]),
        (
            0,
            "",
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "REPLICA 1 2 3 normal 5 6 7",
            ],
        ),
        (0, "", &["CONFIG", "SET", "client-output-buffer-limit", ""]),
        (0, "", &["CONFIG", "GET", "client-output*"]),
        (
            0,
            "",
            &[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60",
            ],
        ),
        (0, "", &["CONFIG", "GET", "client-output-buffer-limit"]),
    ],
    // A connection publishing to itself; HELLO while subscribed changes how
    // later messages are encoded.
    &[
        (0, "", &["SUBSCRIBE", "me"]),
        (0, "", &["PSUBSCRIBE", "m*"]),
        (1, "", &["PUBLISH", "me", "one"]),
        (0, "!", &["HELLO", "3"]),
        (0, "", &["PUBLISH", "me", "two"]),
        (1, "", &["PUBLISH", "me", "three"]),
        (0, "", &["PING"]),
        (0, "!", &["HELLO", "2"]),
        (1, "", &["PUBLISH", "me", "four"]),
        (0, "", &["PING"]),
        (0, "", &["GET", "x"]),
    ],
];

/// One connection's frames since the previous step, or `None` if closed.
struct Peer {
    conn: Option<RespConn>,
}

impl Peer {
    fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        if let Some(c) = self.conn.as_mut() {
            c.send(&args).expect("send");
        }
    }

    /// Frames up to the sentinel's answer (which is left out), or to EOF.
    fn until_sentinel(&mut self, sent: bool) -> Vec<Vec<u8>> {
        let Some(c) = self.conn.as_mut() else {
            return vec![b"(closed)".to_vec()];
        };
        if sent {
            c.send(&[b"PING", SENTINEL.as_bytes()]).expect("send");
        }
        let plain = format!("${}\r\n{SENTINEL}\r\n", SENTINEL.len());
        let subscribed = format!("*2\r\n$4\r\npong\r\n{plain}");
        let mut frames = Vec::new();
        loop {
            match c.read_reply() {
                Ok(f) if f == plain.as_bytes() || f == subscribed.as_bytes() => return frames,
                Ok(f) => frames.push(f),
                Err(e) if e.to_string().contains("closed") => {
                    frames.push(b"(closed)".to_vec());
                    self.conn = None;
                    return frames;
                }
                Err(e) => panic!("reading a transcript: {e}; so far {frames:?}"),
            }
        }
    }
}

/// Runs a script on `port`; returns each step's transcript per connection.
fn run(port: u16, script: &[Step], proto: u8) -> Vec<Vec<Vec<Vec<u8>>>> {
    let mut peers: Vec<Peer> = (0..CONNS)
        .map(|_| {
            let mut c = RespConn::connect_loopback(port, Duration::from_secs(10)).unwrap();
            if proto == 3 {
                c.call_str(&["HELLO", "3"]).unwrap();
            }
            Peer { conn: Some(c) }
        })
        .collect();
    let mut out = Vec::new();
    for (who, _, args) in script {
        peers[*who].send(args);
        let mut step = Vec::new();
        for (i, p) in peers.iter_mut().enumerate() {
            step.push(p.until_sentinel(i != *who || !args[0].eq_ignore_ascii_case("quit")));
        }
        out.push(step);
    }
    // RESET every connection so the next script starts with no subscriber.
    for p in peers.iter_mut() {
        if let Some(c) = p.conn.as_mut() {
            c.send(&[b"RESET"]).unwrap();
            while c.read_reply().unwrap() != b"+RESET\r\n" {}
        }
    }
    out
}

/// Applies a step's marker to one connection's frames.
fn normalize(marker: &str, proto: u8, mut frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    match marker {
        "!" => Vec::new(),
        "!3" if proto == 3 => Vec::new(),
        "~a" => frames
            .into_iter()
            .map(|f| harness::apply_marker(Some("~"), f))
            .collect(),
        "~" => {
            let mut counts = Vec::new();
            for f in frames.iter_mut() {
                if let Some(at) = f.windows(3).rposition(|w| w == b"\r\n:") {
                    counts.push(f[at..].to_vec());
                    f.truncate(at);
                }
            }
            frames.sort();
            frames.extend(counts);
            frames
        }
        _ => frames,
    }
}

fn compare(proto: u8) {
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    let node = start_node(free_port());
    let mut mismatches = Vec::new();
    let mut steps = 0;
    for (n, script) in SCRIPTS.iter().enumerate() {
        let theirs = run(redis.port, script, proto);
        let ours = run(node.port, script, proto);
        for (i, (who, marker, args)) in script.iter().enumerate() {
            steps += 1;
            for c in 0..CONNS {
                let a = normalize(marker, proto, ours[i][c].clone());
                let b = normalize(marker, proto, theirs[i][c].clone());
                if a != b {
                    let show = |f: &Vec<Vec<u8>>| {
                        f.iter()
                            .map(|x| String::from_utf8_lossy(x).into_owned())
                            .collect::<Vec<_>>()
                    };
                    mismatches.push(format!(
                        "script {n}, conn {who} sent {args:?}; conn {c} got\n  node:  {:?}\n  redis: {:?}",
                        show(&a),
                        show(&b)
                    ));
                }
            }
        }
    }
    println!("RESP{proto}: {steps} steps compared on {CONNS} connections each");
    assert!(
        mismatches.is_empty(),
        "RESP{proto}: {} differences:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn pubsub_matches_redis_server_byte_for_byte_in_resp2() {
    compare(2);
}

#[test]
fn pubsub_matches_redis_server_byte_for_byte_in_resp3() {
    compare(3);
}
