//! `SLOWLOG GET [n] | LEN | RESET | HELP`, answered by the proxy: requests
//! slower than `slowlog.log_slower_than_us` end to end (decoded → reply
//! ready), with the node that served them.
//!
//! The session calls [`SlowLog::is_slow`] (one comparison) for every answered
//! request and [`SlowLog::record`] for the slow ones only; the mutex is taken
//! there and by the SLOWLOG command, never on an ordinary request. The log is
//! bounded by `slowlog.max_len` entries, each bounded like Redis's: at most 32
//! arguments of at most 128 bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};

use crate::resp::{encode, eq_ignore_case, parse_i64};

/// Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
const MAX_ARGS: usize = 32;
const MAX_ARG_BYTES: usize = 128;
/// Entries SLOWLOG GET returns without a count.
const DEFAULT_GET: usize = 10;

/// One slow request.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: u64,
    /// Unix seconds when it was answered.
    pub timestamp: u64,
    pub duration_us: u64,
    pub args: Vec<Bytes>,
    pub peer: String,
    pub client_name: Bytes,
    /// The node(s) that served it: a name, `N nodes`, or `proxy`.
    pub node: String,
}

/// The bounded log of slow requests.
pub struct SlowLog {
    /// Negative: disabled; 0: every request.
    slower_than_us: i64,
    max_len: usize,
    next_id: AtomicU64,
    entries: Mutex<VecDeque<Entry>>,
}

impl SlowLog {
    pub fn new(slower_than_us: i64, max_len: usize) -> SlowLog {
        SlowLog {
            slower_than_us,
            max_len,
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
        }
    }

    /// True when a request that took `us` belongs in the log.
    #[inline]
    pub fn is_slow(&self, us: u64) -> bool {
        self.slower_than_us >= 0 && us >= self.slower_than_us as u64
    }

    /// Logs one slow request; `args` are cut like Redis does.
    pub fn record(
        &self,
        duration_us: u64,
        args: &[Bytes],
        peer: &str,
        client_name: Option<&Bytes>,
        node: &str,
    ) {
        if self.max_len == 0 {
            return;
        }
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            timestamp: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            duration_us,
            args: truncate_args(args),
            peer: peer.to_string(),
            client_name: client_name.cloned().unwrap_or_default(),
            node: node.to_string(),
        };
        if let Ok(mut e) = self.entries.lock() {
            e.push_front(entry);
            e.truncate(self.max_len);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The newest `n` entries, newest first.
    pub fn newest(&self, n: usize) -> Vec<Entry> {
        self.entries
            .lock()
            .map(|e| e.iter().take(n).cloned().collect())
            .unwrap_or_default()
    }

    pub fn reset(&self) {
        if let Ok(mut e) = self.entries.lock() {
            e.clear();
        }
    }

    /// Answers `SLOWLOG …` (`args[0]` is `SLOWLOG`).
    pub fn command(&self, args: &[Bytes]) -> Bytes {
        let mut out = BytesMut::new();
        let sub = &args[1];
        let known = ["get", "len", "reset", "help"]
            .into_iter()
            .find(|k| eq_ignore_case(sub, k.as_bytes()));
        if known.is_some_and(|k| k != "get") && args.len() != 2 {
            encode::error(
                &mut out,
                &format!(
                    "ERR wrong number of arguments for 'slowlog|{}' command",
                    known.unwrap_or_default()
                ),
            );
        } else if known == Some("get") && args.len() <= 3 {
            let n = match args.get(2).map(|a| parse_i64(a)) {
                None => DEFAULT_GET,
                Some(Some(-1)) => usize::MAX,
                Some(Some(n)) if n >= 0 => n as usize,
                Some(_) => {
                    encode::error(&mut out, "ERR count should be greater than or equal to -1");
                    return out.freeze();
                }
            };
            let entries = self.newest(n);
            encode::array_len(&mut out, entries.len());
            for e in &entries {
                encode_entry(&mut out, e);
            }
        } else if known == Some("len") {
            encode::integer(&mut out, self.len() as i64);
        } else if known == Some("reset") {
            self.reset();
            encode::simple(&mut out, "OK");
        } else if known == Some("help") {
            encode::array_len(&mut out, HELP.len());
            for line in HELP {
                encode::simple(&mut out, line);
            }
        } else if known == Some("get") {
            encode::error(
                &mut out,
                &format!(
                    "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                    String::from_utf8_lossy(sub)
                ),
            );
        } else {
            encode::error(
                &mut out,
                &format!(
                    "ERR unknown subcommand '{}'. Try SLOWLOG HELP.",
                    String::from_utf8_lossy(sub)
                ),
            );
        }
        out.freeze()
    }
}

const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "    (shardis adds a seventh field: the node that served the request)",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

/// Redis's reply shape — id, timestamp, µs, args, client addr, client name —
/// plus the node as a seventh field (clients read the first six).
fn encode_entry(out: &mut BytesMut, e: &Entry) {
    encode::array_len(out, 7);
    encode::integer(out, e.id as i64);
    encode::integer(out, e.timestamp as i64);
    encode::integer(out, e.duration_us as i64);
    encode::array_len(out, e.args.len());
    for a in &e.args {
        encode::bulk(out, a);
    }
    encode::bulk(out, e.peer.as_bytes());
    encode::bulk(out, &e.client_name);
    encode::bulk(out, e.node.as_bytes());
}

/// At most 32 arguments (the last says how many more there were), each at
/// most 128 bytes (followed by how many more bytes there were), as Redis.
fn truncate_args(args: &[Bytes]) -> Vec<Bytes> {
    let kept = args.len().min(MAX_ARGS);
    (0..kept)
        .map(|j| {
            if kept != args.len() && j == kept - 1 {
                Bytes::from(format!("... ({} more arguments)", args.len() - kept + 1))
            } else if args[j].len() > MAX_ARG_BYTES {
                let mut b = args[j][..MAX_ARG_BYTES].to_vec();
                b.extend_from_slice(
                    format!("... ({} more bytes)", args[j].len() - MAX_ARG_BYTES).as_bytes(),
                );
                Bytes::from(b)
            } else {
                args[j].clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<Bytes> {
        list.iter().map(|a| Bytes::from(a.to_string())).collect()
    }

    #[test]
    fn arguments_are_cut_like_redis() {
        let many: Vec<Bytes> = (0..40).map(|i| Bytes::from(i.to_string())).collect();
        let cut = truncate_args(&many);
        assert_eq!(cut.len(), 32);
        assert_eq!(&cut[30][..], b"30");
        assert_eq!(&cut[31][..], b"... (9 more arguments)");
        let long = vec![Bytes::from(vec![b'v'; 200])];
        let cut = truncate_args(&long);
        assert_eq!(cut[0].len(), 128 + "... (72 more bytes)".len());
        assert!(cut[0].ends_with(b"v... (72 more bytes)"));
    }

    #[test]
    fn log_is_bounded_newest_first() {
        let log = SlowLog::new(0, 3);
        for i in 0..5 {
            log.record(
                i,
                &args(&["GET", &format!("k{i}")]),
                "1.2.3.4:5",
                None,
                "n1",
            );
        }
        assert_eq!(log.len(), 3);
        let got = log.newest(10);
        assert_eq!(got[0].id, 4);
        assert_eq!(got[2].id, 2);
        assert_eq!(&log.command(&args(&["SLOWLOG", "len"]))[..], b":3\r\n");
        assert_eq!(&log.command(&args(&["SLOWLOG", "RESET"]))[..], b"+OK\r\n");
        assert!(log.is_empty());
    }

    #[test]
    fn entry_has_redis_shape_plus_node() {
        let log = SlowLog::new(10, 8);
        assert!(!log.is_slow(9));
        assert!(log.is_slow(10));
        assert!(!SlowLog::new(-1, 8).is_slow(u64::MAX));
        log.record(
            15,
            &args(&["GET", "k"]),
            "127.0.0.1:9",
            Some(&Bytes::from("app")),
            "node2",
        );
        let r = log.command(&args(&["SLOWLOG", "GET", "1"]));
        let text = String::from_utf8_lossy(&r);
        assert!(text.starts_with("*1\r\n*7\r\n:0\r\n:"), "{text}");
        assert!(
            text.ends_with(":15\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n$11\r\n127.0.0.1:9\r\n$3\r\napp\r\n$5\r\nnode2\r\n"),
            "{text}"
        );
    }

    #[test]
    fn bad_subcommands_get_redis_errors() {
        let log = SlowLog::new(10, 8);
        for (req, want) in [
            (&["SLOWLOG", "GET", "x"][..], "-ERR count should be greater than or equal to -1\r\n"),
            (&["SLOWLOG", "GET", "-2"][..], "-ERR count should be greater than or equal to -1\r\n"),
            (&["SLOWLOG", "GET", "1", "2"][..], "-ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.\r\n"),
            (&["SLOWLOG", "nope"][..], "-ERR unknown subcommand 'nope'. Try SLOWLOG HELP.\r\n"),
            (&["SLOWLOG", "LEN", "1"][..], "-ERR wrong number of arguments for 'slowlog|len' command\r\n"),
        ] {
            assert_eq!(String::from_utf8_lossy(&log.command(&args(req))), want);
        }
        assert!(log
            .command(&args(&["SLOWLOG", "HELP"]))
            .starts_with(b"*13\r\n+SLOWLOG"));
    }
}
