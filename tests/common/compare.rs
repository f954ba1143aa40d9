//! The differential comparator: the same requests to shardis (a built-in
//! node or a proxy) and to a redis-server, every reply compared byte for
//! byte, differences collected and reported together at the end.

use super::{Proc, Raw};

/// A built-in node and a redis-server, both listening (killed on drop);
/// `None` (a recorded skip) without redis-server.
pub fn pair() -> Option<(Proc, Proc)> {
    if !super::have_tool("redis-server") {
        return None;
    }
    let node = super::start_node(super::free_port());
    Some((node, super::start_redis(super::free_port())))
}

/// A step's arguments: split on `|` if it has one, else on blanks.
pub fn split(step: &str) -> Vec<String> {
    if step.contains('|') {
        step.split('|').map(String::from).collect()
    } else {
        step.split_whitespace().map(String::from).collect()
    }
}

/// Every `:<integer>` of a reply replaced by `:N`.
pub fn mask_ints(r: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(r.len());
    let mut i = 0;
    while i < r.len() {
        out.push(r[i]);
        let line_start = i == 0 || r[i - 1] == b'\n';
        if r[i] == b':' && line_start {
            out.push(b'N');
            while i + 1 < r.len() && r[i + 1] != b'\r' {
                i += 1;
            }
        }
        i += 1;
    }
    out
}

/// Every digit of a reply replaced by `N` (replies with the time in them).
pub fn mask_digits(r: &[u8]) -> Vec<u8> {
    r.iter()
        .map(|&c| if c.is_ascii_digit() { b'N' } else { c })
        .collect()
}

/// Sends the same requests to both servers and records every difference.
pub struct Compare {
    pub ours: Raw,
    pub theirs: Raw,
    steps: usize,
    mismatches: Vec<String>,
}

impl Compare {
    /// Connects to both and sends `HELLO proto` (its reply differs by
    /// design, so it is not compared).
    pub fn open(ours: u16, theirs: u16, proto: &str) -> Compare {
        let mut c = Compare {
            ours: Raw::connect(ours),
            theirs: Raw::connect(theirs),
            steps: 0,
            mismatches: Vec::new(),
        };
        c.both(&["HELLO", proto]);
        c
    }

    /// [`Compare::open`] on an empty keyspace (FLUSHALL on both).
    pub fn open_empty(ours: u16, theirs: u16, proto: &str) -> Compare {
        let mut c = Compare::open(ours, theirs, proto);
        c.both(&["FLUSHALL"]);
        c
    }

    /// Sends to both, compares nothing.
    pub fn both<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
        self.ours.call_bytes(&args);
        self.theirs.call_bytes(&args);
    }

    /// Sends to both and compares the replies; ours.
    pub fn step<A: AsRef<[u8]>>(&mut self, what: &str, args: &[A]) -> Vec<u8> {
        self.step_masked(what, args, |r| r.to_vec())
    }

    /// As [`Compare::step`], comparing the replies as `mask` leaves them.
    pub fn step_masked<A: AsRef<[u8]>>(
        &mut self,
        what: &str,
        args: &[A],
        mask: impl Fn(&[u8]) -> Vec<u8>,
    ) -> Vec<u8> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
        let (a, b) = (self.ours.call_bytes(&bytes), self.theirs.call_bytes(&bytes));
        let (ma, mb) = (mask(&a), mask(&b));
        self.steps += 1;
        if ma != mb {
            let shown: Vec<String> = bytes
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            self.mismatches.push(format!(
                "{what} {shown:?}\n  ours:  {:?}\n  redis: {:?}",
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b)
            ));
        }
        a
    }

    /// One step written as a line ([`split`]); a leading `~` compares it
    /// with integers masked, `%` with digits masked.
    pub fn line(&mut self, what: &str, step: &str) {
        if let Some(s) = step.strip_prefix('~') {
            self.step_masked(what, &split(s), mask_ints);
        } else if let Some(s) = step.strip_prefix('%') {
            self.step_masked(what, &split(s), mask_digits);
        } else {
            self.step(what, &split(step));
        }
    }

    /// Asserts that no reply differed, listing those that did.
    pub fn finish(self, what: &str) {
        println!("{what}: {} steps compared byte for byte", self.steps);
        assert!(
            self.mismatches.is_empty(),
            "{} of {} replies differ:\n{}",
            self.mismatches.len(),
            self.steps,
            self.mismatches.join("\n")
        );
    }
}
