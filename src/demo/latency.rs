//! Latency through the proxy, two ways:
//!
//! * **open loop** at a fixed rate: each request has an intended send time
//!   (start + i / rate) and its latency is counted from that time, so a stall
//!   also charges the requests that should have been sent during it (no
//!   coordinated omission). Paced by plain threads with `thread::sleep`, whose
//!   wake-up is far tighter than the 1 ms tick of tokio's timer wheel, which
//!   would otherwise show up as client-side latency.
//! * **closed loop** at maximum speed: several connections, each sending a
//!   batch of `pipeline` requests and waiting for all replies before the next.
//!
//! Latencies go into HDR histograms in microseconds. Every run is bounded in
//! requests and in time.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use hdrhistogram::Histogram;
use serde::Serialize;

use super::conn;
use super::keys;
use crate::resp::reply::{is_error, reply_len};

/// How long replies still owed after the last send are waited for.
const DRAIN_MS: u64 = 5_000;
/// Unrecorded warm-up before each run, at most this long (and at most a fifth
/// of the run): connections open and the first requests fault pages in.
const MAX_WARMUP_MS: u64 = 500;
/// Highest latency the histograms track: 60 s.
const MAX_LATENCY_US: u64 = 60_000_000;

/// The command a run sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) enum Op {
    #[serde(rename = "GET")]
    Get,
    #[serde(rename = "SET")]
    Set,
}

impl Op {
    /// `GET` / `SET`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Get => "GET",
            Op::Set => "SET",
        }
    }
}

/// One latency run's figures.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct LatencyRun {
    pub op: Op,
    /// `open` (fixed rate) or `closed` (as fast as replies come).
    pub mode: &'static str,
    /// Target rate of an open-loop run, requests/s.
    pub target_rps: Option<f64>,
    pub connections: usize,
    pub pipeline: usize,
    pub requests: u64,
    pub errors: u64,
    pub secs: f64,
    pub ops_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl LatencyRun {
    /// `GET at 1000 rps` / `SET max c8 P16`.
    pub(crate) fn label(&self) -> String {
        match self.target_rps {
            Some(r) => format!("{} at {r:.0} rps", self.op.name()),
            None => format!(
                "{} max c{} P{}",
                self.op.name(),
                self.connections,
                self.pipeline
            ),
        }
    }
}

/// What a run needs to build requests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    pub op: Op,
    /// Keys `user:1..=keys` exist.
    pub keys: u64,
    pub value_size: usize,
}

impl Workload {
    /// One encoded request on a key chosen by `rng`. SETs write the same value
    /// the key already has, so the data set stays verifiable.
    fn request(&self, rng: &mut u64, out: &mut Vec<u8>) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let id = 1 + *rng % self.keys;
        let key = keys::key(id);
        out.clear();
        match self.op {
            Op::Get => {
                out.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n${}\r\n", key.len()).as_bytes());
                out.extend_from_slice(&key);
                out.extend_from_slice(b"\r\n");
            }
            Op::Set => {
                let mut v = Vec::with_capacity(self.value_size);
                keys::value(id, self.value_size, &mut v);
                out.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n${}\r\n", key.len()).as_bytes());
                out.extend_from_slice(&key);
                out.extend_from_slice(format!("\r\n${}\r\n", v.len()).as_bytes());
                out.extend_from_slice(&v);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

fn warmup(secs: f64) -> Duration {
    Duration::from_secs_f64(secs / 5.0).min(Duration::from_millis(MAX_WARMUP_MS))
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// How a run drives the load: mode, target rate, connections, pipeline.
type Shape = (&'static str, Option<f64>, usize, usize);

fn summarize(w: Workload, shape: Shape, h: &Histogram<u64>, errors: u64, secs: f64) -> LatencyRun {
    let (mode, target_rps, connections, pipeline) = shape;
    LatencyRun {
        op: w.op,
        mode,
        target_rps,
        connections,
        pipeline,
        requests: h.len(),
        errors,
        secs,
        ops_per_sec: h.len() as f64 / secs.max(1e-9),
        p50_us: h.value_at_quantile(0.50),
        p99_us: h.value_at_quantile(0.99),
        p999_us: h.value_at_quantile(0.999),
        max_us: h.max(),
    }
}

/// Open loop: `rate` requests/s in total over `conns` connections for `secs`.
/// Blocking (plain threads); call it from `spawn_blocking`.
pub(crate) fn open_loop(
    addr: &str,
    w: Workload,
    rate: f64,
    secs: f64,
    conns: usize,
) -> Result<LatencyRun, String> {
    let per_conn = rate / conns as f64;
    let warm = warmup(secs);
    let count = (per_conn * (secs + warm.as_secs_f64())).round().max(1.0) as u64;
    let period = Duration::from_secs_f64(1.0 / per_conn);
    let start = Instant::now() + Duration::from_millis(50);
    let record_from = start + warm;
    let results: Vec<Result<(Histogram<u64>, u64), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..conns)
            .map(|c| {
                // Connections take turns, so the total rate is smooth.
                let offset = period.mul_f64(c as f64 / conns as f64);
                s.spawn(move || {
                    let pace = Pace {
                        start: start + offset,
                        period,
                        count,
                        record_from,
                    };
                    open_conn(addr, w, pace, c as u64)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a pacer thread panicked".into()))
            })
            .collect()
    });
    let mut all = histogram();
    let mut errors = 0;
    for r in results {
        let (h, e) = r?;
        all.add(&h).map_err(|e| e.to_string())?;
        errors += e;
    }
    Ok(summarize(
        w,
        ("open", Some(rate), conns, 1),
        &all,
        errors,
        secs,
    ))
}

/// When one open-loop connection sends.
#[derive(Clone, Copy)]
struct Pace {
    start: Instant,
    period: Duration,
    count: u64,
    /// Requests due before this are sent but not recorded (warm-up).
    record_from: Instant,
}

/// One open-loop connection: a writer thread sends at the intended times, this
/// thread reads replies and charges each from its intended time.
fn open_conn(
    addr: &str,
    w: Workload,
    pace: Pace,
    seed: u64,
) -> Result<(Histogram<u64>, u64), String> {
    let Pace {
        start,
        period,
        count,
        record_from,
    } = pace;
    // Loopback connects at once or not at all; the bound keeps a dead
    // target from hanging the demo.
    let sock_addr = std::net::ToSocketAddrs::to_socket_addrs(addr)
        .map_err(|e| format!("connect {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("connect {addr}: no address"))?;
    let sock = std::net::TcpStream::connect_timeout(&sock_addr, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = sock.set_nodelay(true);
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut wsock = sock.try_clone().map_err(|e| e.to_string())?;
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let writer = std::thread::spawn(move || {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (seed + 1).wrapping_mul(0xA24B_AED4_963E_E407);
        let mut req = Vec::new();
        for i in 0..count {
            let due = start + period.mul_f64(i as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            w.request(&mut rng, &mut req);
            // Sent before the write, so the reader always finds it.
            if tx.send(due).is_err() || wsock.write_all(&req).is_err() {
                return;
            }
        }
    });
    let deadline = start + period.mul_f64(count as f64) + Duration::from_millis(DRAIN_MS);
    let mut h = histogram();
    let mut errors = 0u64;
    let mut got = 0u64;
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut rsock = sock;
    let result = loop {
        if got == count {
            break Ok(());
        }
        if Instant::now() > deadline {
            break Err(format!(
                "open loop on {addr}: {} replies still owed after the drain time",
                count - got
            ));
        }
        match rsock.read(&mut chunk) {
            Ok(0) => break Err("connection closed by the server".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                continue
            }
            Err(e) => break Err(e.to_string()),
        }
        let now = Instant::now();
        while let Some(n) = reply_len(&buf).map_err(|e| e.to_string())? {
            let reply = buf.split_to(n);
            let due = rx
                .recv_timeout(Duration::from_secs(1))
                .map_err(|_| "a reply nobody asked for".to_string())?;
            got += 1;
            if due < record_from {
                continue;
            }
            if is_error(&reply) {
                errors += 1;
            }
            let us = now.saturating_duration_since(due).as_micros() as u64;
            h.record(us.clamp(1, MAX_LATENCY_US))
                .map_err(|e| e.to_string())?;
        }
    };
    // Unblock a writer still sleeping or writing, then reap it.
    let _ = rsock.shutdown(std::net::Shutdown::Both);
    drop(rx);
    let _ = writer.join();
    result.map(|()| (h, errors))
}

/// Closed loop for `secs` (and at most `max_requests`) on `conns` connections,
/// `pipeline` requests per batch; latency of each request from its batch's send.
pub(crate) async fn closed_loop(
    addr: &str,
    w: Workload,
    secs: f64,
    conns: usize,
    pipeline: usize,
    max_requests: u64,
) -> Result<LatencyRun, String> {
    let record_from = Instant::now() + warmup(secs);
    let deadline = record_from + Duration::from_secs_f64(secs);
    let per_conn = max_requests / conns as u64;
    let mut tasks = Vec::new();
    for c in 0..conns {
        let addr = addr.to_string();
        tasks.push(tokio::spawn(async move {
            let mut conn = conn::connect(&addr).await?;
            let mut rng = 0xD1B5_4A32_D192_ED03u64 ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9);
            let mut h = histogram();
            let mut errors = 0u64;
            let mut req = Vec::new();
            let mut sent = 0u64;
            while Instant::now() < deadline && sent < per_conn {
                for _ in 0..pipeline {
                    w.request(&mut rng, &mut req);
                    conn.queue_raw(&req);
                }
                let t = Instant::now();
                let n = conn.flush().await?;
                for _ in 0..n {
                    let r = conn.read_reply().await?;
                    if t < record_from {
                        continue;
                    }
                    if is_error(&r) {
                        errors += 1;
                    }
                    h.record((t.elapsed().as_micros() as u64).clamp(1, MAX_LATENCY_US))
                        .map_err(|e| e.to_string())?;
                }
                sent += n as u64;
            }
            Ok::<_, String>((h, errors))
        }));
    }
    let mut all = histogram();
    let mut errors = 0;
    for t in tasks {
        let (h, e) = t.await.map_err(|e| e.to_string())??;
        all.add(&h).map_err(|e| e.to_string())?;
        errors += e;
    }
    let secs = record_from.elapsed().as_secs_f64();
    Ok(summarize(
        w,
        ("closed", None, conns, pipeline),
        &all,
        errors,
        secs,
    ))
}
