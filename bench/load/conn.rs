//! One client connection of the load generator: it owns one of the crate's
//! client connections (`shardis::client::Conn`), encodes requests into it,
//! matches replies FIFO and records what it saw in its own `Stats`.
//!
//! Two ways to drive it:
//! - closed loop (`run_closed`): write a batch of `pipeline` requests, wait for
//!   all replies, repeat; latency is counted from the actual send.
//! - open loop (`run_open`): the pacer thread hands out intended send times;
//!   up to `pipeline` requests are in flight, the rest wait in a backlog, and
//!   latency is counted from the *intended* time so a stalled server is charged
//!   for the requests it delayed (no coordinated omission).

use crate::resp::Encoder;
use crate::stats::Stats;
use shardis::client::{self, ClientError};
use shardis::resp::parse_i64;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// Time allowed to open one connection.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Get,
    Set,
}

/// What every connection of a run shares.
pub struct Plan {
    pub encoder: Encoder,
    pub keys: u64,
    /// Percentage of GETs (100 = all GET, 0 = all SET).
    pub get_pct: u64,
    pub pipeline: usize,
    pub verify: bool,
    /// Requests intended before this are warm-up: sent, answered, not counted.
    pub measure_start: Instant,
    /// No new request is started at or after this.
    pub end: Instant,
    /// Replies still owed at this point are given up on and counted as unanswered.
    pub drain_deadline: Instant,
}

/// One intended send from the pacer.
#[derive(Clone, Copy, Debug)]
pub struct Tick {
    pub intended: Instant,
    pub measured: bool,
}

struct Pending {
    intended: Instant,
    sent: Instant,
    op: Op,
    key: u64,
    measured: bool,
}

/// xorshift64*: cheap, good enough for picking keys and operations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so nearby seeds give unrelated streams and 0 is fine.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Why a connection stopped early.
enum Fatal {
    Io(String),
    Deadline,
}

impl From<ClientError> for Fatal {
    fn from(e: ClientError) -> Fatal {
        match e {
            ClientError::ReadTimeout | ClientError::WriteTimeout => Fatal::Deadline,
            ClientError::Closed => Fatal::Io("connection closed by server".into()),
            ClientError::Protocol(e) => Fatal::Io(format!("protocol: {e}")),
            other => Fatal::Io(other.to_string()),
        }
    }
}

/// Opens one client connection (bounded in time, Nagle off). Its writes and
/// reads are bounded by the run's drain deadline, not by a timeout.
pub async fn connect(addr: &str) -> Result<client::Conn, String> {
    client::Conn::connect(addr, Duration::from_millis(CONNECT_TIMEOUT_MS))
        .await
        .map_err(|e| match e {
            ClientError::ConnectTimeout { .. } => {
                format!("connect to {addr}: timed out after {CONNECT_TIMEOUT_MS} ms")
            }
            other => other.to_string(),
        })
}

pub struct Conn {
    conn: client::Conn,
    inflight: VecDeque<Pending>,
    plan: Arc<Plan>,
    rng: Rng,
    scratch: Vec<u8>,
    pub stats: Stats,
}

impl Conn {
    pub fn new(conn: client::Conn, plan: Arc<Plan>, seed: u64) -> Conn {
        Conn {
            conn,
            inflight: VecDeque::new(),
            plan,
            rng: Rng::new(seed),
            scratch: Vec::with_capacity(64),
            stats: Stats::new(),
        }
    }

    /// Closed loop: batches of `pipeline` requests, each batch answered in full
    /// before the next. At most `quota` measured requests.
    pub async fn run_closed(mut self, mut quota: u64) -> Stats {
        let plan = Arc::clone(&self.plan);
        loop {
            let now = Instant::now();
            if now >= plan.end {
                break;
            }
            let measured = now >= plan.measure_start;
            let n = if measured {
                quota.min(plan.pipeline as u64)
            } else {
                plan.pipeline as u64
            };
            if n == 0 {
                break;
            }
            for _ in 0..n {
                self.queue_random(now, measured, now);
            }
            if measured {
                quota -= n;
            }
            if let Err(f) = self.flush_and_wait_all().await {
                self.fail(f);
                break;
            }
        }
        self.finish(0)
    }

    /// Closed loop over a fixed list of keys, all SET: used by `--preload`.
    pub async fn run_preload(mut self, keys: impl Iterator<Item = u64>) -> Stats {
        let batch = self.plan.pipeline.max(1);
        let mut keys = keys.peekable();
        while keys.peek().is_some() {
            let now = Instant::now();
            if now >= self.plan.end {
                break;
            }
            for key in keys.by_ref().take(batch) {
                self.queue(Op::Set, key, now, true, now);
            }
            if let Err(f) = self.flush_and_wait_all().await {
                self.fail(f);
                break;
            }
        }
        self.finish(0)
    }

    /// Open loop: sends at the times the pacer hands out until it hangs up,
    /// then collects the replies still owed (until the drain deadline).
    pub async fn run_open(mut self, mut ticks: UnboundedReceiver<Tick>) -> Stats {
        let plan = Arc::clone(&self.plan);
        let drain = tokio::time::Instant::from_std(plan.drain_deadline);
        let mut backlog: VecDeque<Tick> = VecDeque::new();
        let mut pacer_open = true;
        loop {
            let now = Instant::now();
            while self.inflight.len() < plan.pipeline {
                let Some(t) = backlog.pop_front() else { break };
                self.queue_random(t.intended, t.measured, now);
            }
            if self.conn.queued() > 0 {
                if let Err(f) = self.flush().await {
                    self.fail(f);
                    break;
                }
            }
            if !pacer_open && backlog.is_empty() && self.inflight.is_empty() {
                break;
            }
            tokio::select! {
                biased;
                r = self.conn.fill_until(drain) => {
                    // The drain deadline passing ends the run, without an error.
                    let step = match r {
                        Err(ClientError::ReadTimeout) => break,
                        r => r.map_err(Fatal::from).and_then(|()| self.take_replies()),
                    };
                    if let Err(f) = step {
                        self.fail(f);
                        break;
                    }
                }
                t = ticks.recv(), if pacer_open => match t {
                    Some(t) => {
                        backlog.push_back(t);
                        while let Ok(t) = ticks.try_recv() {
                            backlog.push_back(t);
                        }
                    }
                    None => pacer_open = false,
                },
            }
        }
        // Anything the pacer still had queued for us was never sent: the
        // target could not keep up with the rate.
        ticks.close();
        while let Ok(t) = ticks.try_recv() {
            backlog.push_back(t);
        }
        let unsent = backlog.iter().filter(|t| t.measured).count() as u64;
        self.finish(unsent)
    }

    fn queue_random(&mut self, intended: Instant, measured: bool, now: Instant) {
        let key = self.rng.next_u64() % self.plan.keys;
        let op = if self.rng.next_u64() % 100 < self.plan.get_pct {
            Op::Get
        } else {
            Op::Set
        };
        self.queue(op, key, intended, measured, now);
    }

    fn queue(&mut self, op: Op, key: u64, intended: Instant, measured: bool, now: Instant) {
        let (encoder, scratch) = (&self.plan.encoder, &mut self.scratch);
        self.conn.queue_with(|out| match op {
            Op::Get => encoder.encode_get(key, scratch, out),
            Op::Set => encoder.encode_set(key, scratch, out),
        });
        if measured {
            self.stats
                .record_lag(now.saturating_duration_since(intended));
        }
        self.inflight.push_back(Pending {
            intended,
            sent: now,
            op,
            key,
            measured,
        });
    }

    async fn flush(&mut self) -> Result<(), Fatal> {
        let deadline = tokio::time::Instant::from_std(self.plan.drain_deadline);
        self.conn.flush_until(deadline).await?;
        Ok(())
    }

    async fn flush_and_wait_all(&mut self) -> Result<(), Fatal> {
        self.flush().await?;
        let deadline = tokio::time::Instant::from_std(self.plan.drain_deadline);
        while !self.inflight.is_empty() {
            self.conn.fill_until(deadline).await?;
            self.take_replies()?;
        }
        Ok(())
    }

    /// Takes every complete reply off the read buffer and matches it to the
    /// oldest request in flight.
    fn take_replies(&mut self) -> Result<(), Fatal> {
        let now = Instant::now();
        while let Some(reply) = self.conn.try_reply()? {
            let Some(p) = self.inflight.pop_front() else {
                return Err(Fatal::Io("reply with no request in flight".into()));
            };
            if p.measured {
                // Open loop charges from the intended time; closed loop queues
                // with intended == actual send time.
                self.stats
                    .record_latency(now.saturating_duration_since(p.intended));
                self.stats
                    .record_service(now.saturating_duration_since(p.sent));
                self.stats.replies += 1;
                self.stats.last_reply = Some(now);
                self.check_reply(&p, &reply);
            }
        }
        Ok(())
    }

    fn check_reply(&mut self, p: &Pending, reply: &[u8]) {
        let body = &reply[1..reply.len() - 2];
        match (reply[0], p.op) {
            (b'-', _) => self.stats.error(String::from_utf8_lossy(body).into_owned()),
            (b'$', Op::Get) => {
                let header_end = memchr::memchr(b'\r', reply).unwrap_or(reply.len());
                let len = parse_i64(&reply[1..header_end]).unwrap_or(-1);
                if len < 0 {
                    self.stats.misses += 1;
                } else if self.plan.verify {
                    let value = &reply[header_end + 2..reply.len() - 2];
                    self.plan.encoder.key(p.key, &mut self.scratch);
                    if !self.plan.encoder.is_expected_value(&self.scratch, value) {
                        let key = String::from_utf8_lossy(&self.scratch).into_owned();
                        self.stats.verify_failure(format!(
                            "GET {key}: got {} bytes, not the value written",
                            value.len()
                        ));
                    }
                }
            }
            (b'+', Op::Set) => {}
            (tag, op) if self.plan.verify => {
                let head = String::from_utf8_lossy(&reply[..reply.len().min(40)]).into_owned();
                self.stats.verify_failure(format!(
                    "{op:?}: unexpected reply type '{}': {head:?}",
                    tag as char
                ));
            }
            _ => {}
        }
    }

    fn fail(&mut self, f: Fatal) {
        if let Fatal::Io(text) = f {
            self.stats.error(text);
        }
    }

    fn finish(mut self, unsent: u64) -> Stats {
        self.stats.unanswered += self.inflight.iter().filter(|p| p.measured).count() as u64;
        self.stats.unsent += unsent;
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn rng_streams_differ_by_seed_and_cover_small_ranges() {
        let (mut a, mut b) = (Rng::new(0), Rng::new(1));
        assert_ne!(a.next_u64(), b.next_u64());
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[(a.next_u64() % 10) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
