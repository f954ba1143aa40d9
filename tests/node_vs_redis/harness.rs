//! The comparison harness of `node_vs_redis.rs`: a RESP connection (the
//! crate's client)
//! and the normalizations applied to both servers' replies.

use std::time::Duration;

const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A RESP connection that reads whole replies (the crate's client).
pub struct Conn(shardis::client::Conn);

impl Conn {
    pub async fn open(port: u16) -> Conn {
        let addr = format!("127.0.0.1:{port}");
        Conn(
            shardis::client::Conn::connect(&addr, READ_TIMEOUT)
                .await
                .unwrap(),
        )
    }

    pub async fn call(&mut self, args: &[&str]) -> Vec<u8> {
        match self.0.call_str(args).await {
            Ok(r) => r.to_vec(),
            Err(e) => panic!("no reply to {args:?}: {e}"),
        }
    }
}

/// The elements of an aggregate reply (`*`, `~`, `%`), after its header.
pub fn elements(reply: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    if !matches!(reply.first(), Some(b'*' | b'~' | b'%')) {
        return None;
    }
    let eol = reply.windows(2).position(|w| w == b"\r\n")?;
    let header = reply[..eol + 2].to_vec();
    let n: i64 = std::str::from_utf8(&reply[1..eol]).ok()?.parse().ok()?;
    let n = if reply[0] == b'%' { 2 * n } else { n };
    let mut rest = &reply[eol + 2..];
    let mut out = Vec::new();
    for _ in 0..n.max(0) {
        let len = shardis::resp::reply_len(rest).ok()??;
        out.push(rest[..len].to_vec());
        rest = &rest[len..];
    }
    Some((header, out))
}

/// Applies a step's marker: `~` sorts the reply's elements (`~2`: in
/// pairs) where the order is Redis's hash-table order; `#` keeps only the
/// header where the content is random (SPOP, *RAND*).
pub fn apply_marker(marker: Option<&str>, reply: Vec<u8>) -> Vec<u8> {
    if marker == Some("#") && reply.starts_with(b"$") {
        // A random bulk string: keep its length line.
        let eol = reply.windows(2).position(|w| w == b"\r\n").unwrap_or(0);
        return reply[..eol].to_vec();
    }
    let Some((header, items)) = marker.and_then(|_| elements(&reply)) else {
        return reply;
    };
    match marker {
        Some("#") => header,
        Some(m) => {
            let stride = if m == "~2" { 2 } else { 1 };
            let mut chunks: Vec<Vec<u8>> = items.chunks(stride).map(|c| c.concat()).collect();
            chunks.sort();
            [header, chunks.concat()].concat()
        }
        None => reply,
    }
}

/// HELLO's reply carries the version and client id, which differ by design;
/// compare everything else.
pub fn normalize(args: &[&str], reply: Vec<u8>) -> Vec<u8> {
    if !args[0].eq_ignore_ascii_case("hello") || reply.starts_with(b"-") {
        return reply;
    }
    let text = String::from_utf8_lossy(&reply).into_owned();
    let mut lines: Vec<String> = text.split("\r\n").map(String::from).collect();
    for i in 0..lines.len() {
        if lines[i] == "version" || lines[i] == "id" {
            lines[i + 1] = "<elided>".into();
            if lines[i] == "version" {
                lines[i + 2] = "<elided>".into();
            }
        }
    }
    lines.join("\r\n").into_bytes()
}
