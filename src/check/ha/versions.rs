//! The stale-read load and its judgement. Writers overwrite a few keys of
//! one shard with increasing versions through the proxy, one request at a
//! time, one writer a key, recording when each version was acknowledged;
//! readers, on connections of their own, GET those keys in turn and record
//! what they saw and when the read started. Under `read_from = "replica"`
//! with one replica a shard, every read that is answered was answered by
//! that replica: the proxy never falls back to the primary.
//!
//! A read is stale when it returns a version older than the newest one
//! acknowledged before the read started. [`judge`] turns the logs into
//! figures; it is pure, so it is unit-tested here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::check::client::{Client, Reply};

/// A read not answered within this is abandoned (its connection dropped):
/// a reader keeps reading while a replica it was sent to is stopped.
const READ_TIMEOUT: Duration = Duration::from_millis(250);
/// Digits of a version as written: every SET has the same size.
const VERSION_DIGITS: usize = 12;

/// What a writer did to its key.
#[derive(Default)]
pub(crate) struct WriterLog {
    /// Acknowledged versions, with when the acknowledgement arrived (since
    /// the load's start), in version order.
    pub acked: Vec<(u64, Duration)>,
    /// The highest version sent, acknowledged or not (a failed SET may
    /// still have been applied).
    pub attempted: u64,
    pub errors: u64,
}

/// What one read came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Version(u64),
    /// No value (the keys are written before any read starts).
    Nil,
    /// A value that is not a version.
    Alien,
    /// `-ERR no replica of … is in sync`: the proxy refused to read.
    Refused,
    /// Another error, or no reply within [`READ_TIMEOUT`].
    Failed,
}

/// One read: which key, when it started and ended, what it saw.
#[derive(Clone, Debug)]
pub(crate) struct Read {
    pub key: usize,
    pub start: Duration,
    pub end: Duration,
    pub outcome: Outcome,
}

/// Running writers and readers; [`Versions::stop`] ends them.
pub(crate) struct Versions {
    stop: Arc<AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<WriterLog>>,
    readers: Vec<tokio::task::JoinHandle<Vec<Read>>>,
    pub t0: Instant,
    /// The RESP size of one SET of the load.
    pub set_bytes: u64,
}

/// The keys of the load: `keys` keys under `tag`, all of one length.
pub(crate) fn keys(tag: &str, keys: usize) -> Vec<String> {
    (0..keys).map(|k| format!("{tag}:version:{k:03}")).collect()
}

fn value(version: u64) -> String {
    format!("{version:0VERSION_DIGITS$}")
}

/// The RESP encoding's size of `SET key value`.
pub(crate) fn set_size(key: &str, value_len: usize) -> u64 {
    let bulk = |n: usize| 1 + n.to_string().len() + 2 + n + 2;
    (4 + bulk(3) + bulk(key.len()) + bulk(value_len)) as u64
}

impl Versions {
    /// Writes version 0 of every key, waits (at most 10 s) until a read
    /// through the proxy sees each, then starts one writer a key and
    /// `readers` readers.
    pub(crate) async fn start(
        proxy: &str,
        keys: &[String],
        readers: usize,
    ) -> Result<Versions, String> {
        let mut c = Client::new(proxy, Duration::from_secs(5));
        for k in keys {
            let r = c.call(&[b"SET", k.as_bytes(), value(0).as_bytes()]).await?;
            if let Reply::Error(e) = r {
                return Err(format!("SET {k}: {e}"));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for k in keys {
            loop {
                match c.call(&[b"GET", k.as_bytes()]).await {
                    Ok(Reply::Bulk(Some(_))) => break,
                    other if Instant::now() > deadline => {
                        return Err(format!("GET {k} through a replica: {other:?}"))
                    }
                    _ => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let writers = keys
            .iter()
            .map(|k| tokio::spawn(writer(proxy.to_string(), k.clone(), stop.clone(), t0)))
            .collect();
        let readers = (0..readers)
            .map(|r| {
                let keys = keys.to_vec();
                tokio::spawn(reader(proxy.to_string(), keys, r, stop.clone(), t0))
            })
            .collect();
        Ok(Versions {
            stop,
            writers,
            readers,
            t0,
            set_bytes: set_size(&keys[0], VERSION_DIGITS),
        })
    }

    /// Time since the load started.
    pub(crate) fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    pub(crate) async fn stop(self) -> Result<(Vec<WriterLog>, Vec<Vec<Read>>), String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut w = Vec::new();
        for h in self.writers {
            w.push(h.await.map_err(|e| e.to_string())?);
        }
        let mut r = Vec::new();
        for h in self.readers {
            r.push(h.await.map_err(|e| e.to_string())?);
        }
        Ok((w, r))
    }
}

async fn writer(proxy: String, key: String, stop: Arc<AtomicBool>, t0: Instant) -> WriterLog {
    let mut c = Client::new(&proxy, Duration::from_secs(5));
    let mut log = WriterLog::default();
    let mut version = 0;
    while !stop.load(Ordering::Relaxed) {
        version += 1;
        log.attempted = version;
        let v = value(version);
        match c.call(&[b"SET", key.as_bytes(), v.as_bytes()]).await {
            Ok(Reply::Simple(_)) => log.acked.push((version, t0.elapsed())),
            _ => {
                log.errors += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
    log
}

async fn reader(
    proxy: String,
    keys: Vec<String>,
    first: usize,
    stop: Arc<AtomicBool>,
    t0: Instant,
) -> Vec<Read> {
    let mut c = Client::new(&proxy, READ_TIMEOUT);
    let mut reads = Vec::new();
    let mut key = first % keys.len();
    while !stop.load(Ordering::Relaxed) {
        let start = t0.elapsed();
        let outcome = outcome(c.call(&[b"GET", keys[key].as_bytes()]).await);
        let end = t0.elapsed();
        if outcome == Outcome::Refused {
            // Refused at once: do not spin while no replica is in sync.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        reads.push(Read {
            key,
            start,
            end,
            outcome,
        });
        key = (key + 1) % keys.len();
    }
    reads
}

/// Reads of `key` through `proxy`, one started every `every` until
/// `stop` is set, each on a connection of its own and waited for as
/// long as it takes (at most 5 s): which reads the proxy refused is then
/// known at every moment, whatever a stopped member holds up. One list a
/// read: no two are one client's.
pub(crate) async fn sample(
    proxy: String,
    key: String,
    every: Duration,
    stop: Arc<AtomicBool>,
    t0: Instant,
) -> Vec<Vec<Read>> {
    let mut handles = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let (proxy, key) = (proxy.clone(), key.clone());
        handles.push(tokio::spawn(async move {
            let mut c = Client::new(&proxy, Duration::from_secs(5));
            let start = t0.elapsed();
            let outcome = outcome(c.call(&[b"GET", key.as_bytes()]).await);
            Read {
                key: 0,
                start,
                end: t0.elapsed(),
                outcome,
            }
        }));
        tokio::time::sleep(every).await;
    }
    let mut out = Vec::new();
    for h in handles {
        if let Ok(r) = h.await {
            out.push(vec![r]);
        }
    }
    out
}

fn outcome(reply: Result<Reply, String>) -> Outcome {
    match reply {
        Ok(Reply::Bulk(Some(b))) => std::str::from_utf8(&b)
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(Outcome::Alien, Outcome::Version),
        Ok(Reply::Bulk(None)) => Outcome::Nil,
        Ok(Reply::Error(e)) if e.contains("is in sync") => Outcome::Refused,
        _ => Outcome::Failed,
    }
}

/// What the reads came to.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Figures {
    pub reads: u64,
    pub refused: u64,
    pub failed: u64,
    /// Answered with a version older than the newest acknowledged before
    /// the read started.
    pub stale: u64,
    /// The most versions a read was behind.
    pub max_versions: u64,
    /// The longest a read was behind: from the acknowledgement of the
    /// first version it missed to its start.
    pub max_behind: Duration,
    /// An estimate of the most replication stream a read was behind: the
    /// SETs to the shard acknowledged in that time, times one SET's size.
    pub max_bytes: u64,
    /// Reads that saw a value never written (or none at all).
    pub never_written: u64,
    /// Reads that saw an older version of a key than an earlier read of
    /// the same reader.
    pub backwards: u64,
}

impl Figures {
    pub(crate) fn answered(&self) -> u64 {
        self.reads - self.refused - self.failed
    }

    /// Stale reads as a share of answered reads, in per cent.
    pub(crate) fn stale_pct(&self) -> f64 {
        match self.answered() {
            0 => 0.0,
            n => self.stale as f64 * 100.0 / n as f64,
        }
    }
}

/// The figures of `reads` (one list per reader, in order) against the
/// writers' logs (`writes[k]` wrote key k), each SET `set_bytes` long.
pub(crate) fn judge(writes: &[WriterLog], reads: &[Vec<Read>], set_bytes: u64) -> Figures {
    let mut all_acks: Vec<Duration> = writes
        .iter()
        .flat_map(|w| w.acked.iter().map(|(_, at)| *at))
        .collect();
    all_acks.sort();
    let mut f = Figures::default();
    for reader in reads {
        let mut last = vec![0u64; writes.len()];
        for r in reader {
            f.reads += 1;
            let seen = match r.outcome {
                Outcome::Version(v) => v,
                Outcome::Refused => {
                    f.refused += 1;
                    continue;
                }
                Outcome::Failed => {
                    f.failed += 1;
                    continue;
                }
                Outcome::Nil | Outcome::Alien => {
                    f.never_written += 1;
                    continue;
                }
            };
            let w = &writes[r.key];
            if seen > w.attempted {
                f.never_written += 1;
                continue;
            }
            if seen < last[r.key] {
                f.backwards += 1;
            }
            last[r.key] = last[r.key].max(seen);
            // The newest version acknowledged before the read started.
            let before = w.acked.partition_point(|(_, at)| *at < r.start);
            let Some(&(newest, _)) = before.checked_sub(1).map(|i| &w.acked[i]) else {
                continue;
            };
            if seen >= newest {
                continue;
            }
            f.stale += 1;
            f.max_versions = f.max_versions.max(newest - seen);
            // The first version the read missed that was acknowledged.
            let missed = w.acked.partition_point(|(v, _)| *v <= seen);
            let since = w.acked[missed].1;
            f.max_behind = f.max_behind.max(r.start.saturating_sub(since));
            let n = all_acks.partition_point(|at| *at < r.start)
                - all_acks.partition_point(|at| *at < since);
            f.max_bytes = f.max_bytes.max(n as u64 * set_bytes);
        }
    }
    f
}

/// Of the reads that started in `[from, to)`: those not refused (under
/// `read_from = "replica"`, sent to the replica), and all.
pub(crate) fn not_refused_between(reads: &[Vec<Read>], from: Duration, to: Duration) -> (u64, u64) {
    let within: Vec<&Read> = reads
        .iter()
        .flatten()
        .filter(|r| r.start >= from && r.start < to)
        .collect();
    let sent = within
        .iter()
        .filter(|r| r.outcome != Outcome::Refused)
        .count();
    (sent as u64, within.len() as u64)
}

/// The first read in `[from, ∞)` that was refused: when.
pub(crate) fn first_refused(reads: &[Vec<Read>], from: Duration) -> Option<Duration> {
    reads
        .iter()
        .flatten()
        .filter(|r| r.start >= from && r.outcome == Outcome::Refused)
        .map(|r| r.end)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn read(key: usize, start: u64, outcome: Outcome) -> Read {
        Read {
            key,
            start: ms(start),
            end: ms(start),
            outcome,
        }
    }

    /// Key 0: versions 1, 2, 3 acknowledged at 10, 20, 30 ms; version 4
    /// sent but never acknowledged. Key 1: version 1 at 15 ms.
    fn writes() -> Vec<WriterLog> {
        vec![
            WriterLog {
                acked: vec![(1, ms(10)), (2, ms(20)), (3, ms(30))],
                attempted: 4,
                errors: 1,
            },
            WriterLog {
                acked: vec![(1, ms(15))],
                attempted: 1,
                errors: 0,
            },
        ]
    }

    #[test]
    fn a_read_is_stale_only_behind_a_version_acknowledged_before_it_started() {
        let cases = [
            // Newest before 25 ms is 2: 2 is fresh, 1 is one behind.
            (read(0, 25, Outcome::Version(2)), 0, 0),
            (read(0, 25, Outcome::Version(1)), 1, 1),
            // Version 3 was acknowledged at 30 ms, after the read started.
            (read(0, 30, Outcome::Version(2)), 0, 0),
            (read(0, 35, Outcome::Version(0)), 1, 3),
            // Version 4 was sent: seeing it is not stale, not alien.
            (read(0, 35, Outcome::Version(4)), 0, 0),
        ];
        for (r, stale, versions) in cases {
            let f = judge(&writes(), &[vec![r.clone()]], 50);
            assert_eq!((f.stale, f.max_versions), (stale, versions), "{r:?}");
            assert_eq!(f.never_written + f.backwards, 0, "{r:?}");
        }
    }

    #[test]
    fn staleness_is_timed_from_the_first_missed_version_and_sized_by_the_shards_writes() {
        // Version 0 of key 0 read at 35 ms: behind since version 1 (10 ms);
        // four SETs of the shard acknowledged from 10 ms to 35 ms.
        let f = judge(&writes(), &[vec![read(0, 35, Outcome::Version(0))]], 50);
        assert_eq!(f.max_behind, ms(25));
        assert_eq!(f.max_bytes, 4 * 50);
    }

    #[test]
    fn unwritten_values_and_backward_steps_are_counted() {
        let reads = vec![
            vec![
                read(0, 35, Outcome::Version(3)),
                read(0, 36, Outcome::Version(2)),
                read(1, 37, Outcome::Version(2)),
                read(1, 38, Outcome::Nil),
                read(1, 39, Outcome::Alien),
            ],
            // Another reader's order is its own.
            vec![read(0, 40, Outcome::Version(1))],
        ];
        let f = judge(&writes(), &reads, 50);
        assert_eq!((f.never_written, f.backwards), (3, 1));
        assert_eq!(f.reads, 6);
    }

    #[test]
    fn refused_and_failed_reads_are_not_answered() {
        let reads = vec![vec![
            read(0, 12, Outcome::Refused),
            read(0, 13, Outcome::Failed),
            read(0, 14, Outcome::Version(1)),
        ]];
        let f = judge(&writes(), &reads, 50);
        assert_eq!((f.reads, f.refused, f.failed, f.answered()), (3, 1, 1, 1));
        assert_eq!(not_refused_between(&reads, ms(12), ms(14)), (1, 2));
        assert_eq!(first_refused(&reads, ms(0)), Some(ms(12)));
    }

    #[test]
    fn a_set_is_sized_as_resp() {
        // *3 $3 SET $5 k:000 $12 000000000001
        let raw = "*3\r\n$3\r\nSET\r\n$5\r\nk:000\r\n$12\r\n000000000001\r\n";
        assert_eq!(set_size("k:000", 12), raw.len() as u64);
    }
}
