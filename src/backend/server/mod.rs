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
//! connection in [`wait::blocked`] until `backend::blocking` sends its reply or
//! its timeout passes; the requests behind it wait, as in Redis.
//!
//! The task that owns a client's socket is the only one that touches it.
//! A subscribed connection also waits on its pub/sub mailbox: messages are
//! written between replies, never inside one, and one that arrived before a
//! command was read is written before that command's reply.

pub(crate) mod output;
pub(crate) mod query;
mod wait;

use self::output::{mailbox, wait_pushes, write_out, write_pushes};
use self::query::{Query, BUFFER_BYTES};
use crate::backend::blocking::Block;
use crate::backend::commands::{self, Client, Next};
use crate::backend::error::CmdError;
use crate::backend::keyspace::clock::now_ms;
use crate::backend::keyspace::evict::EXPIRE_TICK_MS;
use crate::backend::node::Node;
use crate::backend::replication;
use crate::backend::NodeConfig;
use crate::resp::Limits;
use bytes::BytesMut;
use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Replies are flushed mid-batch once this many bytes are pending, which
/// bounds a client's output buffer however long its pipeline.
const MAX_PENDING_REPLY_BYTES: usize = 8 * 1024 * 1024;
/// How long shutdown waits for clients to finish what they have read.
const SHUTDOWN_GRACE_MS: u64 = 1000;

/// Serves the node on `listener` until `shutdown` completes: stops
/// accepting, lets clients finish the requests they already sent (within a
/// grace period), then returns.
pub(crate) async fn run(
    listener: TcpListener,
    config: NodeConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let node = Arc::new(Node::new(&config, port));
    let (stop_tx, stop_rx) = watch::channel(false);
    let expiry = tokio::spawn(expire_loop(node.clone(), stop_rx.clone()));
    let (starts, wanted) = tokio::sync::mpsc::unbounded_channel();
    *node.repl.starts() = Some(starts);
    node.repl.refresh(&node.settings);
    let links = tokio::spawn(replication::run_links(node.clone(), wanted));
    if let Some((host, port)) = config.replicaof.clone() {
        replication::commands::follow(&node, host, port);
    }
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
    links.abort();
    // Link tasks end with the runtime; bumping the generation stops them
    // at their next step when the runtime lives on (tests).
    node.repl.generation.fetch_add(1, Relaxed);
    Ok(())
}

/// Runs [`EXPIRE_TICK_MS`] sweeps of expired keys until shutdown.
async fn expire_loop(node: Arc<Node>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_millis(EXPIRE_TICK_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                {
                    // Not while a script holds the gate: the next tick sweeps.
                    let Some(_shared) = node.try_shared() else { continue };
                    let now = now_ms();
                    node.store.expire_tick(now);
                    crate::backend::notify::flush(&node, now);
                }
                replication::flush_removed(&node);
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
    client.authenticated = node.requirepass.is_none();
    let mut query = Query::with_capacity(BUFFER_BYTES);
    let mut out = BytesMut::with_capacity(BUFFER_BYTES);
    let result: std::io::Result<bool> = async {
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
                        return Ok(false);
                    }
                    continue;
                };
                if n == 0 {
                    return Ok(false);
                }
            }
            read_first = true;
            let batch = execute_batch(&node, &mut client, &mut query, &mut out, &mut sock).await?;
            if !out.is_empty() && !write_out(&mut sock, &mut out, mailbox(&client)).await? {
                return Ok(false);
            }
            match batch {
                Batch::More => {}
                Batch::Close => return Ok(false),
                Batch::Replica => return Ok(true),
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
                        None => return Ok(false),
                    }
                    read_first = false;
                }
            }
        }
    }
    .await;
    if let (Ok(true), Some(hello)) = (&result, client.replica.take()) {
        // PSYNC: from now on this connection carries the stream.
        client.close(&node);
        node.stats.connected_clients.fetch_sub(1, Relaxed);
        let input = std::mem::take(&mut query.buf);
        replication::serve_replica(node, sock, hello, input, stop).await;
        return;
    }
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
    /// PSYNC: the connection now belongs to a replica.
    Replica,
}

/// Executes every complete request in `input`. Returns false when the
/// connection must close after the replies are written (QUIT, protocol
/// error, query buffer over the limit).
async fn execute_batch(
    node: &Arc<Node>,
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
            let mut next = commands::dispatch(node, client, out, &args, now);
            while matches!(next, Next::Busy) {
                wait_script(node).await;
                next = commands::dispatch(node, client, out, &args, now_ms());
            }
            match next {
                Next::Done | Next::Busy => {}
                Next::Script(cmd) => {
                    out.extend_from_slice(&run_script(node, client, cmd, &args).await)
                }
                Next::Migrate => match commands::migrate::migrate(node, &args).await {
                    Ok(reply) => out.extend_from_slice(&reply),
                    Err(e) => e.write(out),
                },
                Next::Block(b) => blocked = Some(b),
            }
            if let Some(w) = client.wait.take() {
                blocked = Some(Block {
                    ticket: None,
                    timeout_ms: 0,
                    on_timeout: b":0\r\n",
                    wait: Some(w),
                });
            }
            // Redis serves blocked clients after each command (after EXEC
            // for a transaction), before the next one runs.
            if node.store.ready.is_pending() && !node.scripting.busy.is_running() {
                commands::blocking::serve_ready(node, now);
            }
        }
        drop(args);
        query.consume(&frame);
        if client.replica.as_ref().is_some_and(|h| h.psync.is_some()) {
            return Ok(Batch::Replica);
        }
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

/// How often a connection looks again while a script runs on another
/// one and has not yet passed `busy-reply-threshold`.
const SCRIPT_POLL_MS: u64 = 1;

/// Waits until the running script returns or passes the threshold.
async fn wait_script(node: &Node) {
    let busy = &node.scripting.busy;
    while busy.is_running() && !busy.is_past(node.busy_threshold_ms()) {
        tokio::time::sleep(Duration::from_millis(SCRIPT_POLL_MS)).await;
    }
}

/// Runs a script command on a blocking thread, so this node's other
/// connections are served meanwhile (they wait, then get `-BUSY`, and may
/// kill it); its reply. The script runs on a client of its own with the
/// caller's protocol and identity.
async fn run_script(
    node: &Arc<Node>,
    client: &Client,
    cmd: &'static commands::Command,
    args: &[&[u8]],
) -> BytesMut {
    let node = node.clone();
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    let mut c = Client::new(
        client.id,
        client.addr.clone(),
        client.laddr.clone(),
        client.since,
    );
    c.proto = client.proto;
    let ran = tokio::task::spawn_blocking(move || {
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let mut out = BytesMut::new();
        commands::run_script(&node, &mut c, &mut out, cmd, &argv);
        out
    });
    match ran.await {
        Ok(out) => out,
        Err(e) => {
            let mut out = BytesMut::new();
            CmdError::err(format!("script thread failed: {e}")).write(&mut out);
            out
        }
    }
}
