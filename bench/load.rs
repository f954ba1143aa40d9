//! `shardis-load`: a RESP load generator for shardis, twemproxy, redis-server.
//!
//! Many connections, pipelining, SET/GET/mixed workloads, closed loop (maximum
//! throughput) or open loop at a fixed total rate with latency measured from
//! each request's intended send time. HDR histograms; a human line or one JSON
//! object. Every run is bounded in time (`--duration`, default 10 s) and
//! optionally in count (`--requests`).
//!
//! ```text
//!  pacer thread (open loop) ──ticks──► conn 0..C (tokio tasks, one socket each)
//!                                       encode ─► write ─► read ─► reply_len ─► match FIFO ─► Stats
//!                                                                             merge ─► Report
//! ```

#[path = "load/conn.rs"]
mod conn;
#[path = "load/resp.rs"]
mod resp;
#[path = "load/stats.rs"]
mod stats;

use clap::Parser;
use conn::{Conn, Plan, Tick};
use stats::{Report, RunInfo, Stats};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEFAULT_DURATION_S: u64 = 10;
const MAX_DURATION_S: u64 = 3_600;
const MAX_CONNECTIONS: usize = 10_000;
const MAX_PIPELINE: usize = 10_000;
const MAX_VALUE_BYTES: usize = 16 * 1024 * 1024;
/// Preload runs closed loop with this many SETs per batch per connection.
const PRELOAD_BATCH: usize = 64;
const PRELOAD_MAX_CONNECTIONS: usize = 32;
const PRELOAD_TIMEOUT_S: u64 = 300;

#[derive(Parser, Debug)]
#[command(
    name = "shardis-load",
    about = "RESP load generator: closed-loop throughput or open-loop latency at a fixed rate"
)]
struct Args {
    /// Target host:port.
    #[arg(long, default_value = "127.0.0.1:7000")]
    addr: String,
    /// Number of client connections.
    #[arg(short = 'c', long, default_value_t = 50)]
    connections: usize,
    /// Requests in flight per connection (closed loop: batch size).
    #[arg(short = 'P', long, default_value_t = 1)]
    pipeline: usize,
    /// set | get | mixed:<get%> (e.g. mixed:90).
    #[arg(long, default_value = "get", value_parser = parse_workload)]
    workload: Workload,
    /// Value size in bytes for SET (and expected GET length with --verify).
    #[arg(short = 'd', long, default_value_t = 1024)]
    value_size: usize,
    /// Number of distinct keys; keys are picked uniformly at random.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Keys are <prefix><number>.
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// Open loop at this total rate (requests/s over all connections); closed loop when absent.
    #[arg(long)]
    rate: Option<f64>,
    /// Measured duration (after warm-up), e.g. 10s, 500ms, 2m. Always a bound (default 10s).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Stop after this many measured requests (the duration still bounds the run).
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// Unmeasured warm-up before the measured part.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    warmup: Duration,
    /// SET every key once before the run.
    #[arg(long)]
    preload: bool,
    /// Check every GET value has the length and content a SET of this tool writes.
    #[arg(long)]
    verify: bool,
    /// Print one JSON object instead of the human line.
    #[arg(long)]
    json: bool,
    /// A name for this run, echoed in the report.
    #[arg(long, default_value = "")]
    label: String,
    /// Runtime worker threads (1 = single-threaded runtime).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Seed for key and operation choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How long to wait for replies still owed after the measured part.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    drain_timeout: Duration,
}

#[derive(Clone, Debug)]
struct Workload {
    get_pct: u64,
    name: String,
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    let get_pct = match s {
        "get" => 100,
        "set" => 0,
        _ => match s.strip_prefix("mixed:") {
            Some(p) => match p.trim_end_matches('%').parse::<u64>() {
                Ok(n) if n <= 100 => n,
                _ => return Err(format!("'{s}': mixed:<get%> needs a percentage 0..=100")),
            },
            None => return Err(format!("'{s}': expected set, get or mixed:<get%>")),
        },
    };
    Ok(Workload {
        get_pct,
        name: s.to_string(),
    })
}

/// `10`, `10s`, `1.5s`, `500ms`, `2m`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    match num.parse::<f64>() {
        Ok(v) if v >= 0.0 && v * scale <= MAX_DURATION_S as f64 => {
            Ok(Duration::from_secs_f64(v * scale))
        }
        _ => Err(format!(
            "'{s}': expected a duration like 10s or 500ms, at most {MAX_DURATION_S}s"
        )),
    }
}

fn validate(a: &Args) -> Result<(), String> {
    if !(1..=MAX_CONNECTIONS).contains(&a.connections) {
        return Err(format!("--connections must be 1..={MAX_CONNECTIONS}"));
    }
    if !(1..=MAX_PIPELINE).contains(&a.pipeline) {
        return Err(format!("--pipeline must be 1..={MAX_PIPELINE}"));
    }
    if a.value_size > MAX_VALUE_BYTES {
        return Err(format!("--value-size must be at most {MAX_VALUE_BYTES}"));
    }
    if a.keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    if let Some(r) = a.rate {
        if !(r.is_finite() && r > 0.0 && r <= 10_000_000.0) {
            return Err("--rate must be > 0 and at most 10000000".into());
        }
    }
    if a.duration == Some(Duration::ZERO) {
        return Err("--duration must be positive".into());
    }
    if !(1..=64).contains(&a.threads) {
        return Err("--threads must be 1..=64".into());
    }
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = validate(&args) {
        eprintln!("shardis-load: {e}");
        std::process::exit(2);
    }
    let rt = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    }
    .expect("tokio runtime");
    match rt.block_on(run(&args)) {
        Ok(report) => {
            if args.json {
                println!("{}", report.json());
            } else {
                println!("{}", report.human());
            }
            if args.verify && (report.stats.verify_failures > 0 || report.stats.misses > 0) {
                std::process::exit(3);
            }
        }
        Err(e) => {
            eprintln!("shardis-load: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(args: &Args) -> Result<Report, String> {
    if args.preload {
        preload(args).await?;
    }
    let duration = args
        .duration
        .unwrap_or(Duration::from_secs(DEFAULT_DURATION_S));
    // Connect everything before the clock starts.
    let mut streams = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        streams.push(conn::connect(&args.addr).await?);
    }
    let start = Instant::now();
    let measure_start = start + args.warmup;
    let end = measure_start + duration;
    let plan = Arc::new(Plan {
        encoder: resp::Encoder::new(args.key_prefix.as_bytes(), args.value_size),
        keys: args.keys,
        get_pct: args.workload.get_pct,
        pipeline: args.pipeline,
        verify: args.verify,
        measure_start,
        end,
        drain_deadline: end + args.drain_timeout,
    });
    let conns = streams.into_iter().enumerate().map(|(i, stream)| {
        let seed = args.seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        Conn::new(stream, Arc::clone(&plan), seed)
    });

    let c = args.connections as u64;
    let mut tasks = Vec::with_capacity(args.connections);
    let mut pacer = None;
    match args.rate {
        None => {
            for (i, conn) in conns.enumerate() {
                let quota = match args.requests {
                    Some(n) => n / c + u64::from((i as u64) < n % c),
                    None => u64::MAX,
                };
                tasks.push(tokio::spawn(conn.run_closed(quota)));
            }
        }
        Some(rate) => {
            let mut senders = Vec::with_capacity(args.connections);
            for conn in conns {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                senders.push(tx);
                tasks.push(tokio::spawn(conn.run_open(rx)));
            }
            let plan = Arc::clone(&plan);
            let quota = args.requests.unwrap_or(u64::MAX);
            pacer = Some(std::thread::spawn(move || {
                pace(rate, start, &plan, quota, senders)
            }));
        }
    }
    let mut total = Stats::new();
    for t in tasks {
        total.merge(t.await.map_err(|e| format!("connection task: {e}"))?);
    }
    if let Some(p) = pacer {
        p.join().map_err(|_| "pacer thread panicked".to_string())?;
    }
    let elapsed = match total.last_reply {
        Some(last) => last.saturating_duration_since(plan.measure_start),
        None => duration,
    };
    Ok(Report {
        info: RunInfo {
            label: args.label.clone(),
            addr: args.addr.clone(),
            workload: args.workload.name.clone(),
            connections: args.connections,
            pipeline: args.pipeline,
            rate: args.rate,
            value_size: args.value_size,
            keys: args.keys,
        },
        stats: total,
        elapsed,
    })
}

/// The open-loop clock: request `j` (over all connections) is intended at
/// `start + j / rate` and goes to connection `j mod C`. Runs on its own OS
/// thread because `std::thread::sleep` wakes within tens of µs, while tokio's
/// timer wheel rounds up to whole milliseconds — which would be charged to
/// the target as latency.
fn pace(
    rate: f64,
    start: Instant,
    plan: &Plan,
    quota: u64,
    senders: Vec<tokio::sync::mpsc::UnboundedSender<Tick>>,
) {
    let interval_ns = 1e9 / rate;
    let mut measured_sent = 0u64;
    for j in 0u64.. {
        let intended = start + Duration::from_nanos((j as f64 * interval_ns) as u64);
        if intended >= plan.end {
            break;
        }
        let measured = intended >= plan.measure_start;
        if measured {
            if measured_sent >= quota {
                break;
            }
            measured_sent += 1;
        }
        let now = Instant::now();
        if intended > now {
            std::thread::sleep(intended - now);
        }
        // A closed receiver means that connection failed; its error is already counted.
        let _ = senders[(j % senders.len() as u64) as usize].send(Tick { intended, measured });
    }
}

/// SETs every key once, closed loop, before the measured run.
async fn preload(args: &Args) -> Result<(), String> {
    let started = Instant::now();
    let plan = Arc::new(Plan {
        encoder: resp::Encoder::new(args.key_prefix.as_bytes(), args.value_size),
        keys: args.keys,
        get_pct: 0,
        pipeline: PRELOAD_BATCH,
        verify: true,
        measure_start: started,
        end: started + Duration::from_secs(PRELOAD_TIMEOUT_S),
        drain_deadline: started + Duration::from_secs(PRELOAD_TIMEOUT_S + 5),
    });
    let n = args.connections.min(PRELOAD_MAX_CONNECTIONS) as u64;
    let mut tasks = Vec::new();
    for i in 0..n {
        let conn = Conn::new(conn::connect(&args.addr).await?, Arc::clone(&plan), i);
        let keys = (i..args.keys).step_by(n as usize);
        tasks.push(tokio::spawn(conn.run_preload(keys)));
    }
    let mut total = Stats::new();
    for t in tasks {
        total.merge(t.await.map_err(|e| format!("preload task: {e}"))?);
    }
    eprintln!(
        "shardis-load: preloaded {} of {} keys in {:.2}s, errors {}",
        total.replies,
        args.keys,
        started.elapsed().as_secs_f64(),
        total.errors
    );
    if let Some(e) = total.first_error.or(total.first_verify_failure) {
        return Err(format!("preload failed: {e}"));
    }
    if total.replies < args.keys {
        return Err(format!(
            "preload set only {} of {} keys",
            total.replies, args.keys
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse() {
        assert_eq!(parse_workload("get").unwrap().get_pct, 100);
        assert_eq!(parse_workload("set").unwrap().get_pct, 0);
        assert_eq!(parse_workload("mixed:90").unwrap().get_pct, 90);
        assert!(parse_workload("mixed:101").is_err());
        assert!(parse_workload("del").is_err());
    }

    #[test]
    fn durations_parse_with_units_and_are_bounded() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("2h").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("61m").is_err());
    }
}
