//! A replica's connection on the primary, once it sent PSYNC: a partial
//! resync (`+CONTINUE`) from the backlog when its id and offset allow it,
//! else a full sync (`+FULLRESYNC id offset`, the snapshot, then the
//! stream from that offset); meanwhile its `REPLCONF ACK`s are read.
//!
//! The snapshot is a run of `RESTORE key at payload REPLACE ABSTTL`
//! requests, shard by shard (`keyspace/replicated.rs`), after `FLUSHALL`
//! and the function libraries, and ends with `REPLCONF SNAPSHOT-END`;
//! none of it counts in the offsets. Only built-in nodes speak this: a
//! redis-server replica gets it too and fails to load it.
//!
//! Runs in the connection's own task (the writer) and a reader task it
//! owns; neither holds a lock across an `.await`.

use super::commands::Hello;
use crate::backend::keyspace::replicated::request;
use crate::backend::keyspace::store::SHARDS;
use crate::backend::node::Node;
use bytes::BytesMut;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Stream bytes written per socket write.
const CHUNK_BYTES: usize = 256 * 1024;

/// Serves a replica on `sock` until it leaves, falls too far behind, or
/// the node stops. `input` holds what it sent after PSYNC.
pub(crate) async fn serve(
    node: Arc<Node>,
    sock: TcpStream,
    hello: Box<Hello>,
    input: BytesMut,
    mut stop: watch::Receiver<bool>,
) {
    let ip = sock
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let (mut rd, mut wr) = sock.into_split();
    let id = node.repl.next_reader_id();
    let (replid, offset) = hello.psync.clone().unwrap_or(("?".into(), -1));
    let result = async {
        let from = offset.max(0) as u64;
        let partial = {
            let _excl = node.exclusive();
            let mut f = node.repl.feed();
            let ok = offset >= 0 && f.can_continue(&replid, from);
            if ok {
                f.add_reader(id, from - 1, ip.clone(), hello.port, "online");
                Some(f.replid.clone())
            } else {
                None
            }
        };
        match partial {
            Some(current) => {
                node.repl.sync_partial_ok.fetch_add(1, Relaxed);
                wr.write_all(format!("+CONTINUE {current}\r\n").as_bytes())
                    .await?;
            }
            None => {
                if replid != "?" {
                    node.repl.sync_partial_err.fetch_add(1, Relaxed);
                }
                node.repl.sync_full.fetch_add(1, Relaxed);
                full_sync(&node, &mut wr, id, &ip, hello.port).await?;
            }
        }
        let acks = read_acks(node.clone(), id, &mut rd, input);
        tokio::select! {
            r = stream(&node, &mut wr, id) => r,
            r = acks => r,
            _ = stop.changed() => Ok(()),
        }
    }
    .await;
    if let Err(e) = result {
        tracing::info!("replica {ip}:{} left: {e}", hello.port);
    }
    node.repl.feed().remove_reader(id);
    node.repl.acked.send_modify(|n| *n += 1);
}

/// `+FULLRESYNC`, then the snapshot; registers the reader at the
/// snapshot's offset so the stream from there is kept for it.
async fn full_sync(
    node: &Node,
    wr: &mut OwnedWriteHalf,
    id: u64,
    ip: &str,
    port: u16,
) -> std::io::Result<()> {
    let _one = node.repl.full_sync.lock().await;
    let (head, libraries) = {
        let _excl = node.exclusive();
        super::activate(node);
        let mut f = node.repl.feed();
        let offset = f.end();
        f.add_reader(id, offset, ip.to_string(), port, "wait_bgsave");
        node.store.hooks.snapshot.begin();
        let libraries = node.scripting.dump_functions();
        (format!("+FULLRESYNC {} {offset}\r\n", f.replid), libraries)
    };
    let cancel = Cancel(node);
    wr.write_all(head.as_bytes()).await?;
    if let Some(r) = node.repl.feed().reader(id) {
        r.state = "send_bulk";
    }
    let mut first = Vec::new();
    request(&mut first, &[b"FLUSHALL"]);
    request(&mut first, &[b"FUNCTION", b"FLUSH"]);
    if let Some(payload) = libraries {
        request(&mut first, &[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]);
    }
    wr.write_all(&first).await?;
    let snapshot = &node.store.hooks.snapshot;
    let mut i = 0;
    loop {
        // Capture the next shard ourselves unless a client did already.
        while i < SHARDS && !snapshot.is_pending(i) {
            i += 1;
        }
        if i < SHARDS {
            let _shared = node.shared();
            drop(node.store.lock_shard(i, 0));
        }
        match snapshot.next_chunk() {
            None => break,
            Some(chunk) if chunk.is_empty() => tokio::task::yield_now().await,
            Some(chunk) => {
                write(node, wr, id, &chunk).await?;
                // A write to a socket with room does not yield: let the
                // clients in between shards.
                tokio::task::yield_now().await;
            }
        }
    }
    std::mem::forget(cancel);
    let mut end = Vec::new();
    request(&mut end, &[b"REPLCONF", b"SNAPSHOT-END"]);
    wr.write_all(&end).await?;
    if let Some(r) = node.repl.feed().reader(id) {
        r.state = "online";
        r.last_ack = Instant::now();
    }
    Ok(())
}

/// Abandons the snapshot when its replica leaves mid-transfer.
struct Cancel<'a>(&'a Node);

impl Drop for Cancel<'_> {
    fn drop(&mut self) {
        self.0.store.hooks.snapshot.cancel();
    }
}

/// Writes the stream from the reader's position as it grows.
async fn stream(node: &Node, wr: &mut OwnedWriteHalf, id: u64) -> std::io::Result<()> {
    let mut written = node.repl.written.subscribe();
    let mut ping = tokio::time::interval(Duration::from_secs(
        node.settings
            .int("repl-ping-replica-period")
            .unwrap_or(10)
            .max(1) as u64,
    ));
    ping.tick().await;
    loop {
        let chunk = {
            let mut f = node.repl.feed();
            let Some(r) = f.reader(id) else {
                return Err(std::io::Error::other("unregistered"));
            };
            if r.kicked {
                return Err(std::io::Error::other(
                    "over the client-output-buffer-limit for replicas",
                ));
            }
            let pos = r.pos;
            f.read(pos, CHUNK_BYTES)
                .ok_or_else(|| std::io::Error::other("fell out of the backlog"))?
        };
        if chunk.is_empty() {
            tokio::select! {
                r = written.changed() => if r.is_err() { return Ok(()) },
                _ = ping.tick() => ping_stream(node),
            }
            continue;
        }
        write(node, wr, id, &chunk).await?;
        if let Some(r) = node.repl.feed().reader(id) {
            r.pos += chunk.len() as u64;
        }
    }
}

/// Writes `bytes` unless the replica is cut off first (a replica that
/// stopped reading must not keep its connection, nor this task).
async fn write(node: &Node, wr: &mut OwnedWriteHalf, id: u64, bytes: &[u8]) -> std::io::Result<()> {
    tokio::select! {
        r = wr.write_all(bytes) => r,
        () = cut_off(node, id) => Err(std::io::Error::other(
            "over the client-output-buffer-limit for replicas",
        )),
    }
}

/// Completes once the reader is cut off or gone.
async fn cut_off(node: &Node, id: u64) {
    let mut written = node.repl.written.subscribe();
    loop {
        if node.repl.feed().reader(id).is_none_or(|r| r.kicked) {
            return;
        }
        if written.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Puts a PING in the stream (as Redis does every
/// `repl-ping-replica-period`), so replicas see their primary alive.
fn ping_stream(node: &Node) {
    if !node.repl.is_replica() && super::is_feeding(node) {
        super::emit(node, &[b"PING"]);
    }
}

/// Reads `REPLCONF ACK offset` from the replica until it closes.
async fn read_acks(
    node: Arc<Node>,
    id: u64,
    rd: &mut tokio::net::tcp::OwnedReadHalf,
    mut buf: BytesMut,
) -> std::io::Result<()> {
    let limits = node.limits;
    loop {
        while let Some(frame) = crate::resp::decode_request(&mut buf, &limits)
            .map_err(|e| std::io::Error::other(e.to_string()))?
        {
            let args = &frame.args;
            let is_ack = args.len() >= 3
                && crate::resp::eq_ignore_case(&args[0], b"replconf")
                && crate::resp::eq_ignore_case(&args[1], b"ack");
            if let (true, Some(off)) = (
                is_ack,
                crate::resp::parse_i64(args.get(2).map_or(&[][..], |a| a)),
            ) {
                if let Some(r) = node.repl.feed().reader(id) {
                    r.ack = r.ack.max(off.max(0) as u64);
                    r.last_ack = Instant::now();
                }
                node.repl.acked.send_modify(|n| *n += 1);
            }
        }
        if buf.len() > 1 << 20 {
            return Err(std::io::Error::other("replica sent too much"));
        }
        if rd.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
}
