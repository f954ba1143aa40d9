//! Online migration: moving exactly the keys whose owner changed, while
//! clients keep being served.
//!
//! The protocol (see the README's "Migration" section for the argument):
//! 1. The admin path builds the new ring and swaps in a routing snapshot that
//!    carries the previous ring. From then on every request is routed by the
//!    new ring.
//! 2. The **epoch barrier**: wait until no session is still dispatching with
//!    the old snapshot, then send a PING through every old connection. After
//!    that, nothing routed by the old ring is pending anywhere.
//! 3. Sessions: before forwarding any command on a key whose owner changed,
//!    [`ensure_moved`] runs `MIGRATE new-host new-port key 0 timeout REPLACE`
//!    on the old owner. MIGRATE is atomic at the source: the key is copied and
//!    deleted there in one step (Redis is single-threaded; the built-in node
//!    serializes MIGRATE). Only then is the command forwarded to the new owner.
//! 4. The mover walks every old owner that loses keys with SCAN and moves each
//!    key whose owner changed with `MIGRATE … REPLACE KEYS k1 k2 …`.
//! 5. When every walk has ended, a snapshot without the previous ring is
//!    swapped in and removed nodes are released.
//!
//! REPLACE is always right: once the barrier has passed, nothing writes a
//! moving key at its old owner, and any write at the new owner was preceded by
//! an ensure-move that emptied the old owner — so a copy still at the old owner
//! is always the latest one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::state::{self, SavedMigration};
use super::topology::{MigrationRoute, Node, Routing};
use super::Proxy;
use crate::resp::reply::{elements, reply_len};
use crate::resp::{encode, parse_i64};
use crate::ring::{losing_nodes, NodeSpec, Ring};

/// Progress and history of topology changes, for CLUSTER INFO.
#[derive(Default)]
pub struct Tracker {
    pub keys_moved: AtomicU64,
    pub keys_moved_by_clients: AtomicU64,
    pub keys_scanned: AtomicU64,
    pub keys_to_scan: AtomicU64,
    pub keys_lost: AtomicU64,
    pub last_rebuild_us: AtomicU64,
    pub changes: AtomicU64,
    pub info: Mutex<TrackerText>,
}

/// The text parts of [`Tracker`].
#[derive(Default, Clone)]
pub struct TrackerText {
    /// `ok`, `migrating`, or `rolled_back`.
    pub state: String,
    pub change: String,
    pub last_error: String,
    pub started: Option<Instant>,
    pub last_duration_ms: u64,
}

impl Tracker {
    fn reset(&self, change: String) {
        for c in [&self.keys_moved, &self.keys_moved_by_clients, &self.keys_scanned, &self.keys_to_scan, &self.keys_lost] {
            c.store(0, Ordering::Relaxed);
        }
        let mut t = self.info.lock().expect("tracker lock");
        t.state = "migrating".into();
        t.change = change;
        t.last_error.clear();
        t.started = Some(Instant::now());
    }

    fn set(&self, f: impl FnOnce(&mut TrackerText)) {
        f(&mut self.info.lock().expect("tracker lock"));
    }

    pub fn text(&self) -> TrackerText {
        let t = self.info.lock().expect("tracker lock").clone();
        TrackerText { state: if t.state.is_empty() { "ok".into() } else { t.state }, ..t }
    }
}

fn host_port(addr: &str) -> (&str, &str) {
    addr.rsplit_once(':').unwrap_or((addr, "6379"))
}

fn error_bytes(msg: &str) -> Bytes {
    let mut out = BytesMut::new();
    encode::error(&mut out, msg);
    out.freeze()
}

/// Makes `key` live at `new` before a command on it is forwarded there.
pub async fn ensure_moved(proxy: &Proxy, old: &Arc<Node>, new: &Arc<Node>, key: &Bytes, client: u64) -> Result<(), Bytes> {
    let routing = proxy.routing.load();
    if let Some(m) = &routing.migration {
        let mut ready = m.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }
    drop(routing);
    let (host, port) = host_port(&new.spec.addr);
    let timeout = proxy.config.migration.timeout_ms.to_string();
    let mut raw = BytesMut::new();
    encode::command(&mut raw, &[b"MIGRATE", host.as_bytes(), port.as_bytes(), key, b"0", timeout.as_bytes(), b"REPLACE"]);
    let r = old.upstream(2, client).call(raw.freeze()).await;
    if r.starts_with(b"+OK") {
        proxy.migration.keys_moved_by_clients.fetch_add(1, Ordering::Relaxed);
        Ok(())
    } else if r.starts_with(b"+NOKEY") {
        Ok(())
    } else {
        let why = String::from_utf8_lossy(&r[1..r.len().saturating_sub(2)]).to_string();
        Err(error_bytes(&format!(
            "ERR key is moving from {} to {} and could not be moved: {why}",
            old.spec.name, new.spec.name
        )))
    }
}

/// What kind of change is starting.
pub enum Change {
    Add(NodeSpec),
    Remove { name: String, reachable: bool },
}

/// Swaps in the new ring and starts moving keys. Returns the ring rebuild
/// time in microseconds. The caller holds `admin_lock` and has validated the change.
pub async fn begin(proxy: &Arc<Proxy>, change: Change) -> Result<u64, String> {
    let cur = proxy.routing.load_full();
    if cur.migration.is_some() {
        return Err("a topology change is already in progress; retry when CLUSTER INFO shows state:ok".into());
    }
    let (specs, label, joining, lost_name) = match &change {
        Change::Add(spec) => {
            let mut v = cur.ring.nodes().to_vec();
            v.push(spec.clone());
            (v, format!("add {}", spec.name), Some(spec.name.clone()), None)
        }
        Change::Remove { name, reachable } => {
            let v = cur.ring.nodes().iter().filter(|n| &n.name != name).cloned().collect::<Vec<_>>();
            (v, format!("remove {name}"), None, (!reachable).then(|| name.clone()))
        }
    };
    let t0 = Instant::now();
    let ring = cur.ring.with_nodes(specs).map_err(|e| e.to_string())?;
    let rebuild_us = t0.elapsed().as_micros() as u64;
    proxy.migration.last_rebuild_us.store(rebuild_us, Ordering::Relaxed);
    proxy.migration.changes.fetch_add(1, Ordering::Relaxed);
    proxy.migration.reset(label);

    let ring = Arc::new(ring);
    let nodes = proxy.nodes_for(&ring);
    let lost: Vec<bool> = cur.ring.nodes().iter().map(|n| Some(&n.name) == lost_name.as_ref()).collect();
    let saved = SavedMigration {
        prev_epoch: cur.ring.epoch(),
        prev_nodes: state::to_saved(cur.ring.nodes()),
        lost: lost_name.iter().cloned().collect(),
        joining,
    };
    persist(proxy, &ring, Some(&saved))?;
    let (ready, _) = tokio::sync::watch::channel(false);
    let route = Arc::new(MigrationRoute { prev: cur.ring.clone(), prev_nodes: cur.nodes.clone(), lost, ready });
    let old = proxy.routing.swap(Arc::new(Routing::new(ring, nodes, Some(route.clone()))));

    // The epoch barrier, then the mover.
    let p = proxy.clone();
    tokio::spawn(async move {
        old.drained().await;
        for n in &old.nodes {
            n.barrier().await;
        }
        route.ready.send_replace(true);
        drop(old);
        run_mover(p).await;
    });
    Ok(rebuild_us)
}

/// Restores an unfinished migration after a restart and resumes its mover.
pub fn resume(proxy: &Arc<Proxy>, saved: SavedMigration) -> Result<(), String> {
    let cur = proxy.routing.load_full();
    let prev_specs = state::to_specs(&saved.prev_nodes);
    let prev = Arc::new(Ring::new(prev_specs, proxy.config.ring, saved.prev_epoch).map_err(|e| e.to_string())?);
    let prev_nodes = proxy.nodes_for(&prev);
    let lost = prev.nodes().iter().map(|n| saved.lost.contains(&n.name)).collect();
    // A fresh process has no request routed by the old ring in flight.
    let (ready, _) = tokio::sync::watch::channel(true);
    let route = Arc::new(MigrationRoute { prev, prev_nodes, lost, ready });
    proxy
        .routing
        .store(Arc::new(Routing::new(cur.ring.clone(), cur.nodes.clone(), Some(route))));
    proxy.migration.reset("resumed after restart".into());
    let p = proxy.clone();
    tokio::spawn(run_mover(p));
    Ok(())
}

fn persist(proxy: &Proxy, ring: &Ring, migration: Option<&SavedMigration>) -> Result<(), String> {
    match &proxy.config.state_file {
        Some(path) => state::save(path, ring.epoch(), ring.nodes(), migration),
        None => Ok(()),
    }
}

/// A dedicated connection for the mover: one request at a time, so long
/// MIGRATE batches never sit in front of client requests on shared connections.
struct Conn {
    sock: TcpStream,
    buf: BytesMut,
    timeout: Duration,
}

impl Conn {
    async fn open(addr: &str, timeout: Duration) -> Result<Conn, String> {
        let sock = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| format!("connect to {addr} timed out"))?
            .map_err(|e| format!("{addr}: {e}"))?;
        let _ = sock.set_nodelay(true);
        Ok(Conn { sock, buf: BytesMut::with_capacity(64 * 1024), timeout })
    }

    async fn call(&mut self, args: &[&[u8]]) -> Result<Bytes, String> {
        let mut raw = BytesMut::new();
        encode::command(&mut raw, args);
        let fut = async {
            self.sock.write_all(&raw).await.map_err(|e| e.to_string())?;
            loop {
                if let Some(n) = reply_len(&self.buf).map_err(|e| e.to_string())? {
                    return Ok(self.buf.split_to(n).freeze());
                }
                if self.sock.read_buf(&mut self.buf).await.map_err(|e| e.to_string())? == 0 {
                    return Err("connection closed".to_string());
                }
            }
        };
        tokio::time::timeout(self.timeout, fut).await.map_err(|_| "timed out".to_string())?
    }
}

/// Walks every old owner that loses keys and moves them, until the migration
/// ends (finished or rolled back); a pass that fails is retried after a second.
async fn run_mover(proxy: Arc<Proxy>) {
    while !mover_pass(&proxy).await {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// One walk over all sources; true when the migration ended.
async fn mover_pass(proxy: &Arc<Proxy>) -> bool {
    let routing = proxy.routing.load_full();
    let Some(m) = routing.migration.clone() else { return true };
    let losing = losing_nodes(&m.prev, &routing.ring);
    let timeout = Duration::from_millis(proxy.config.migration.timeout_ms);
    let sources: Vec<usize> = (0..m.prev_nodes.len()).filter(|&i| losing[i] && !m.lost[i]).collect();
    // Size of the walk, for progress.
    for &i in &sources {
        if let Ok(mut c) = Conn::open(&m.prev_nodes[i].spec.addr, timeout).await {
            if let Ok(r) = c.call(&[b"DBSIZE"]).await {
                if let Some(n) = crate::resp::reply::integer(&r) {
                    proxy.migration.keys_to_scan.fetch_add(n.max(0) as u64, Ordering::Relaxed);
                }
            }
        }
    }
    let started = Instant::now();
    let mut outcome = Ok(());
    for &i in &sources {
        if let Err(e) = walk(proxy, &routing, &m.prev_nodes[i], started).await {
            outcome = Err(e);
            break;
        }
    }
    match outcome {
        Ok(()) => finish(proxy, &routing, &m, started),
        Err(WalkError::TargetDown(name)) if is_joining(proxy, &name) => rollback(proxy, &routing, &m, &name).await,
        Err(e) => {
            // Anything else (a source that stays down): keep the migration
            // routing, which stays correct, and retry the walk.
            let msg = e.to_string();
            tracing::warn!(error = %msg, "migration walk failed; retrying in 1 s");
            proxy.migration.set(|t| t.last_error = msg);
            return false;
        }
    }
    true
}

fn is_joining(proxy: &Proxy, name: &str) -> bool {
    proxy.migration.text().change == format!("add {name}")
}

#[derive(Debug)]
enum WalkError {
    SourceDown(String, String),
    TargetDown(String),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::SourceDown(n, e) => write!(f, "source {n}: {e}"),
            WalkError::TargetDown(n) => write!(f, "target {n} is unreachable"),
        }
    }
}

async fn walk(proxy: &Proxy, routing: &Routing, source: &Arc<Node>, started: Instant) -> Result<(), WalkError> {
    let cfg = proxy.config.migration;
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let src_err = |e: String| WalkError::SourceDown(source.spec.name.clone(), e);
    let mut conn = Conn::open(&source.spec.addr, timeout).await.map_err(src_err)?;
    let count = cfg.batch.to_string();
    let mut cursor = b"0".to_vec();
    let mig_timeout = cfg.timeout_ms.to_string();
    loop {
        let r = conn.call(&[b"SCAN", &cursor, b"COUNT", count.as_bytes()]).await.map_err(src_err)?;
        let els = elements(&r).filter(|e| e.len() == 2).ok_or_else(|| src_err(format!("bad SCAN reply {r:?}")))?;
        let next = bulk_value(&r[els[0].clone()]).ok_or_else(|| src_err("bad SCAN cursor".into()))?;
        let keys_reply = &r[els[1].clone()];
        let keys: Vec<&[u8]> = elements(keys_reply)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| bulk_value(&keys_reply[e]))
            .collect();
        proxy.migration.keys_scanned.fetch_add(keys.len() as u64, Ordering::Relaxed);
        // Group the keys that leave this node by their new owner.
        let mut groups: Vec<(Arc<Node>, Vec<&[u8]>)> = Vec::new();
        for k in keys {
            let owner = routing.owner(k);
            if Arc::ptr_eq(owner, source) {
                continue;
            }
            match groups.iter_mut().find(|(n, _)| Arc::ptr_eq(n, owner)) {
                Some((_, v)) => v.push(k),
                None => groups.push((owner.clone(), vec![k])),
            }
        }
        for (target, keys) in groups {
            let (host, port) = host_port(&target.spec.addr);
            let mut args: Vec<&[u8]> =
                vec![b"MIGRATE", host.as_bytes(), port.as_bytes(), b"", b"0", mig_timeout.as_bytes(), b"REPLACE", b"KEYS"];
            args.extend(keys.iter().copied());
            let mut attempt = 0;
            loop {
                let r = conn.call(&args).await.map_err(src_err)?;
                if r.starts_with(b"+OK") {
                    proxy.migration.keys_moved.fetch_add(keys.len() as u64, Ordering::Relaxed);
                    break;
                }
                if r.starts_with(b"+NOKEY") {
                    break;
                }
                attempt += 1;
                let msg = String::from_utf8_lossy(&r).trim_end().to_string();
                proxy.migration.set(|t| t.last_error = format!("MIGRATE to {}: {msg}", target.spec.name));
                if attempt * 200 >= cfg.timeout_ms.max(1000) {
                    return Err(WalkError::TargetDown(target.spec.name.clone()));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            // Rate limit: keep the average under max_keys_per_sec.
            if cfg.max_keys_per_sec > 0 {
                let moved = proxy.migration.keys_moved.load(Ordering::Relaxed);
                let due = Duration::from_secs_f64(moved as f64 / cfg.max_keys_per_sec as f64);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
        }
        if next == b"0" {
            return Ok(());
        }
        cursor = next.to_vec();
    }
}

/// The payload of a `$n\r\n…\r\n` element.
fn bulk_value(el: &[u8]) -> Option<&[u8]> {
    if el.first() != Some(&b'$') {
        return None;
    }
    let nl = el.iter().position(|&b| b == b'\n')?;
    let n = parse_i64(&el[1..nl - 1])?;
    if n < 0 {
        return None;
    }
    el.get(nl + 1..nl + 1 + n as usize)
}

fn finish(proxy: &Arc<Proxy>, routing: &Arc<Routing>, m: &MigrationRoute, started: Instant) {
    let done = Arc::new(Routing::new(routing.ring.clone(), routing.nodes.clone(), None));
    if let Err(e) = persist(proxy, &routing.ring, None) {
        proxy.migration.set(|t| t.last_error = e);
    }
    proxy.routing.store(done);
    for n in &m.prev_nodes {
        if routing.ring.index_of(&n.spec.name).is_none() {
            proxy.release(&n.spec.name);
        }
    }
    let ms = started.elapsed().as_millis() as u64;
    proxy.migration.set(|t| {
        t.state = "ok".into();
        t.last_duration_ms = ms;
    });
    tracing::info!(
        moved = proxy.migration.keys_moved.load(Ordering::Relaxed),
        by_clients = proxy.migration.keys_moved_by_clients.load(Ordering::Relaxed),
        ms,
        "migration finished"
    );
}

/// The joining node died: route by the previous ring again (a new epoch).
/// Keys already moved to it are lost with it; every other key never left its
/// old owner.
async fn rollback(proxy: &Arc<Proxy>, routing: &Arc<Routing>, m: &MigrationRoute, name: &str) {
    let ring = match Ring::new(m.prev.nodes().to_vec(), m.prev.config(), routing.ring.epoch() + 1) {
        Ok(r) => Arc::new(r),
        Err(e) => {
            proxy.migration.set(|t| t.last_error = format!("rollback failed: {e}"));
            return;
        }
    };
    let lost = proxy.migration.keys_moved.load(Ordering::Relaxed) + proxy.migration.keys_moved_by_clients.load(Ordering::Relaxed);
    proxy.migration.keys_lost.store(lost, Ordering::Relaxed);
    let _ = persist(proxy, &ring, None);
    let nodes = m.prev_nodes.clone();
    let old = proxy.routing.swap(Arc::new(Routing::new(ring, nodes, None)));
    old.drained().await;
    proxy.release(name);
    proxy.migration.set(|t| {
        t.state = "rolled_back".into();
        t.last_error = format!("node {name} became unreachable while joining; the change was rolled back ({lost} keys that had moved to it are lost)");
    });
}
