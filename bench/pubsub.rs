//! `shardis-pubsub`: pub/sub fan-out through the proxy against one
//! redis-server directly, side by side in one run.
//!
//! Starts (and stops, by their own handles) N redis-servers with a shardis
//! proxy over them (`--backend builtin`: N built-in nodes; `both`: a proxy
//! over each kind), and one more redis-server on its own. For each
//! repetition, in an order rotated every time, each target gets the same
//! work: S subscribers spread over C channels; P publishers send M messages
//! of D bytes round-robin over the channels, pipelined; the run ends when
//! every subscriber counted every message of its channel. Then PUBLISH
//! round trips on one connection (no subscribers): what broadcasting to N
//! nodes costs, next to a GET's round trip (one node). Prints medians as a table. Every run is bounded in count
//! and in time (`--timeout`); the sum of PUBLISH counts must equal the
//! deliveries counted, or the run fails.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use clap::Parser;
use shardis::client::Conn;
use shardis::resp::encode;

#[derive(Parser, Debug)]
#[command(
    name = "shardis-pubsub",
    about = "pub/sub fan-out: shardis over N nodes vs one redis-server"
)]
struct Args {
    /// Nodes behind each proxy.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// What the proxy runs over: redis-server nodes, built-in nodes, or a
    /// proxy over each.
    #[arg(long, default_value = "redis-server", value_parser = ["redis-server", "builtin", "both"])]
    backend: String,
    #[arg(long, default_value_t = 200)]
    subscribers: usize,
    #[arg(long, default_value_t = 20)]
    channels: usize,
    /// Messages published per run (rounded down to a multiple of channels × publishers).
    #[arg(short = 'n', long, default_value_t = 20_000)]
    messages: usize,
    /// Message size in bytes.
    #[arg(short = 'd', long, default_value_t = 100)]
    size: usize,
    #[arg(long, default_value_t = 4)]
    publishers: usize,
    /// PUBLISH requests in flight per publisher.
    #[arg(short = 'P', long, default_value_t = 32)]
    pipeline: usize,
    /// PUBLISH round trips measured for the latency row.
    #[arg(long, default_value_t = 5_000)]
    round_trips: usize,
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// The shardis binary (default: target/release/shardis).
    #[arg(long)]
    shardis: Option<String>,
    /// Bound on each run, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

/// A child we started; killed and reaped on drop.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    shardis::procs::bind_free()
        .map_err(std::io::Error::other)
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn wait_ping(port: u16, kid: &mut Kid, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !shardis::client::blocking::answers_ping(port, Duration::from_millis(500)) {
        if let Ok(Some(s)) = kid.0.try_wait() {
            return Err(format!("{what} exited during start-up ({s})"));
        }
        if Instant::now() > deadline {
            return Err(format!("{what} did not answer PING within 15 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn redis_server() -> Result<(Kid, u16), String> {
    let port = free_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server: {e}"))?;
    let mut kid = Kid(child);
    wait_ping(port, &mut kid, "redis-server")?;
    Ok((kid, port))
}

fn builtin_node(shardis: &str) -> Result<(Kid, u16), String> {
    let port = free_port();
    let child = Command::new(shardis)
        .args(["node", "--port", &port.to_string()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {shardis} node: {e}"))?;
    let mut kid = Kid(child);
    wait_ping(port, &mut kid, "shardis node")?;
    Ok((kid, port))
}

/// Starts a proxy over `nodes`; its handle and port.
fn proxy_over(shardis: &str, nodes: &[(Kid, u16)], a: &Args) -> Result<(Kid, u16), String> {
    let dir = std::env::temp_dir().join(format!(
        "shardis-pubsub-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let proxy_port = free_port();
    let mut cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{proxy_port}\"\nmax_pinned_per_node = {}\n",
        a.subscribers + 16
    );
    for (i, (_, port)) in nodes.iter().enumerate() {
        cfg.push_str(&format!(
            "[[nodes]]\naddr = \"127.0.0.1:{port}\"\nname = \"node{}\"\n",
            i + 1
        ));
    }
    let path = dir.join("proxy.toml");
    std::fs::write(&path, cfg).map_err(|e| e.to_string())?;
    let child = Command::new(shardis)
        .args([
            "proxy",
            "--config",
            &path.to_string_lossy(),
            "--exit-with-parent",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {shardis}: {e}"))?;
    let mut proxy = Kid(child);
    let started = wait_ping(proxy_port, &mut proxy, "shardis proxy");
    let _ = std::fs::remove_dir_all(&dir);
    started?;
    Ok((proxy, proxy_port))
}

fn command(args: &[&[u8]]) -> BytesMut {
    let mut out = BytesMut::new();
    encode::command(&mut out, args);
    out
}

async fn connect(port: u16) -> Conn {
    Conn::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(10))
        .await
        .expect("connect")
}

/// One fan-out run; (messages/s, deliveries/s).
async fn fanout(port: u16, a: &Args) -> Result<(f64, f64), String> {
    // Each channel gets `per_channel` messages, each publisher an equal share.
    let per_channel = (a.messages / (a.channels * a.publishers)).max(1) * a.publishers;
    let mine = per_channel * a.channels / a.publishers;
    let mut subs = Vec::with_capacity(a.subscribers);
    for i in 0..a.subscribers {
        let mut c = connect(port).await;
        let ch = format!("bench:{}", i % a.channels);
        c.queue_raw(&command(&[b"SUBSCRIBE", ch.as_bytes()]));
        c.flush().await.map_err(|e| e.to_string())?;
        let r = c.read_reply().await.map_err(|e| e.to_string())?;
        if r.starts_with(b"-") {
            return Err(String::from_utf8_lossy(&r).into_owned());
        }
        subs.push(c);
    }
    let readers: Vec<_> = subs
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                for _ in 0..per_channel {
                    c.read_reply().await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    let payload = Arc::new(vec![b'x'; a.size]);
    let started = Instant::now();
    let mut pubs = Vec::new();
    for p in 0..a.publishers {
        let (payload, depth, channels) = (payload.clone(), a.pipeline, a.channels);
        pubs.push(tokio::spawn(async move {
            let mut c = connect(port).await;
            let (mut counted, mut sent) = (0i64, 0);
            while sent < mine {
                let batch = depth.min(mine - sent);
                for k in 0..batch {
                    let ch = format!("bench:{}", (p + sent + k) % channels);
                    c.queue_raw(&command(&[b"PUBLISH", ch.as_bytes(), &payload]));
                }
                c.flush().await.map_err(|e| e.to_string())?;
                for _ in 0..batch {
                    counted += integer(&c.read_reply().await.map_err(|e| e.to_string())?)?;
                }
                sent += batch;
            }
            Ok::<_, String>(counted)
        }));
    }
    let mut counted = 0;
    for p in pubs {
        counted += p.await.map_err(|e| e.to_string())??;
    }
    for r in readers {
        r.await.map_err(|e| e.to_string())??;
    }
    let secs = started.elapsed().as_secs_f64();
    let deliveries = per_channel * a.subscribers;
    if counted as usize != deliveries {
        return Err(format!(
            "PUBLISH counted {counted} receivers, {deliveries} deliveries were counted"
        ));
    }
    let messages = per_channel * a.channels;
    Ok((messages as f64 / secs, deliveries as f64 / secs))
}

fn integer(r: &[u8]) -> Result<i64, String> {
    r.strip_prefix(b":")
        .and_then(|r| std::str::from_utf8(r).ok())
        .and_then(|s| s.trim_end().parse().ok())
        .ok_or_else(|| format!("expected an integer, got {:?}", String::from_utf8_lossy(r)))
}

/// Round trips of `req` on one connection: (p50, p99) in µs.
async fn round_trip(port: u16, n: usize, req: &[&[u8]]) -> Result<(f64, f64), String> {
    let mut c = connect(port).await;
    let mut lat = Vec::with_capacity(n);
    let raw = command(req);
    for _ in 0..n {
        let t = Instant::now();
        c.queue_raw(&raw);
        c.flush().await.map_err(|e| e.to_string())?;
        let r = c.read_reply().await.map_err(|e| e.to_string())?;
        if r.starts_with(b"-") {
            return Err(String::from_utf8_lossy(&r).into_owned());
        }
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    Ok((lat[n / 2], lat[n * 99 / 100]))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let a = Args::parse();
    if a.subscribers == 0
        || a.channels == 0
        || a.publishers == 0
        || a.reps == 0
        || a.pipeline == 0
        || a.round_trips == 0
    {
        eprintln!("shardis-pubsub: --subscribers, --channels, --publishers, --pipeline, --round-trips and --reps must be positive");
        std::process::exit(2);
    }
    if let Err(e) = run(&a) {
        eprintln!("shardis-pubsub: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), String> {
    let shardis = a.shardis.clone().unwrap_or_else(|| {
        let dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
        format!("{dir}/release/shardis")
    });
    let (_direct, direct_port) = redis_server()?;
    // Every child lives until the end of the run (dropped, so killed, then).
    let mut kids = Vec::new();
    let mut targets = vec![("redis-server".to_string(), direct_port)];
    let kinds = match a.backend.as_str() {
        "both" => vec!["redis-server", "builtin"],
        one => vec![one],
    };
    for kind in kinds {
        let mut nodes = Vec::new();
        for _ in 0..a.nodes {
            nodes.push(match kind {
                "builtin" => builtin_node(&shardis)?,
                _ => redis_server()?,
            });
        }
        let (proxy, port) = proxy_over(&shardis, &nodes, a)?;
        let what = match kind {
            "builtin" => "built-in nodes",
            _ => "redis-servers",
        };
        targets.push((format!("shardis over {} {what}", a.nodes), port));
        kids.push((nodes, proxy));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // [target] -> (msgs/s, deliveries/s, PUBLISH p50, p99, GET p50) per repetition.
    let mut res: Vec<[Vec<f64>; 5]> = targets.iter().map(|_| Default::default()).collect();
    let bound = Duration::from_secs(a.timeout);
    for rep in 0..a.reps {
        for k in 0..targets.len() {
            let t = (k + rep) % targets.len();
            let (name, port) = (&targets[t].0, targets[t].1);
            let (m, d) = rt
                .block_on(async { tokio::time::timeout(bound, fanout(port, a)).await })
                .map_err(|_| format!("{name}: fan-out run exceeded {}s", a.timeout))??;
            let publish: &[&[u8]] = &[b"PUBLISH", b"bench:nobody", b"x"];
            let get: &[&[u8]] = &[b"GET", b"bench:key"];
            let trips = async {
                let p = round_trip(port, a.round_trips, publish).await?;
                let g = round_trip(port, a.round_trips, get).await?;
                Ok::<_, String>((p, g))
            };
            let ((p50, p99), (g50, _)) = rt
                .block_on(async { tokio::time::timeout(bound, trips).await })
                .map_err(|_| format!("{name}: round trips exceeded {}s", a.timeout))??;
            eprintln!(
                "rep {rep} {name}: {m:.0} msg/s, {d:.0} deliveries/s, PUBLISH p50 {p50:.0} µs"
            );
            for (v, x) in res[t].iter_mut().zip([m, d, p50, p99, g50]) {
                v.push(x);
            }
        }
    }
    let per_channel = (a.messages / (a.channels * a.publishers)).max(1) * a.publishers;
    println!(
        "pub/sub fan-out: {} subscribers over {} channels, {} messages of {} B from {} publishers (pipeline {}), medians of {} runs\n",
        a.subscribers, a.channels, per_channel * a.channels, a.size, a.publishers, a.pipeline, a.reps
    );
    let mut head = String::from("| metric |");
    let mut rule = String::from("|---|");
    for (i, (name, _)) in targets.iter().enumerate() {
        head.push_str(&format!(" {name} |"));
        rule.push_str("---|");
        if i > 0 {
            head.push_str(" / direct |");
            rule.push_str("---|");
        }
    }
    println!("{head}\n{rule}");
    let rows = [
        "messages published /s",
        "messages delivered /s",
        "PUBLISH round trip p50 (µs)",
        "PUBLISH round trip p99 (µs)",
        "GET round trip p50 (µs), one node",
    ];
    for (i, row) in rows.iter().enumerate() {
        let d = median(&mut res[0][i]);
        let mut line = format!("| {row} | {d:.0} |");
        for r in res.iter_mut().skip(1) {
            let s = median(&mut r[i]);
            line.push_str(&format!(" {s:.0} | {:.2} |", s / d));
        }
        println!("{line}");
    }
    drop(kids);
    Ok(())
}
