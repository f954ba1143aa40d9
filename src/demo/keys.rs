//! The demo's data: `user:<id>` keys (ids 1..=N) with a value derived from the
//! id, so any read can be checked byte for byte; plus the bulk steps over them:
//! write all (pipelined MSET on several connections), verify all (pipelined
//! MGET), and a reader that keeps reading while a topology change runs.
//!
//! Every loop here is bounded by the key count; every network wait by
//! [`super::conn::IO_TIMEOUT_MS`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde::Serialize;

use super::conn;
use super::progress::Progress;

/// Keys per MSET / MGET command.
pub(crate) const BATCH_KEYS: u64 = 100;
/// Commands in flight per connection.
pub(crate) const PIPELINE_DEPTH: usize = 8;
/// Keys per MGET in the verify step (bigger batches: fewer replies to merge).
const VERIFY_BATCH_KEYS: u64 = 500;

/// `user:<id>`.
pub(crate) fn key(id: u64) -> Vec<u8> {
    format!("user:{id}").into_bytes()
}

/// The value stored under `user:<id>`: the id, then letters that depend on it,
/// `size` bytes in all. Distinct per key, so a value served for the wrong key
/// is caught.
pub(crate) fn value(id: u64, size: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(format!("{id}:").as_bytes());
    let mut i = id as usize;
    while out.len() < size {
        out.push(b'a' + (i % 26) as u8);
        i += 7;
    }
    out.truncate(size);
}

/// Appends `$len\r\nbytes\r\n`.
fn push_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// One encoded `MSET user:a va user:a+1 va+1 …` for ids `ids`.
pub(crate) fn mset(ids: std::ops::Range<u64>, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity((ids.end - ids.start) as usize * (size + 40));
    out.extend_from_slice(
        format!("*{}\r\n$4\r\nMSET\r\n", 1 + 2 * (ids.end - ids.start)).as_bytes(),
    );
    let mut v = Vec::with_capacity(size);
    for id in ids {
        push_bulk(&mut out, &key(id));
        value(id, size, &mut v);
        push_bulk(&mut out, &v);
    }
    out
}

/// One encoded `MGET user:a user:a+1 …`.
pub(crate) fn mget(ids: std::ops::Range<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity((ids.end - ids.start) as usize * 24);
    out.extend_from_slice(format!("*{}\r\n$4\r\nMGET\r\n", 1 + ids.end - ids.start).as_bytes());
    for id in ids {
        push_bulk(&mut out, &key(id));
    }
    out
}

/// Ids `1..=n` cut into batches of `batch`, as half-open ranges.
fn batches(n: u64, batch: u64) -> impl Iterator<Item = std::ops::Range<u64>> {
    (0..n.div_ceil(batch)).map(move |b| 1 + b * batch..(1 + (b + 1) * batch).min(n + 1))
}

/// What a write step did.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct WriteStats {
    pub keys: u64,
    pub value_size: usize,
    pub connections: usize,
    pub secs: f64,
    pub keys_per_sec: f64,
}

/// Writes `user:1..=n` through `addr` with MSETs of [`BATCH_KEYS`], pipelined
/// [`PIPELINE_DEPTH`] deep on `conns` connections in parallel.
pub(crate) async fn write_all(
    addr: &str,
    n: u64,
    size: usize,
    conns: usize,
    progress: &Progress,
) -> Result<WriteStats, String> {
    let t0 = Instant::now();
    let encode = move |ids| mset(ids, size);
    let check = |r: &Bytes, _, _: &mut ()| conn::ok(r).map_err(|e| format!("MSET: {e}"));
    pipelined(addr, n, BATCH_KEYS, conns, progress, encode, check).await?;
    let secs = t0.elapsed().as_secs_f64();
    Ok(WriteStats {
        keys: n,
        value_size: size,
        connections: conns,
        secs,
        keys_per_sec: n as f64 / secs.max(1e-9),
    })
}

/// Sends one command per batch of `user:1..=n` (`batch` ids each, made by
/// `encode`) on `conns` connections in parallel, each taking every `conns`-th
/// batch and keeping [`PIPELINE_DEPTH`] in flight; `check` folds each reply
/// into that connection's `S` (an error from it stops the step). Returns one
/// `S` per connection.
async fn pipelined<S, E, C>(
    addr: &str,
    n: u64,
    batch: u64,
    conns: usize,
    progress: &Progress,
    encode: E,
    check: C,
) -> Result<Vec<S>, String>
where
    S: Default + Send + 'static,
    E: Fn(std::ops::Range<u64>) -> Vec<u8> + Copy + Send + 'static,
    C: Fn(&Bytes, std::ops::Range<u64>, &mut S) -> Result<(), String> + Copy + Send + 'static,
{
    let mut tasks = Vec::new();
    for w in 0..conns {
        let addr = addr.to_string();
        let progress = progress.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = conn::connect(&addr).await?;
            let mut st = S::default();
            let mine: Vec<_> = batches(n, batch)
                .enumerate()
                .filter(|(i, _)| i % conns == w)
                .map(|(_, r)| r)
                .collect();
            for round in mine.chunks(PIPELINE_DEPTH) {
                for ids in round {
                    c.queue_raw(&encode(ids.clone()));
                }
                for (r, ids) in c.round_trip().await?.iter().zip(round) {
                    check(r, ids.clone(), &mut st)?;
                }
                progress.add(round.iter().map(|r| r.end - r.start).sum());
            }
            Ok::<S, String>(st)
        }));
    }
    join_all(tasks).await
}

/// Awaits the tasks in order; the first failure (an error or a panic) fails
/// the step.
async fn join_all<T>(
    tasks: Vec<tokio::task::JoinHandle<Result<T, String>>>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.map_err(|e| e.to_string())??);
    }
    Ok(out)
}

/// What a read-back step found.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct ReadStats {
    /// Keys asked for.
    pub keys: u64,
    /// Keys with exactly the expected value.
    pub found: u64,
    /// Keys answered with nil.
    pub missing: u64,
    /// Keys answered with another value.
    pub wrong: u64,
    /// MGETs answered with an error (their keys count in none of the above).
    pub errors: u64,
    pub secs: f64,
}

impl ReadStats {
    fn add(&mut self, o: &ReadStats) {
        self.keys += o.keys;
        self.found += o.found;
        self.missing += o.missing;
        self.wrong += o.wrong;
        self.errors += o.errors;
    }
}

/// Checks one MGET reply for ids `ids`.
fn check_mget(reply: &Bytes, ids: std::ops::Range<u64>, size: usize, st: &mut ReadStats) {
    st.keys += ids.end - ids.start;
    let Ok(els) = conn::array(reply) else {
        st.errors += 1;
        return;
    };
    let mut want = Vec::with_capacity(size);
    for (id, el) in ids.zip(els) {
        match conn::bulk(el) {
            None => st.missing += 1,
            Some(got) => {
                value(id, size, &mut want);
                if got == want.as_slice() {
                    st.found += 1;
                } else {
                    st.wrong += 1;
                }
            }
        }
    }
}

/// Reads every key `user:1..=n` back through `addr` and checks each value.
pub(crate) async fn verify_all(
    addr: &str,
    n: u64,
    size: usize,
    conns: usize,
    progress: &Progress,
) -> Result<ReadStats, String> {
    let t0 = Instant::now();
    let check = move |r: &Bytes, ids, st: &mut ReadStats| {
        check_mget(r, ids, size, st);
        Ok(())
    };
    let per_conn = pipelined(addr, n, VERIFY_BATCH_KEYS, conns, progress, mget, check).await?;
    let mut total = ReadStats::default();
    for st in &per_conn {
        total.add(st);
    }
    total.secs = t0.elapsed().as_secs_f64();
    Ok(total)
}

/// Reads keys in order (MGETs of [`BATCH_KEYS`], wrapping around) until `stop`
/// is set or `max_keys` were read; what a client sees during a topology change.
pub(crate) async fn read_until(
    addr: String,
    n: u64,
    size: usize,
    first: u64,
    stop: Arc<AtomicBool>,
    max_keys: u64,
) -> Result<ReadStats, String> {
    let t0 = Instant::now();
    let mut c = conn::connect(&addr).await?;
    let mut st = ReadStats::default();
    let mut next = first % n;
    while !stop.load(Ordering::Relaxed) && st.keys < max_keys {
        let start = 1 + next;
        let end = (start + BATCH_KEYS).min(n + 1);
        c.queue_raw(&mget(start..end));
        match c.round_trip().await {
            Ok(r) => check_mget(&r[0], start..end, size, &mut st),
            Err(_) => {
                // A transport failure: count it and carry on, on a new connection.
                st.errors += 1;
                st.keys += end - start;
                c = conn::connect(&addr).await?;
            }
        }
        next = (end - 1) % n;
    }
    st.secs = t0.elapsed().as_secs_f64();
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_sized_and_distinct() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        value(1, 100, &mut a);
        value(2, 100, &mut b);
        assert_eq!(a.len(), 100);
        assert_ne!(a, b);
        value(123456789, 4, &mut a);
        assert_eq!(a, b"1234");
    }

    #[test]
    fn batches_cover_every_id_once() {
        let all: Vec<u64> = batches(1005, 100).flatten().collect();
        assert_eq!(all, (1..=1005).collect::<Vec<_>>());
    }

    #[test]
    fn mget_reply_is_checked_per_key() {
        let mut v = Vec::new();
        value(2, 8, &mut v);
        let reply = format!(
            "*3\r\n$-1\r\n$8\r\n{}\r\n$8\r\nwrongval\r\n",
            String::from_utf8_lossy(&v)
        );
        let mut st = ReadStats::default();
        check_mget(&Bytes::from(reply), 1..4, 8, &mut st);
        assert_eq!((st.keys, st.found, st.missing, st.wrong), (3, 1, 1, 1));
    }
}
