//! The node's server loop: accepts clients, reads pipelined requests,
//! executes every complete one and writes all their replies in one write;
//! runs the active-expiry task; shuts down on the caller's signal.
//!
//! ```text
//!  socket ──read──► query buffer ──decode_request──► dispatch ──► reply buffer
//!    ▲                 (bounded)        │ (all complete requests)     │
//!    └──────────────── write_all ◄──────┴─────────────────────────────┘
//! ```
//!
//! A request that blocks (BLPOP with nothing to pop) suspends its
//! connection in [`wait::blocked`] until `blocking.rs` sends its reply or
//! its timeout passes; the requests behind it wait, as in Redis.
//!
//! The task that owns a client's socket is the only one that touches it.
//! A subscribed connection also waits on its pub/sub mailbox: messages are
//! written between replies, never inside one, and one that arrived before a
//! command was read is written before that command's reply.

use super::blocking::Blocking;
use super::commands::{self, blocking::Block, migrate::MigrateState, Client, Next};
use super::config::Settings;
use super::error::CmdError;
use super::evict::EXPIRE_TICK_MS;
use super::pubsub::mailbox::{Mailbox, Taken};
use super::pubsub::Hub;
use super::query::Query;
use super::store::{now_ms, Store};
use super::value::Thresholds;
use super::wait;
use super::NodeConfig;
use crate::resp::Limits;
use bytes::BytesMut;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The version reported by INFO and HELLO: the Redis release whose commands
/// and replies the node reproduces.
pub const REDIS_VERSION: &str = "7.0.0";

/// Initial size of a client's query and reply buffers.
pub(super) const BUFFER_BYTES: usize = 16 * 1024;
/// Replies are flushed mid-batch once this many bytes are pending, which
/// bounds a client's output buffer however long its pipeline.
const MAX_PENDING_REPLY_BYTES: usize = 8 * 1024 * 1024;
/// Most pub/sub message bytes a subscriber's loop writes per wakeup before
/// it reads its own commands again.
const PUSH_WRITE_BYTES: usize = 256 * 1024;
/// How long shutdown waits for clients to finish what they have read.
const SHUTDOWN_GRACE_MS: u64 = 1000;

/// Connection counters.
#[derive(Debug, Default)]
pub struct Stats {
    /// Commands executed (INFO `total_commands_processed`).
    pub total_commands: AtomicU64,
    /// Connections ever accepted.
    pub total_connections: AtomicU64,
    /// Connections open now.
    pub connected_clients: AtomicUsize,
    /// Connections waiting in a blocking command now.
    pub blocked_clients: AtomicUsize,
}

/// State shared by every connection of one node.
pub struct Node {
    /// The keyspace.
    pub store: Store,
    /// Run-time parameters (CONFIG GET/SET), `maxmemory` among them.
    pub settings: Settings,
    /// Request bounds; `max_bulk_len` is superseded by the live
    /// `proto-max-bulk-len` in `settings`.
    pub limits: Limits,
    /// Connection and command counters.
    pub stats: Stats,
    /// Serializes MIGRATEs and holds their target connections. An async
    /// mutex because it is held across network round trips.
    pub migrate: tokio::sync::Mutex<MigrateState>,
    /// The listening port (INFO `tcp_port`).
    pub port: u16,
    /// Start time, ms since the epoch.
    pub started_ms: u64,
    /// A random id for this run (INFO `run_id`).
    pub run_id: String,
    /// INFO `instantaneous_ops_per_sec`.
    pub ops: crate::resp::info::OpsMeter,
    /// INFO `used_memory_peak`: raised by INFO and by the expiry tick, as
    /// Redis raises it in its cron.
    pub memory_peak: AtomicU64,
    /// Clients blocked in BLPOP and friends.
    pub blocking: Blocking,
    /// Pub/sub subscriptions; shared with each subscriber, which leaves
    /// them when dropped.
    pub pubsub: Arc<Hub>,
    next_client_id: AtomicU64,
    /// Makes EXEC atomic: every command, expiry sweep and MIGRATE step
    /// holds it shared while it touches the store ([`Node::shared`]); EXEC
    /// holds it exclusively ([`Node::exclusive`]). A `std` lock, held only
    /// by synchronous code, never across an `.await`, and never taken
    /// twice by one thread. Uncontended until a transaction runs: one
    /// atomic add and subtract per command. Rust's lock lets a waiting
    /// EXEC in before new readers, so transactions are not starved.
    gate: RwLock<()>,
}

impl Node {
    /// Holds the gate shared: no transaction runs until the guard drops.
    pub fn shared(&self) -> RwLockReadGuard<'_, ()> {
        // Poisoned only if an EXEC panicked; the store stays consistent
        // (every mutation is one table call), so carry on.
        self.gate.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds the gate exclusively: nothing else touches the store until
    /// the guard drops.
    pub fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The current encoding thresholds, read from the live CONFIG
    /// parameters (`hash-max-listpack-entries` …); a parameter that cannot
    /// be read keeps Redis's default.
    pub fn thresholds(&self) -> Thresholds {
        let d = Thresholds::default();
        let s = &self.settings;
        let size = |name: &str, default: usize| {
            s.int(name)
                .and_then(|v| usize::try_from(v).ok())
                .unwrap_or(default)
        };
        Thresholds {
            hash_entries: size("hash-max-listpack-entries", d.hash_entries),
            hash_value: size("hash-max-listpack-value", d.hash_value),
            list_size: s.int("list-max-listpack-size").unwrap_or(d.list_size),
            set_intset: size("set-max-intset-entries", d.set_intset),
            set_entries: size("set-max-listpack-entries", d.set_entries),
            set_value: size("set-max-listpack-value", d.set_value),
            zset_entries: size("zset-max-listpack-entries", d.zset_entries),
            zset_value: size("zset-max-listpack-value", d.zset_value),
        }
    }

    pub(crate) fn new(config: &NodeConfig, port: u16) -> Node {
        let store = Store::new();
        let run_id = format!(
            "{:016x}{:016x}{:08x}",
            store.hash(b"run_id"),
            store.hash(b"id2"),
            std::process::id()
        );
        Node {
            store,
            settings: Settings::new(config.maxmemory, config.limits.max_bulk_len, port),
            limits: config.limits,
            stats: Stats::default(),
            migrate: tokio::sync::Mutex::new(MigrateState::default()),
            port,
            started_ms: now_ms(),
            run_id,
            ops: Default::default(),
            memory_peak: AtomicU64::new(0),
            blocking: Blocking::default(),
            pubsub: Arc::default(),
            next_client_id: AtomicU64::new(1),
            gate: RwLock::new(()),
        }
    }
}

/// Serves the node on `listener` until `shutdown` completes: stops
/// accepting, lets clients finish the requests they already sent (within a
/// grace period), then returns.
pub async fn run(
    listener: TcpListener,
    config: NodeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let node = Arc::new(Node::new(&config, port));
    let (stop_tx, stop_rx) = watch::channel(false);
    let expiry = tokio::spawn(expire_loop(node.clone(), stop_rx.clone()));
    let mut clients = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    clients.spawn(serve(node.clone(), sock, stop_rx.clone()));
                }
                Err(e) => {
                    // Out of file descriptors and similar: back off, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            // Reap finished clients so the set does not grow.
            Some(_) = clients.join_next(), if !clients.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drain = async { while clients.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_millis(SHUTDOWN_GRACE_MS), drain)
        .await
        .is_err()
    {
        clients.abort_all();
    }
    expiry.abort();
    Ok(())
}

/// Runs [`EXPIRE_TICK_MS`] sweeps of expired keys until shutdown.
async fn expire_loop(node: Arc<Node>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_millis(EXPIRE_TICK_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let _shared = node.shared();
                node.store.expire_tick(now_ms());
                node.memory_peak.fetch_max(node.store.used_memory() as u64, Relaxed);
            }
            _ = stop.changed() => return,
        }
    }
}

/// One client: read, execute every complete request, write the replies;
/// while a request blocks, wait for its reply before the next one.
async fn serve(node: Arc<Node>, mut sock: TcpStream, mut stop: watch::Receiver<bool>) {
    let _ = sock.set_nodelay(true);
    let addr = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let id = node.next_client_id.fetch_add(1, Relaxed);
    node.stats.total_connections.fetch_add(1, Relaxed);
    node.stats.connected_clients.fetch_add(1, Relaxed);
    let mut client = Client::new(id, addr, laddr, now_ms());
    let mut query = Query::with_capacity(BUFFER_BYTES);
    let mut out = BytesMut::with_capacity(BUFFER_BYTES);
    let result = async {
        // False right after a blocked request answered: the rest of the
        // input may hold complete requests already.
        let mut read_first = true;
        loop {
            if read_first {
                let input = &mut query.buf;
                if input.capacity() - input.len() < BUFFER_BYTES / 4 {
                    input.reserve(BUFFER_BYTES);
                }
                // `None`: messages wait in the mailbox (only for a subscriber).
                let n = tokio::select! {
                    r = sock.read_buf(input) => Some(r?),
                    _ = stop.changed() => Some(0),
                    _ = wait_pushes(&client), if client.pubsub.is_some() => None,
                };
                let Some(n) = n else {
                    if !write_pushes(&client, &mut out, &mut sock).await? {
                        return Ok(());
                    }
                    continue;
                };
                if n == 0 {
                    return Ok(());
                }
            }
            read_first = true;
            let batch = execute_batch(&node, &mut client, &mut query, &mut out, &mut sock).await?;
            if !out.is_empty() && !write_out(&mut sock, &mut out, mailbox(&client)).await? {
                return Ok(());
            }
            match batch {
                Batch::More => {}
                Batch::Close => return Ok(()),
                Batch::Blocked(block) => {
                    let waited = wait::blocked(
                        &node,
                        &client,
                        block,
                        &mut sock,
                        &mut query.buf,
                        &mut out,
                        &mut stop,
                    );
                    match waited.await? {
                        Some(reply) => out.extend_from_slice(&reply),
                        None => return Ok(()),
                    }
                    read_first = false;
                }
            }
        }
    }
    .await;
    let _: std::io::Result<()> = result;
    client.close(&node);
    // Dropping the client (and its subscriptions) leaves every channel.
    drop(client);
    node.stats.connected_clients.fetch_sub(1, Relaxed);
}

/// How a batch of requests ended.
enum Batch {
    /// Every complete request ran: read more.
    More,
    /// Close once the replies are written (QUIT, protocol error, query
    /// buffer over the limit).
    Close,
    /// A request blocked: write the replies so far, wait for its reply,
    /// then go on with the rest of the input (later requests wait behind
    /// it, as in Redis).
    Blocked(Block),
}

/// Executes every complete request in `input`, up to the first that
/// blocks. Serves clients blocked on keys that a request made ready before
/// running the next one.
pub(super) fn mailbox(client: &Client) -> Option<&Mailbox> {
    client.pubsub.as_ref().map(|s| &*s.mailbox)
}

pub(super) async fn wait_pushes(client: &Client) {
    match mailbox(client) {
        Some(m) => m.wait().await,
        None => std::future::pending().await,
    }
}

/// Writes part of a subscriber's waiting messages (`out` is empty here).
/// False when its mailbox was closed over the output buffer limit.
pub(super) async fn write_pushes(
    client: &Client,
    out: &mut BytesMut,
    sock: &mut TcpStream,
) -> std::io::Result<bool> {
    let Some(m) = mailbox(client) else {
        return Ok(true);
    };
    match m.take(out, PUSH_WRITE_BYTES) {
        Taken::Closed => return Ok(false),
        // The rest on a later turn, after the commands already read.
        Taken::More => m.rewake(),
        Taken::Empty => {}
    }
    write_out(sock, out, Some(m)).await
}

/// Writes `out` and clears it. For a subscriber, a mailbox closed over its
/// limit ends a write the client is not reading (returns false): PUBLISH
/// never waits on it, and the connection closes.
async fn write_out(
    sock: &mut TcpStream,
    out: &mut BytesMut,
    mailbox: Option<&Mailbox>,
) -> std::io::Result<bool> {
    let Some(m) = mailbox else {
        sock.write_all(out).await?;
        out.clear();
        return Ok(true);
    };
    let write = sock.write_all(out);
    tokio::pin!(write);
    let mut woken = false;
    loop {
        tokio::select! {
            r = &mut write => {
                r?;
                break;
            }
            _ = m.wait() => {
                if m.is_closed() {
                    return Ok(false);
                }
                woken = true;
            }
        }
    }
    if woken {
        // Messages arrived during the write: the loop must still see them.
        m.rewake();
    }
    out.clear();
    Ok(true)
}

/// Executes every complete request in `input`. Returns false when the
/// connection must close after the replies are written (QUIT, protocol
/// error, query buffer over the limit).
async fn execute_batch(
    node: &Node,
    client: &mut Client,
    query: &mut Query,
    out: &mut BytesMut,
    sock: &mut TcpStream,
) -> std::io::Result<Batch> {
    let now = now_ms();
    // CONFIG SET proto-max-bulk-len applies from the next batch on.
    let limits = Limits {
        max_bulk_len: node.settings.max_bulk() as usize,
        ..node.limits
    };
    loop {
        // Arguments are slices of `input`, used in place, then consumed.
        let frame = match query.next(&limits) {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                // A message part already written is completed first.
                commands::pubsub::take_pushes(client, out);
                CmdError::err(e).write(out);
                return Ok(Batch::Close);
            }
        };
        let args = query.args(&frame);
        let mut blocked = None;
        if !args.is_empty() {
            if !commands::pubsub::take_pushes(client, out) {
                return Ok(Batch::Close);
            }
            match commands::dispatch(node, client, out, &args, now) {
                Next::Done => {}
                Next::Migrate => match commands::migrate::migrate(node, &args).await {
                    Ok(reply) => out.extend_from_slice(&reply),
                    Err(e) => e.write(out),
                },
                Next::Block(b) => blocked = Some(b),
            }
            // Redis serves blocked clients after each command (after EXEC
            // for a transaction), before the next one runs.
            if node.store.ready.is_pending() {
                node.blocking.serve_ready(node, now);
            }
        }
        drop(args);
        query.consume(&frame);
        if let Some(b) = blocked {
            return Ok(Batch::Blocked(b));
        }
        if client.quit {
            return Ok(Batch::Close);
        }
        if out.len() >= MAX_PENDING_REPLY_BYTES && !write_out(sock, out, mailbox(client)).await? {
            return Ok(Batch::Close);
        }
    }
    if query.buf.len() > node.limits.max_query_buffer {
        // Redis closes such clients without a reply.
        tracing::debug!("closing client {}: query buffer over the limit", client.id);
        return Ok(Batch::Close);
    }
    Ok(Batch::More)
}
