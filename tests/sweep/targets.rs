//! The sweep's side of the wire: one connection per server under test,
//! pipelined, re-opened when a request killed or stalled it, and what each
//! request got (a reply, a hang or a close).

use super::common::{RespCmd, RespConn};
use super::READ_TIMEOUT;

/// A request: the command name and its arguments.
pub type Req = Vec<Vec<u8>>;

/// What a target did with one request.
#[derive(Clone, Debug)]
pub enum Outcome {
    Reply(Vec<u8>),
    /// No reply within the timeout.
    Hang,
    /// The connection closed (or broke) instead of replying.
    Closed,
}

impl Outcome {
    /// `ok`, or the first word of an error (`ERR`, `WRONGTYPE`, …).
    pub fn class(&self) -> String {
        match self {
            Outcome::Reply(r) if r.starts_with(b"-") => {
                let text = String::from_utf8_lossy(&r[1..]);
                text.split([' ', '\r']).next().unwrap_or("").to_string()
            }
            Outcome::Reply(_) => "ok".into(),
            Outcome::Hang => "HANG".into(),
            Outcome::Closed => "CLOSED".into(),
        }
    }

    pub fn text(&self) -> String {
        match self {
            Outcome::Reply(r) => short(r, 90),
            other => other.class(),
        }
    }

    pub fn starts(&self, prefix: &[u8]) -> bool {
        matches!(self, Outcome::Reply(r) if r.starts_with(prefix))
    }

    pub fn contains(&self, needle: &str) -> bool {
        matches!(self, Outcome::Reply(r) if String::from_utf8_lossy(r).contains(needle))
    }
}

fn short(b: &[u8], n: usize) -> String {
    let s: String = String::from_utf8_lossy(b)
        .replace("\r\n", " ")
        .chars()
        .take(n)
        .collect();
    s.trim_end().to_string()
}

/// One server under test, on one connection that is re-opened whenever a
/// request killed or stalled it.
pub struct Target {
    pub name: &'static str,
    port: u16,
    /// The protocol the connection speaks (HELLO 3 sent on opening for 3).
    proto: u8,
    conn: RespConn,
}

impl Target {
    pub fn new(name: &'static str, port: u16, proto: u8) -> Target {
        Target {
            name,
            port,
            proto,
            conn: Target::open(name, port, proto),
        }
    }

    fn open(name: &str, port: u16, proto: u8) -> RespConn {
        let mut c = RespConn::connect_loopback(port, READ_TIMEOUT)
            .unwrap_or_else(|e| panic!("{name} no longer accepts connections: {e}"));
        if proto == 3 {
            let r = c.cmd(&["HELLO", "3"]);
            assert!(r.starts_with(b"%"), "{name}: HELLO 3 -> {}", short(&r, 80));
        }
        c
    }

    fn reconnect(&mut self) {
        self.conn = Target::open(self.name, self.port, self.proto);
    }

    /// Writes every request back to back, then reads the replies in order.
    /// A request that gets no reply breaks the pipeline: it is recorded, the
    /// connection re-opened, and the requests after it sent again.
    pub fn run(&mut self, reqs: &[Req]) -> Vec<Outcome> {
        let mut out = Vec::with_capacity(reqs.len());
        while out.len() < reqs.len() {
            let rest = &reqs[out.len()..];
            for r in rest {
                let a: Vec<&[u8]> = r.iter().map(|x| &x[..]).collect();
                self.conn.queue(&a);
            }
            let sent = self.conn.flush();
            for r in rest {
                let got = match &sent {
                    Err(_) => Err(None),
                    Ok(_) => self.read_frames(frames(r)).map_err(Some),
                };
                match got {
                    Ok(r) => out.push(Outcome::Reply(r)),
                    Err(e) => {
                        // A failed write means the connection broke.
                        out.push(if e.is_some_and(|e| e.is_read_timeout()) {
                            Outcome::Hang
                        } else {
                            Outcome::Closed
                        });
                        self.reconnect();
                        break;
                    }
                }
            }
        }
        out
    }
}

impl Target {
    /// Reads the `n` frames of one reply, concatenated; an error frame ends
    /// it early (an error is the whole answer).
    fn read_frames(&mut self, n: usize) -> Result<Vec<u8>, shardis::client::ClientError> {
        let mut out = self.conn.read_reply()?;
        for _ in 1..n {
            if out.starts_with(b"-") {
                break;
            }
            out.extend(self.conn.read_reply()?);
        }
        Ok(out)
    }
}

/// How many frames answer `req` on a connection that never subscribed: the
/// unsubscribe family confirms each argument (one frame when there is none),
/// everything else is one reply.
pub fn frames(req: &Req) -> usize {
    let name = String::from_utf8_lossy(&req[0]).to_ascii_lowercase();
    match name.as_str() {
        "unsubscribe" | "punsubscribe" | "sunsubscribe" => (req.len() - 1).max(1),
        _ => 1,
    }
}

pub fn show(req: &Req) -> String {
    let parts: Vec<String> = req
        .iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.is_empty() || s.contains(' ') {
                format!("{s:?}")
            } else {
                s.into_owned()
            }
        })
        .collect();
    short(parts.join(" ").as_bytes(), 70)
}
