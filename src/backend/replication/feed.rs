//! The replication stream as the node keeps it: the backlog (the last
//! bytes of the stream, with their offsets), the replication ids, and the
//! replicas reading from it.
//!
//! One buffer serves both as the backlog and as every replica's output
//! buffer (as Redis 7 shares its replication buffer): a replica is a read
//! position into it. The buffer keeps at least `repl-backlog-size` bytes,
//! and more while a connected replica still needs them, up to the
//! `client-output-buffer-limit replica` limits: a replica that falls
//! further behind than the hard limit, or behind the soft limit for longer
//! than its seconds, is cut off (it then reconnects and resyncs) and stops
//! holding memory.
//!
//! Owned by `Repl` behind a std mutex (appends are a copy; nothing awaits
//! while holding it). Pure: no I/O.

use crate::backend::pubsub::mailbox::Limits;
use std::collections::VecDeque;
use std::time::Instant;

/// A replica reading the stream (on the primary).
#[derive(Debug)]
pub(crate) struct Reader {
    pub(crate) id: u64,
    /// Bytes of the stream handed to its connection.
    pub(crate) pos: u64,
    /// The last offset it acknowledged (REPLCONF ACK).
    pub(crate) ack: u64,
    pub(crate) ip: String,
    pub(crate) port: u16,
    /// `wait_bgsave`, `send_bulk` or `online`, as INFO shows it.
    pub(crate) state: &'static str,
    pub(crate) last_ack: Instant,
    /// Since when it has been behind the soft limit.
    soft_since: Option<Instant>,
    /// Cut off for falling too far behind.
    pub(crate) kicked: bool,
}

/// The stream, its ids and its readers.
pub(crate) struct Feed {
    pub(crate) replid: String,
    /// The id this history had before the last promotion.
    pub(crate) replid2: String,
    /// The first offset (plus one) not covered by `replid2`; -1 = none.
    pub(crate) second_offset: i64,
    buf: VecDeque<u8>,
    /// Bytes ever in the stream: `master_repl_offset`.
    end: u64,
    /// Whether the backlog exists (created when the first replica
    /// attaches, or when this node replicates).
    pub(crate) active: bool,
    /// A transaction being recorded: its bytes and how many commands.
    tx: Option<(Vec<u8>, usize)>,
    pub(crate) readers: Vec<Reader>,
}

/// A fresh 40-hex-digit replication id.
pub(crate) fn new_replid() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(40);
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_usize(out.len());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            replid: new_replid(),
            replid2: "0".repeat(40),
            second_offset: -1,
            buf: VecDeque::new(),
            end: 0,
            active: false,
            tx: None,
            readers: Vec::new(),
        }
    }
}

impl Feed {
    /// `master_repl_offset`.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// The offset of the first byte still in the backlog, as Redis's
    /// `repl_backlog_first_byte_offset` (one past the end when empty).
    pub(crate) fn first_byte(&self) -> u64 {
        self.end - self.buf.len() as u64 + 1
    }

    /// Bytes in the backlog.
    pub(crate) fn histlen(&self) -> usize {
        self.buf.len()
    }

    /// Appends bytes to the stream (or to the transaction being recorded).
    pub(crate) fn append(&mut self, bytes: &[u8]) {
        if let Some((tx, n)) = &mut self.tx {
            tx.extend_from_slice(bytes);
            *n += 1;
            return;
        }
        self.push(bytes);
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
        self.end += bytes.len() as u64;
    }

    /// Starts recording a transaction (EXEC, a script): its commands are
    /// sent as one MULTI … EXEC.
    pub(crate) fn begin_tx(&mut self) {
        self.tx = Some((Vec::new(), 0));
    }

    /// Ends the transaction: more than one command goes out wrapped in
    /// MULTI/EXEC, a single one as it is.
    pub(crate) fn end_tx(&mut self) {
        match self.tx.take() {
            Some((bytes, n)) if n > 1 => {
                self.push(b"*1\r\n$5\r\nMULTI\r\n");
                self.push(&bytes);
                self.push(b"*1\r\n$4\r\nEXEC\r\n");
            }
            Some((bytes, _)) => self.push(&bytes),
            None => {}
        }
    }

    /// Enforces the replica limits and trims the backlog to what is still
    /// wanted: `backlog` bytes, and what unkicked readers have not sent.
    pub(crate) fn trim(&mut self, backlog: usize, limits: &Limits, now: Instant) {
        let end = self.end;
        let mut keep = backlog as u64;
        for r in self.readers.iter_mut().filter(|r| !r.kicked) {
            let lag = end - r.pos;
            if limits.hard > 0 && lag > limits.hard {
                r.kicked = true;
            } else if limits.soft > 0 && lag > limits.soft {
                let since = *r.soft_since.get_or_insert(now);
                if now.duration_since(since).as_secs() >= limits.soft_secs {
                    r.kicked = true;
                }
            } else {
                r.soft_since = None;
            }
            if !r.kicked {
                keep = keep.max(lag);
            }
        }
        let keep = keep.min(self.buf.len() as u64) as usize;
        let drop = self.buf.len() - keep;
        if drop > 0 {
            self.buf.drain(..drop);
        }
    }

    /// Whether a replica asking for `replid` from offset `from` (the next
    /// byte it wants) can continue from the backlog.
    pub(crate) fn can_continue(&self, replid: &str, from: u64) -> bool {
        let known = replid == self.replid
            || (replid == self.replid2 && (from as i64) <= self.second_offset);
        known && self.active && from >= self.first_byte() && from <= self.end + 1
    }

    /// Up to `max` stream bytes after offset `pos`; empty when there are
    /// none yet, `None` when they have left the backlog.
    pub(crate) fn read(&self, pos: u64, max: usize) -> Option<Vec<u8>> {
        let start = self.end - self.buf.len() as u64;
        if pos < start {
            return None;
        }
        let from = (pos - start) as usize;
        let n = (self.buf.len() - from).min(max);
        Some(self.buf.range(from..from + n).copied().collect())
    }

    /// Adopts a primary's history after a full sync: `replid` at `offset`.
    pub(crate) fn reset(&mut self, replid: &str, offset: u64) {
        self.replid = replid.to_string();
        self.replid2 = "0".repeat(40);
        self.second_offset = -1;
        self.buf.clear();
        self.end = offset;
        self.active = true;
        self.tx = None;
    }

    /// A new id for this history (a promotion, or a primary that changed
    /// its id): the old one stays valid up to the current offset.
    pub(crate) fn shift_id(&mut self, new: String) {
        self.replid2 = std::mem::replace(&mut self.replid, new);
        self.second_offset = self.end as i64 + 1;
    }

    /// Registers a reader at `pos`.
    pub(crate) fn add_reader(
        &mut self,
        id: u64,
        pos: u64,
        ip: String,
        port: u16,
        state: &'static str,
    ) {
        self.readers.push(Reader {
            id,
            pos,
            ack: 0,
            ip,
            port,
            state,
            last_ack: Instant::now(),
            soft_since: None,
            kicked: false,
        });
    }

    pub(crate) fn reader(&mut self, id: u64) -> Option<&mut Reader> {
        self.readers.iter_mut().find(|r| r.id == id)
    }

    pub(crate) fn remove_reader(&mut self, id: u64) {
        self.readers.retain(|r| r.id != id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        hard: 100,
        soft: 0,
        soft_secs: 0,
    };

    #[test]
    fn the_backlog_keeps_its_size_and_what_readers_still_need() {
        let mut f = Feed {
            active: true,
            ..Feed::default()
        };
        f.add_reader(1, 0, "127.0.0.1".into(), 1, "online");
        f.append(&[b'x'; 50]);
        f.trim(10, &LIMITS, Instant::now());
        assert_eq!(f.histlen(), 50, "the reader has read nothing yet");
        assert_eq!(f.read(0, 100).unwrap().len(), 50);
        f.reader(1).unwrap().pos = 50;
        f.trim(10, &LIMITS, Instant::now());
        assert_eq!(f.histlen(), 10);
        assert_eq!(f.first_byte(), 41);
        assert!(f.read(0, 10).is_none(), "gone from the backlog");
        assert!(f.can_continue(&f.replid.clone(), 41));
        assert!(!f.can_continue(&f.replid.clone(), 40));
        assert!(f.can_continue(&f.replid.clone(), 51));
        assert!(!f.can_continue(&f.replid.clone(), 52));
        f.append(&[b'y'; 200]);
        f.trim(10, &LIMITS, Instant::now());
        assert!(f.reader(1).unwrap().kicked, "past the hard limit");
        assert_eq!(f.histlen(), 10, "a cut-off reader holds nothing");
    }

    #[test]
    fn a_promoted_history_answers_to_both_ids() {
        let mut f = Feed {
            active: true,
            ..Feed::default()
        };
        f.append(b"abc");
        let old = f.replid.clone();
        f.shift_id(new_replid());
        f.append(b"de");
        assert!(f.can_continue(&old, 4));
        assert!(!f.can_continue(&old, 5), "past the old history's end");
        assert!(f.can_continue(&f.replid.clone(), 6));
    }

    #[test]
    fn a_transaction_of_several_commands_is_wrapped() {
        let mut f = Feed::default();
        f.begin_tx();
        f.append(b"A");
        f.end_tx();
        f.begin_tx();
        f.append(b"B");
        f.append(b"C");
        f.end_tx();
        let all = f.read(0, 1000).unwrap();
        assert_eq!(all, b"A*1\r\n$5\r\nMULTI\r\nBC*1\r\n$4\r\nEXEC\r\n");
    }
}
