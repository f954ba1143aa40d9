//! Replies as frames, for pub/sub tests: a subscriber's reply to SUBSCRIBE
//! is one frame per channel, and pushes arrive between replies.

use std::time::Duration;

use super::RespConn;

/// How long any one read waits.
pub const TIMEOUT: Duration = Duration::from_secs(10);

pub fn conn(port: u16) -> RespConn {
    RespConn::connect_loopback(port, TIMEOUT).unwrap()
}

pub fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

/// Sends one request and reads `frames` frames: its whole reply.
pub fn call(c: &mut RespConn, args: &[&str], frames: usize) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&args).unwrap();
    (0..frames)
        .map(|_| text(&c.read_reply().unwrap()))
        .collect()
}
