//! Online migration: copy exactly the keys whose owner changes, then cut over,
//! while clients keep being served — without losing an acknowledged write or
//! resurrecting a deleted key, even if the joining node or the proxy dies.
//!
//! The protocol (the README's "Migration" section gives the argument):
//! 1. **Copy phase.** The current ring keeps routing every request, so old
//!    owners stay authoritative. The proxy tracks every moving key a client
//!    writes (the [`Dirty`] set, marked when the write's reply arrives). After
//!    an epoch barrier (no request routed by the previous snapshot is still
//!    unanswered), the mover walks every old owner that loses keys with SCAN
//!    and copies each moving key with `MIGRATE … COPY REPLACE KEYS …`.
//! 2. **Catch-up.** Dirty keys are re-synced (delete at the target, copy again
//!    from the source) in rounds while clients keep writing.
//! 3. **Cutover.** Requests on moving keys pause; once every write already sent
//!    has been answered, the remaining dirty keys are re-synced, the new ring is
//!    persisted and swapped in, and the paused requests go on at their new owners.
//! 4. **Sweep.** Old owners' leftover copies are deleted in the background;
//!    meanwhile KEYS and SCAN hide copies a node does not own.
//!
//! If the joining node (or any target) fails during the copy phase, the change
//! is aborted: nothing has stopped being served by its old owner, so no key is
//! lost; targets' partial copies are deleted. A proxy restarted mid-copy
//! starts the copy again and first deletes target copies whose source no
//! longer has the key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dashmap::DashMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::state::{self, SavedMigration};
use super::topology::{MigrationRoute, Node, Routing};
use super::Proxy;
use crate::resp::reply::{elements, integer, reply_len};
use crate::resp::{encode, parse_i64};
use crate::ring::{losing_nodes, NodeSpec, Ring};

/// Catch-up rounds stop once this few dirty keys remain (the cutover pause re-syncs them).
const CUTOVER_DIRTY_KEYS: usize = 2_000;
const MAX_CATCH_UP_ROUNDS: usize = 8;
/// Most keys remembered as dirty; past it the change is aborted rather than
/// letting the proxy's memory grow without bound.
const MAX_DIRTY_KEYS: usize = 10_000_000;

/// Moving keys written during the copy phase. A key's generation changes on
/// every mark, so a catch-up round only forgets a key if no write to it was
/// answered while the round copied it.
#[derive(Default)]
pub struct Dirty {
    keys: DashMap<Bytes, u64>,
    generation: AtomicU64,
    /// Tracked writes sent but not yet answered.
    in_flight: AtomicUsize,
}

impl Dirty {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn mark(&self, key: Bytes) {
        let g = self.generation.fetch_add(1, Ordering::AcqRel);
        self.keys.insert(key, g);
    }
}

/// Wraps the reply of a write on moving `keys`: once the reply arrives (the
/// write has executed at the old owner) the keys are marked dirty. Runs in its
/// own task so a slow client cannot delay the mark.
pub fn track_write(
    dirty: &Arc<Dirty>,
    keys: Vec<Bytes>,
    rx: oneshot::Receiver<Bytes>,
) -> oneshot::Receiver<Bytes> {
    dirty.in_flight.fetch_add(1, Ordering::AcqRel);
    let dirty = dirty.clone();
    let (tx, out) = oneshot::channel();
    tokio::spawn(async move {
        let r = rx.await;
        for k in keys {
            dirty.mark(k);
        }
        dirty.in_flight.fetch_sub(1, Ordering::AcqRel);
        if let Ok(r) = r {
            let _ = tx.send(r);
        }
    });
    out
}

/// Progress and history of topology changes, for CLUSTER INFO.
#[derive(Default)]
pub struct Tracker {
    pub keys_copied: AtomicU64,
    pub keys_resynced: AtomicU64,
    pub keys_scanned: AtomicU64,
    pub keys_to_scan: AtomicU64,
    pub keys_swept: AtomicU64,
    pub last_rebuild_us: AtomicU64,
    pub last_pause_ms: AtomicU64,
    pub changes: AtomicU64,
    info: Mutex<TrackerText>,
}

/// The text parts of [`Tracker`].
#[derive(Default, Clone)]
pub struct TrackerText {
    /// `ok`, `copying`, `cutover`, `sweeping` or `aborted`.
    pub state: String,
    pub change: String,
    pub last_error: String,
    pub started: Option<Instant>,
    pub last_duration_ms: u64,
}

impl Tracker {
    fn reset(&self, change: String) {
        for c in [
            &self.keys_copied,
            &self.keys_resynced,
            &self.keys_scanned,
            &self.keys_to_scan,
            &self.keys_swept,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        self.last_pause_ms.store(0, Ordering::Relaxed);
        let mut t = self.info.lock().expect("tracker lock");
        t.state = "copying".into();
        t.change = change;
        t.last_error.clear();
        t.started = Some(Instant::now());
    }

    fn set(&self, f: impl FnOnce(&mut TrackerText)) {
        f(&mut self.info.lock().expect("tracker lock"));
    }

    fn state(&self, s: &str) {
        self.set(|t| t.state = s.into());
    }

    pub fn text(&self) -> TrackerText {
        let t = self.info.lock().expect("tracker lock").clone();
        TrackerText {
            state: if t.state.is_empty() {
                "ok".into()
            } else {
                t.state
            },
            ..t
        }
    }
}

fn host_port(addr: &str) -> (&str, &str) {
    addr.rsplit_once(':').unwrap_or((addr, "6379"))
}

/// What kind of change is starting.
pub enum Change {
    Add(NodeSpec),
    Remove(String),
}

/// Starts a change: builds the next ring, persists it, and starts the copy.
/// Returns the ring rebuild time in microseconds. The caller holds
/// `admin_lock` and has validated the change.
pub fn begin(proxy: &Arc<Proxy>, change: Change) -> Result<u64, String> {
    let cur = proxy.routing.load_full();
    if cur.migration.is_some() || cur.filter_keys {
        return Err(
            "a topology change is already in progress; retry when CLUSTER INFO shows state:ok"
                .into(),
        );
    }
    let (specs, label, joining) = match &change {
        Change::Add(spec) => {
            let mut v = cur.ring.nodes().to_vec();
            v.push(spec.clone());
            (v, format!("add {}", spec.name), Some(spec.name.clone()))
        }
        Change::Remove(name) => {
            let v = cur
                .ring
                .nodes()
                .iter()
                .filter(|n| &n.name != name)
                .cloned()
                .collect::<Vec<_>>();
            (v, format!("remove {name}"), None)
        }
    };
    let t0 = Instant::now();
    let next = cur.ring.with_nodes(specs).map_err(|e| e.to_string())?;
    let rebuild_us = t0.elapsed().as_micros() as u64;
    proxy
        .migration
        .last_rebuild_us
        .store(rebuild_us, Ordering::Relaxed);
    proxy.migration.changes.fetch_add(1, Ordering::Relaxed);
    proxy.migration.reset(label);
    let saved = SavedMigration {
        phase: "copy".into(),
        other_epoch: next.epoch(),
        other_nodes: state::to_saved(next.nodes()),
        joining,
    };
    persist(proxy, &cur.ring, Some(&saved))?;
    let route = new_route(proxy, Arc::new(next));
    let old = proxy.routing.swap(Arc::new(Routing::new(
        cur.ring.clone(),
        cur.nodes.clone(),
        Some(route),
        true,
    )));
    let p = proxy.clone();
    tokio::spawn(async move {
        // Writes routed before tracking began must be answered before the copy
        // reads their keys.
        old.drained().await;
        for n in &old.nodes {
            n.barrier().await;
        }
        drop(old);
        drive(p, false).await;
    });
    Ok(rebuild_us)
}

fn new_route(proxy: &Proxy, next: Arc<Ring>) -> Arc<MigrationRoute> {
    let next_nodes = proxy.nodes_for(&next);
    let (resume, _) = tokio::sync::watch::channel(false);
    Arc::new(MigrationRoute {
        next,
        next_nodes,
        dirty: Arc::new(Dirty::default()),
        paused: false,
        resume: Arc::new(resume),
    })
}

/// Restores an unfinished change after a restart and resumes it.
pub fn resume(proxy: &Arc<Proxy>, saved: SavedMigration) -> Result<(), String> {
    let cur = proxy.routing.load_full();
    let other = Arc::new(
        Ring::new(
            state::to_specs(&saved.other_nodes),
            proxy.config.ring,
            saved.other_epoch,
        )
        .map_err(|e| e.to_string())?,
    );
    proxy
        .migration
        .reset(format!("resumed {} after restart", saved.phase));
    let p = proxy.clone();
    if saved.phase == "sweep" {
        proxy.routing.store(Arc::new(Routing::new(
            cur.ring.clone(),
            cur.nodes.clone(),
            None,
            true,
        )));
        proxy.migration.state("sweeping");
        tokio::spawn(async move {
            let prev_nodes = p.nodes_for(&other);
            sweep_and_finish(&p, &other, &prev_nodes).await;
        });
    } else {
        let route = new_route(proxy, other);
        proxy.routing.store(Arc::new(Routing::new(
            cur.ring.clone(),
            cur.nodes.clone(),
            Some(route),
            true,
        )));
        tokio::spawn(drive(p, true));
    }
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
        Ok(Conn {
            sock,
            buf: BytesMut::with_capacity(64 * 1024),
            timeout,
        })
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
                if self
                    .sock
                    .read_buf(&mut self.buf)
                    .await
                    .map_err(|e| e.to_string())?
                    == 0
                {
                    return Err("connection closed".to_string());
                }
            }
        };
        tokio::time::timeout(self.timeout, fut)
            .await
            .map_err(|_| "timed out".to_string())?
    }
}

/// Connections by node name, opened on first use.
struct Conns {
    by_name: HashMap<String, Conn>,
    timeout: Duration,
}

/// A failure attributed to one node.
struct NodeError {
    node: String,
    why: String,
}

impl Conns {
    fn new(timeout: Duration) -> Conns {
        Conns {
            by_name: HashMap::new(),
            timeout,
        }
    }

    async fn call(&mut self, node: &Node, args: &[&[u8]]) -> Result<Bytes, NodeError> {
        let err = |why: String| NodeError {
            node: node.spec.name.clone(),
            why,
        };
        if !self.by_name.contains_key(&node.spec.name) {
            let c = Conn::open(&node.spec.addr, self.timeout)
                .await
                .map_err(err)?;
            self.by_name.insert(node.spec.name.clone(), c);
        }
        let conn = self
            .by_name
            .get_mut(&node.spec.name)
            .expect("just inserted");
        match conn.call(args).await {
            Ok(r) => Ok(r),
            Err(e) => {
                self.by_name.remove(&node.spec.name);
                Err(err(e))
            }
        }
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

/// Walks `node` with SCAN, calling `f` with each batch of keys.
async fn scan_node<F>(
    conns: &mut Conns,
    node: &Node,
    batch: usize,
    mut f: F,
) -> Result<(), NodeError>
where
    F: AsyncBatch,
{
    let count = batch.max(SCAN_COUNT).to_string();
    let mut cursor = b"0".to_vec();
    loop {
        let r = conns
            .call(node, &[b"SCAN", &cursor, b"COUNT", count.as_bytes()])
            .await?;
        let bad = || NodeError {
            node: node.spec.name.clone(),
            why: format!("bad SCAN reply {:?}", String::from_utf8_lossy(&r)),
        };
        let els = elements(&r).filter(|e| e.len() == 2).ok_or_else(bad)?;
        let next = bulk_value(&r[els[0].clone()]).ok_or_else(bad)?.to_vec();
        let keys_reply = &r[els[1].clone()];
        let keys: Vec<Bytes> = elements(keys_reply)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| bulk_value(&keys_reply[e]).map(Bytes::copy_from_slice))
            .collect();
        f.batch(conns, keys).await?;
        if next == b"0" {
            return f.finish(conns).await;
        }
        cursor = next;
    }
}

/// A step run on each SCAN batch (a trait so the closure can borrow `conns`).
trait AsyncBatch {
    async fn batch(&mut self, conns: &mut Conns, keys: Vec<Bytes>) -> Result<(), NodeError>;

    /// Runs once after the last batch.
    async fn finish(&mut self, _conns: &mut Conns) -> Result<(), NodeError> {
        Ok(())
    }
}

/// Keys per SCAN call: larger than a MIGRATE batch, since only ~1/N of the
/// scanned keys move.
const SCAN_COUNT: usize = 1_000;

/// Copies `keys` from `source` to `target` (COPY REPLACE: the source keeps them).
async fn copy_keys(
    conns: &mut Conns,
    source: &Node,
    target: &Node,
    keys: &[Bytes],
    timeout_ms: &str,
) -> Result<bool, NodeError> {
    let (host, port) = host_port(&target.spec.addr);
    let mut args: Vec<&[u8]> = vec![
        b"MIGRATE",
        host.as_bytes(),
        port.as_bytes(),
        b"",
        b"0",
        timeout_ms.as_bytes(),
        b"COPY",
        b"REPLACE",
        b"KEYS",
    ];
    args.extend(keys.iter().map(|k| k.as_ref()));
    let r = conns.call(source, &args).await?;
    if r.starts_with(b"+OK") {
        Ok(true)
    } else if r.starts_with(b"+NOKEY") {
        Ok(false)
    } else {
        // MIGRATE's errors are about the target (IOERR, refused RESTORE).
        Err(NodeError {
            node: target.spec.name.clone(),
            why: String::from_utf8_lossy(&r).trim_end().to_string(),
        })
    }
}

/// Deletes `keys` on `node`.
async fn delete_keys(conns: &mut Conns, node: &Node, keys: &[Bytes]) -> Result<i64, NodeError> {
    let mut args: Vec<&[u8]> = vec![b"DEL"];
    args.extend(keys.iter().map(|k| k.as_ref()));
    let r = conns.call(node, &args).await?;
    integer(&r).ok_or_else(|| NodeError {
        node: node.spec.name.clone(),
        why: String::from_utf8_lossy(&r).trim_end().to_string(),
    })
}

/// Groups keys by (current owner, next owner) for those that move.
fn group_moves(
    routing: &Routing,
    m: &MigrationRoute,
    keys: impl IntoIterator<Item = Bytes>,
) -> Vec<(Arc<Node>, Arc<Node>, Vec<Bytes>)> {
    let mut groups: Vec<(Arc<Node>, Arc<Node>, Vec<Bytes>)> = Vec::new();
    for k in keys {
        // Both rings share their scheme, so one key hash serves both lookups.
        let h = routing.ring.key_hash(&k);
        let from = &routing.nodes[routing.ring.locate_hash(h)];
        let to = &m.next_nodes[m.next.locate_hash(h)];
        if Arc::ptr_eq(from, to) {
            continue;
        }
        match groups
            .iter_mut()
            .find(|(f, t, _)| Arc::ptr_eq(f, from) && Arc::ptr_eq(t, to))
        {
            Some((_, _, v)) => v.push(k),
            None => groups.push((from.clone(), to.clone(), vec![k])),
        }
    }
    groups
}

/// Runs a change from its copy phase to the end (or its abort).
async fn drive(proxy: Arc<Proxy>, restarted: bool) {
    let started = Instant::now();
    let routing = proxy.routing.load_full();
    let Some(m) = routing.migration.clone() else {
        return;
    };
    let cfg = proxy.config.migration;
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let mut conns = Conns::new(timeout);
    let result = async {
        if restarted {
            reconcile(&proxy, &routing, &m, &mut conns).await?;
        }
        copy_walk(&proxy, &routing, &m, &mut conns, started).await?;
        for _ in 0..MAX_CATCH_UP_ROUNDS {
            if m.dirty.len() <= CUTOVER_DIRTY_KEYS {
                break;
            }
            resync(&proxy, &routing, &m, &mut conns, true).await?;
        }
        cutover(&proxy, &routing, &m, &mut conns).await
    }
    .await;
    match result {
        Ok(()) => {
            let prev_nodes = routing.nodes.clone();
            sweep_and_finish(&proxy, &routing.ring, &prev_nodes).await;
            proxy
                .migration
                .set(|t| t.last_duration_ms = started.elapsed().as_millis() as u64);
        }
        Err(e) => abort(&proxy, &routing, &m, &format!("node {}: {}", e.node, e.why)).await,
    }
}

/// Copies every key that changes owner from each old owner that loses keys.
async fn copy_walk(
    proxy: &Proxy,
    routing: &Routing,
    m: &MigrationRoute,
    conns: &mut Conns,
    started: Instant,
) -> Result<(), NodeError> {
    let losing = losing_nodes(&routing.ring, &m.next);
    let sources: Vec<Arc<Node>> = routing
        .nodes
        .iter()
        .zip(&losing)
        .filter(|(_, l)| **l)
        .map(|(n, _)| n.clone())
        .collect();
    for s in &sources {
        if let Ok(r) = conns.call(s, &[b"DBSIZE"]).await {
            proxy
                .migration
                .keys_to_scan
                .fetch_add(integer(&r).unwrap_or(0).max(0) as u64, Ordering::Relaxed);
        }
    }
    struct Copy<'a> {
        proxy: &'a Proxy,
        routing: &'a Routing,
        m: &'a MigrationRoute,
        timeout_ms: String,
        started: Instant,
        /// Moving keys gathered across SCAN calls, by (old owner, new owner).
        pending: Vec<(Arc<Node>, Arc<Node>, Vec<Bytes>)>,
    }
    impl Copy<'_> {
        async fn flush(&mut self, conns: &mut Conns, min: usize) -> Result<(), NodeError> {
            let t = &self.proxy.migration;
            for (from, to, keys) in &mut self.pending {
                if keys.len() < min.max(1) {
                    continue;
                }
                if copy_keys(conns, from, to, keys, &self.timeout_ms).await? {
                    t.keys_copied
                        .fetch_add(keys.len() as u64, Ordering::Relaxed);
                }
                keys.clear();
            }
            let cap = self.proxy.config.migration.max_keys_per_sec;
            if cap > 0 {
                let due = Duration::from_secs_f64(
                    t.keys_copied.load(Ordering::Relaxed) as f64 / cap as f64,
                );
                if let Some(wait) = due.checked_sub(self.started.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
            Ok(())
        }
    }
    impl AsyncBatch for Copy<'_> {
        async fn batch(&mut self, conns: &mut Conns, keys: Vec<Bytes>) -> Result<(), NodeError> {
            self.proxy
                .migration
                .keys_scanned
                .fetch_add(keys.len() as u64, Ordering::Relaxed);
            for (from, to, keys) in group_moves(self.routing, self.m, keys) {
                match self
                    .pending
                    .iter_mut()
                    .find(|(f, t, _)| Arc::ptr_eq(f, &from) && Arc::ptr_eq(t, &to))
                {
                    Some((_, _, v)) => v.extend(keys),
                    None => self.pending.push((from, to, keys)),
                }
            }
            self.flush(conns, self.proxy.config.migration.batch).await?;
            if self.m.dirty.len() > MAX_DIRTY_KEYS {
                return Err(NodeError {
                    node: "proxy".into(),
                    why: "too many keys written during the copy".into(),
                });
            }
            Ok(())
        }

        async fn finish(&mut self, conns: &mut Conns) -> Result<(), NodeError> {
            self.flush(conns, 1).await
        }
    }
    // Every source is walked at once, each over its own connections: the
    // copy is bound by round trips, not by any one node.
    let batch = proxy.config.migration.batch;
    let timeout = conns.timeout;
    let walks = sources.iter().map(|s| async move {
        let step = Copy {
            proxy,
            routing,
            m,
            timeout_ms: proxy.config.migration.timeout_ms.to_string(),
            started,
            pending: Vec::new(),
        };
        scan_node(&mut Conns::new(timeout), s, batch, step).await
    });
    futures::future::try_join_all(walks).await?;
    Ok(())
}

/// Fault injection for the consistency checker's self-test: with
/// `SHARDIS_FAULT_SKIP_RESYNC=1` writes made during a copy are never re-synced,
/// which must make `shardis check` report lost writes.
fn fault_skip_resync() -> bool {
    std::env::var_os("SHARDIS_FAULT_SKIP_RESYNC").is_some_and(|v| v == "1")
}

/// Re-syncs dirty keys: delete at the next owner, copy again from the current
/// one. In a catch-up round (`live`), a key is forgotten only if no write to it
/// was answered meanwhile; at cutover everything is synced and forgotten.
async fn resync(
    proxy: &Proxy,
    routing: &Routing,
    m: &MigrationRoute,
    conns: &mut Conns,
    live: bool,
) -> Result<(), NodeError> {
    if fault_skip_resync() {
        m.dirty.keys.clear();
        return Ok(());
    }
    let snapshot: Vec<(Bytes, u64)> = m
        .dirty
        .keys
        .iter()
        .map(|e| (e.key().clone(), *e.value()))
        .collect();
    let timeout_ms = proxy.config.migration.timeout_ms.to_string();
    for chunk in snapshot.chunks(proxy.config.migration.batch) {
        for (from, to, keys) in group_moves(routing, m, chunk.iter().map(|(k, _)| k.clone())) {
            delete_keys(conns, &to, &keys).await?;
            copy_keys(conns, &from, &to, &keys, &timeout_ms).await?;
            proxy
                .migration
                .keys_resynced
                .fetch_add(keys.len() as u64, Ordering::Relaxed);
        }
        for (k, g) in chunk {
            if live {
                m.dirty.keys.remove_if(k, |_, now| now == g);
            } else {
                m.dirty.keys.remove(k);
            }
        }
    }
    Ok(())
}

/// After a restart mid-copy: delete copies at targets whose key no longer
/// exists at its source (it was deleted there while this proxy was down).
async fn reconcile(
    proxy: &Proxy,
    routing: &Routing,
    m: &MigrationRoute,
    conns: &mut Conns,
) -> Result<(), NodeError> {
    struct Check<'a> {
        routing: &'a Routing,
        m: &'a MigrationRoute,
        target: Arc<Node>,
    }
    impl AsyncBatch for Check<'_> {
        async fn batch(&mut self, conns: &mut Conns, keys: Vec<Bytes>) -> Result<(), NodeError> {
            for k in keys {
                let source = self.routing.owner(&k).clone();
                let next = &self.m.next_nodes[self.m.next.locate(&k)];
                if Arc::ptr_eq(&source, &self.target) || !Arc::ptr_eq(next, &self.target) {
                    continue;
                }
                let r = conns.call(&source, &[b"EXISTS", &k]).await?;
                if integer(&r) == Some(0) {
                    delete_keys(conns, &self.target, std::slice::from_ref(&k)).await?;
                }
            }
            Ok(())
        }
    }
    // Nodes that gain keys are those that "lose" them going back from next to now;
    // `next_nodes` is aligned with `next.nodes()`.
    let gains = losing_nodes(&m.next, &routing.ring);
    let gaining: Vec<Arc<Node>> = m
        .next_nodes
        .iter()
        .zip(&gains)
        .filter(|(_, g)| **g)
        .map(|(n, _)| n.clone())
        .collect();
    for target in gaining {
        let step = Check {
            routing,
            m,
            target: target.clone(),
        };
        scan_node(conns, &target, proxy.config.migration.batch, step).await?;
    }
    Ok(())
}

/// Pauses requests on moving keys, syncs what is left, swaps the new ring in.
async fn cutover(
    proxy: &Proxy,
    routing: &Arc<Routing>,
    m: &Arc<MigrationRoute>,
    conns: &mut Conns,
) -> Result<(), NodeError> {
    proxy.migration.state("cutover");
    let t0 = Instant::now();
    let paused_route = Arc::new(MigrationRoute {
        next: m.next.clone(),
        next_nodes: m.next_nodes.clone(),
        dirty: m.dirty.clone(),
        paused: true,
        resume: m.resume.clone(),
    });
    let paused = Arc::new(Routing::new(
        routing.ring.clone(),
        routing.nodes.clone(),
        Some(paused_route),
        true,
    ));
    let live = proxy.routing.swap(paused.clone());
    let result = async {
        live.drained().await;
        while m.dirty.in_flight.load(Ordering::Acquire) != 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        resync(proxy, routing, m, conns, false).await?;
        let saved = SavedMigration {
            phase: "sweep".into(),
            other_epoch: routing.ring.epoch(),
            other_nodes: state::to_saved(routing.ring.nodes()),
            joining: None,
        };
        persist(proxy, &m.next, Some(&saved)).map_err(|why| NodeError {
            node: "state file".into(),
            why,
        })
    }
    .await;
    match result {
        Ok(()) => {
            proxy.routing.store(Arc::new(Routing::new(
                m.next.clone(),
                m.next_nodes.clone(),
                None,
                true,
            )));
            m.resume.send_replace(true);
            proxy
                .migration
                .last_pause_ms
                .store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
            proxy.migration.state("sweeping");
            Ok(())
        }
        Err(e) => {
            // Back to the live copy routing; abort() takes it from there.
            proxy.routing.store(live);
            m.resume.send_replace(true);
            Err(e)
        }
    }
}

/// Deletes, on each of `nodes`, the keys it holds but does not own in `ring`.
async fn sweep_nodes(
    proxy: &Proxy,
    ring: &Ring,
    nodes: &[Arc<Node>],
    conns: &mut Conns,
) -> Result<(), NodeError> {
    struct Sweep<'a> {
        proxy: &'a Proxy,
        ring: &'a Ring,
        node: Arc<Node>,
    }
    impl AsyncBatch for Sweep<'_> {
        async fn batch(&mut self, conns: &mut Conns, keys: Vec<Bytes>) -> Result<(), NodeError> {
            let strays: Vec<Bytes> = keys
                .into_iter()
                .filter(|k| self.ring.node(self.ring.locate(k)).name != self.node.spec.name)
                .collect();
            if !strays.is_empty() {
                let n = delete_keys(conns, &self.node, &strays).await?;
                self.proxy
                    .migration
                    .keys_swept
                    .fetch_add(n.max(0) as u64, Ordering::Relaxed);
            }
            Ok(())
        }
    }
    // All nodes at once, each over its own connection.
    let timeout = conns.timeout;
    let sweeps = nodes.iter().map(|node| async move {
        let step = Sweep {
            proxy,
            ring,
            node: node.clone(),
        };
        scan_node(
            &mut Conns::new(timeout),
            node,
            proxy.config.migration.batch,
            step,
        )
        .await
    });
    futures::future::try_join_all(sweeps).await?;
    Ok(())
}

/// After cutover: delete the old owners' leftover copies, then end the change.
async fn sweep_and_finish(proxy: &Arc<Proxy>, prev: &Ring, prev_nodes: &[Arc<Node>]) {
    let routing = proxy.routing.load_full();
    let losing = losing_nodes(prev, &routing.ring);
    let sources: Vec<Arc<Node>> = prev_nodes
        .iter()
        .zip(&losing)
        .filter(|(_, l)| **l)
        .map(|(n, _)| n.clone())
        .collect();
    let mut conns = Conns::new(Duration::from_millis(proxy.config.migration.timeout_ms));
    loop {
        match sweep_nodes(proxy, &routing.ring, &sources, &mut conns).await {
            Ok(()) => break,
            // A node that left and is gone holds nothing anyone reads.
            Err(e) if routing.ring.index_of(&e.node).is_none() => break,
            Err(e) => {
                proxy
                    .migration
                    .set(|t| t.last_error = format!("sweep: node {}: {}", e.node, e.why));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    if let Err(e) = persist(proxy, &routing.ring, None) {
        proxy.migration.set(|t| t.last_error = e);
    }
    proxy.routing.store(Arc::new(Routing::new(
        routing.ring.clone(),
        routing.nodes.clone(),
        None,
        false,
    )));
    for n in prev_nodes {
        if routing.ring.index_of(&n.spec.name).is_none() {
            proxy.release(&n.spec.name);
        }
    }
    proxy.migration.state("ok");
    tracing::info!(
        copied = proxy.migration.keys_copied.load(Ordering::Relaxed),
        resynced = proxy.migration.keys_resynced.load(Ordering::Relaxed),
        swept = proxy.migration.keys_swept.load(Ordering::Relaxed),
        "topology change finished"
    );
}

/// The copy failed: keep the current ring (it never stopped routing), delete
/// partial copies on the targets that are still up, forget the next ring.
async fn abort(proxy: &Arc<Proxy>, routing: &Arc<Routing>, m: &MigrationRoute, why: &str) {
    tracing::warn!(reason = %why, "topology change aborted");
    let plain = Arc::new(Routing::new(
        routing.ring.clone(),
        routing.nodes.clone(),
        None,
        true,
    ));
    let old = proxy.routing.swap(plain);
    old.drained().await;
    let mut conns = Conns::new(Duration::from_millis(proxy.config.migration.timeout_ms));
    let targets: Vec<Arc<Node>> = m
        .next_nodes
        .iter()
        .filter(|n| routing.ring.index_of(&n.spec.name).is_some())
        .cloned()
        .collect();
    for t in &targets {
        // A target that is down lost its copies with its memory.
        let _ = sweep_nodes(proxy, &routing.ring, std::slice::from_ref(t), &mut conns).await;
    }
    let _ = persist(proxy, &routing.ring, None);
    proxy.routing.store(Arc::new(Routing::new(
        routing.ring.clone(),
        routing.nodes.clone(),
        None,
        false,
    )));
    for n in &m.next_nodes {
        if routing.ring.index_of(&n.spec.name).is_none() {
            proxy.release(&n.spec.name);
        }
    }
    proxy.migration.set(|t| {
        t.state = "aborted".into();
        t.last_error = format!("change aborted, the ring is unchanged and no key was lost: {why}");
    });
}

/// REMOVENODE of a node that is down: its keys cannot be copied (they are
/// lost with it, as with any cache node that dies), so the ring drops it at
/// once and its keys are served, empty, by their new owners.
pub fn remove_unreachable(proxy: &Arc<Proxy>, name: &str) -> Result<u64, String> {
    let cur = proxy.routing.load_full();
    if cur.migration.is_some() || cur.filter_keys {
        return Err(
            "a topology change is already in progress; retry when CLUSTER INFO shows state:ok"
                .into(),
        );
    }
    let t0 = Instant::now();
    let next = cur
        .ring
        .with_nodes(
            cur.ring
                .nodes()
                .iter()
                .filter(|n| n.name != name)
                .cloned()
                .collect(),
        )
        .map_err(|e| e.to_string())?;
    let rebuild_us = t0.elapsed().as_micros() as u64;
    proxy
        .migration
        .last_rebuild_us
        .store(rebuild_us, Ordering::Relaxed);
    proxy.migration.changes.fetch_add(1, Ordering::Relaxed);
    proxy
        .migration
        .reset(format!("remove {name} (unreachable)"));
    persist(proxy, &next, None)?;
    let next = Arc::new(next);
    let nodes = proxy.nodes_for(&next);
    proxy
        .routing
        .store(Arc::new(Routing::new(next, nodes, None, false)));
    proxy.release(name);
    proxy.migration.set(|t| {
        t.state = "ok".into();
        t.last_error =
            format!("node {name} was unreachable when removed: the keys it held are lost");
    });
    Ok(rebuild_us)
}
