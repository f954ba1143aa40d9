//! The high-availability checker's load: workers writing through the proxy
//! to one shard's keys, one request at a time, every write a new key (so a
//! write lost in a failover cannot hide under a later one), every fourth
//! key deleted again once its write was acknowledged. What each worker
//! knows when it stops: the keys acknowledged, the deletes acknowledged,
//! and the time of every failed and every successful request, from which
//! the failover window is read.
//!
//! A request that failed (a transport error or an error reply) may or may
//! not have been applied: its key counts neither as acknowledged nor as
//! deleted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::check::client::{Client, Reply};

/// What one worker saw.
#[derive(Default)]
pub(crate) struct Seen {
    /// Keys whose SET was acknowledged (and not deleted afterwards).
    pub acked: Vec<String>,
    /// Keys whose DEL was acknowledged, with when (since the load's start).
    pub deleted: Vec<(String, Duration)>,
    /// Start of every failed request, since the load's start.
    pub failures: Vec<Duration>,
    /// Start and end of every successful request.
    pub successes: Vec<(Duration, Duration)>,
    pub last_error: String,
    /// The longest single request.
    pub max_request: Duration,
}

/// Running workers; [`Load::stop`] ends them and returns what they saw.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    handles: Vec<tokio::task::JoinHandle<Seen>>,
    pub t0: Instant,
}

impl Load {
    /// `workers` workers on keys `{tag}…` (one tag per worker: a tag is
    /// one shard's) through the proxy at `proxy`.
    pub(crate) fn start(proxy: &str, tags: &[String]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let handles = tags
            .iter()
            .enumerate()
            .map(|(w, tag)| {
                tokio::spawn(worker(
                    proxy.to_string(),
                    format!("{tag}:w{w}:"),
                    stop.clone(),
                    t0,
                ))
            })
            .collect();
        Load { stop, handles, t0 }
    }

    /// Time since the load started.
    pub(crate) fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    pub(crate) async fn stop(self) -> Result<Vec<Seen>, String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut out = Vec::new();
        for h in self.handles {
            out.push(h.await.map_err(|e| e.to_string())?);
        }
        Ok(out)
    }
}

async fn worker(proxy: String, prefix: String, stop: Arc<AtomicBool>, t0: Instant) -> Seen {
    let mut c = Client::new(&proxy, Duration::from_secs(5));
    let mut seen = Seen::default();
    let mut i: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("{prefix}{i}");
        let value = i.to_string();
        let ok = timed(
            &mut c,
            &mut seen,
            t0,
            &[b"SET", key.as_bytes(), value.as_bytes()],
        )
        .await;
        if ok && i % 4 == 3 {
            if timed(&mut c, &mut seen, t0, &[b"DEL", key.as_bytes()]).await {
                seen.deleted.push((key, t0.elapsed()));
            }
        } else if ok {
            seen.acked.push(key);
        }
        i += 1;
        if !seen.failures.is_empty() && seen.failures.len() % 100 == 0 {
            // A shard down for long: do not spin.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    seen
}

/// One request, its outcome recorded; true when it succeeded.
async fn timed(c: &mut Client, seen: &mut Seen, t0: Instant, args: &[&[u8]]) -> bool {
    let start = t0.elapsed();
    let r = c.call(args).await;
    let end = t0.elapsed();
    seen.max_request = seen.max_request.max(end - start);
    match r {
        Ok(Reply::Error(e)) | Err(e) => {
            seen.failures.push(start);
            seen.last_error = e;
            false
        }
        Ok(_) => {
            seen.successes.push((start, end));
            true
        }
    }
}

/// Totals over every worker.
pub(crate) struct Totals {
    pub ops: usize,
    pub errors: usize,
    /// From the first failed request to the end of the first successful one
    /// that started after it (`None`: no request failed).
    pub window: Option<Duration>,
    pub max_request: Duration,
    pub last_error: String,
}

pub(crate) fn totals(seen: &[Seen]) -> Totals {
    let first_fail = seen.iter().flat_map(|s| s.failures.iter()).min().copied();
    let window = first_fail.map(|f| {
        seen.iter()
            .flat_map(|s| s.successes.iter())
            .filter(|(start, _)| *start >= f)
            .map(|(_, end)| *end - f)
            .min()
            .unwrap_or(Duration::MAX)
    });
    Totals {
        ops: seen
            .iter()
            .map(|s| s.failures.len() + s.successes.len())
            .sum(),
        errors: seen.iter().map(|s| s.failures.len()).sum(),
        window,
        max_request: seen.iter().map(|s| s.max_request).max().unwrap_or_default(),
        last_error: seen
            .iter()
            .map(|s| s.last_error.clone())
            .find(|e| !e.is_empty())
            .unwrap_or_default(),
    }
}

/// Acknowledged keys a read through the proxy no longer finds, and deleted
/// keys it finds (of those deleted before `deleted_before`, all when None),
/// read at `addr` (the proxy, or one member directly).
pub(crate) async fn verify(
    addr: &str,
    seen: &[Seen],
    deleted_before: Option<Duration>,
) -> Result<(u64, u64), String> {
    let mut c = Client::new(addr, Duration::from_secs(10));
    let acked: Vec<&String> = seen.iter().flat_map(|s| s.acked.iter()).collect();
    let mut lost = 0;
    for chunk in acked.chunks(200) {
        for (k, v) in chunk.iter().zip(get_all(&mut c, chunk).await?) {
            let want = k.rsplit(':').next().unwrap_or("");
            if v.as_deref() != Some(want.as_bytes()) {
                lost += 1;
            }
        }
    }
    let deleted: Vec<&String> = seen
        .iter()
        .flat_map(|s| s.deleted.iter())
        .filter(|(_, at)| deleted_before.is_none_or(|b| *at < b))
        .map(|(k, _)| k)
        .collect();
    let mut resurrected = 0;
    for chunk in deleted.chunks(200) {
        let vals = get_all(&mut c, chunk).await?;
        resurrected += vals.iter().filter(|v| v.is_some()).count() as u64;
    }
    Ok((lost, resurrected))
}

/// GET of each key (one shard's keys: one MGET).
async fn get_all(c: &mut Client, keys: &[&String]) -> Result<Vec<Option<Vec<u8>>>, String> {
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(keys.iter().map(|k| k.as_bytes()));
    match c.call(&args).await? {
        Reply::Array(vals) if vals.len() == keys.len() => Ok(vals
            .into_iter()
            .map(|v| match v {
                Reply::Bulk(b) => b,
                _ => None,
            })
            .collect()),
        other => Err(format!("MGET: {}", other.text())),
    }
}
