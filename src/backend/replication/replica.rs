//! The replica's link to its primary: connect, handshake (PING, AUTH when
//! `masterauth` is set, REPLCONF listening-port and capa, PSYNC with this
//! node's id and offset), take the snapshot or continue from the backlog, then apply the stream and
//! acknowledge it (`REPLCONF ACK offset` after every batch applied and at
//! least every second).
//!
//! A lost link is retried with backoff (100 ms doubling to 2 s, with
//! jitter) while INFO reports `master_link_status:down`; a primary that is
//! not a built-in node (a redis-server answers PSYNC with an RDB file) is
//! retried the same way, with the reason logged. REPLICAOF bumps the
//! generation, which ends the old link's task at its next step.

use super::apply::Applier;
use super::LinkState;
use crate::backend::node::Node;
use bytes::BytesMut;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

const CONNECT_TIMEOUT_MS: u64 = 2000;
const BACKOFF_MIN_MS: u64 = 100;
const BACKOFF_MAX_MS: u64 = 2000;
const ACK_EVERY_MS: u64 = 1000;

type Io<T> = std::io::Result<T>;

/// Asks the node's link runner for a link task of `generation`.
pub(crate) fn start(node: &Node, generation: u64) {
    if let Some(tx) = node.repl.starts().as_ref() {
        let _ = tx.send(generation);
    }
}

/// Runs link tasks as REPLICAOF asks for them (the server loop runs this
/// with the node's `Arc`).
pub(crate) async fn run_links(node: Arc<Node>, mut rx: mpsc::UnboundedReceiver<u64>) {
    while let Some(generation) = rx.recv().await {
        tokio::spawn(link(node.clone(), generation));
    }
}

fn is_current(node: &Node, generation: u64) -> bool {
    node.repl.generation.load(Relaxed) == generation
}

fn set_state(node: &Node, generation: u64, state: LinkState) {
    if !is_current(node, generation) {
        return;
    }
    if let Some(l) = node.repl.link().as_mut() {
        l.state = state;
        if state == LinkState::Connected {
            l.down_since = None;
        } else if l.down_since.is_none() {
            l.down_since = Some(Instant::now());
        }
    }
}

async fn link(node: Arc<Node>, generation: u64) {
    let mut backoff = BACKOFF_MIN_MS;
    while is_current(&node, generation) {
        let Some((host, port)) = node.repl.link().as_ref().map(|l| (l.host.clone(), l.port)) else {
            return;
        };
        set_state(&node, generation, LinkState::Connecting);
        let mut reached = false;
        if let Err(e) = session(&node, generation, &host, port, &mut reached).await {
            tracing::warn!("replication from {host}:{port}: {e}");
        }
        if !is_current(&node, generation) {
            return;
        }
        set_state(&node, generation, LinkState::Connect);
        if reached {
            backoff = BACKOFF_MIN_MS;
        }
        let jitter = crate::backend::keyspace::clock::now_ms() % (backoff / 4 + 1);
        tokio::time::sleep(Duration::from_millis(backoff + jitter)).await;
        backoff = (backoff * 2).min(BACKOFF_MAX_MS);
    }
}

/// One connection to the primary, until it fails or REPLICAOF changes.
async fn session(
    node: &Node,
    generation: u64,
    host: &str,
    port: u16,
    reached: &mut bool,
) -> Io<()> {
    let connect = TcpStream::connect((host, port));
    let mut sock = tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), connect)
        .await
        .map_err(|_| std::io::Error::other("connect timed out"))??;
    let _ = sock.set_nodelay(true);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let my_port = node.port.to_string();
    let hello = [
        vec![&b"PING"[..]],
        vec![b"REPLCONF", b"listening-port", my_port.as_bytes()],
        vec![b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
    ];
    let (user, pass) = (
        node.settings.text("masteruser").unwrap_or_default(),
        node.settings.text("masterauth").unwrap_or_default(),
    );
    let auth: Vec<&[u8]> = match (user.is_empty(), pass.is_empty()) {
        (_, true) => Vec::new(),
        (true, false) => vec![b"AUTH", pass.as_bytes()],
        (false, false) => vec![b"AUTH", user.as_bytes(), pass.as_bytes()],
    };
    // Redis's order: PING (a primary with a password answers -NOAUTH),
    // then AUTH when `masterauth` is set, then REPLCONF.
    let [ping, port_conf, capa] = hello;
    let steps = std::iter::once(ping)
        .chain((!auth.is_empty()).then_some(auth))
        .chain([port_conf, capa]);
    for req in steps {
        send(&mut sock, &req).await?;
        let line = read_line(&mut sock, &mut buf).await?;
        let is_auth = crate::resp::eq_ignore_case(req[0], b"auth");
        if line.starts_with('-') && (is_auth || !line.starts_with("-NOAUTH")) {
            let what = if is_auth {
                "AUTH (masterauth)"
            } else {
                "the handshake"
            };
            return Err(std::io::Error::other(format!(
                "the primary answered {what} with {line}"
            )));
        }
    }
    let (replid, from) = {
        let f = node.repl.feed();
        if f.active {
            (f.replid.clone(), (f.end() + 1).to_string())
        } else {
            ("?".to_string(), "-1".to_string())
        }
    };
    send(&mut sock, &[b"PSYNC", replid.as_bytes(), from.as_bytes()]).await?;
    let line = read_line(&mut sock, &mut buf).await?;
    let mut words = line.split(' ');
    let mut applier = Applier::new(node, format!("{host}:{port}"));
    match words.next() {
        Some("+FULLRESYNC") => {
            let id = words.next().unwrap_or_default().to_string();
            let offset: u64 = words.next().and_then(|o| o.parse().ok()).unwrap_or(0);
            set_state(node, generation, LinkState::Sync);
            load_snapshot(node, generation, &mut sock, &mut buf, &mut applier).await?;
            let _excl = node.exclusive();
            node.repl.feed().reset(&id, offset);
            if let Some(l) = node.repl.link().as_mut() {
                l.read_offset = offset;
            }
        }
        Some("+CONTINUE") => {
            if let Some(id) = words.next().filter(|id| !id.is_empty()) {
                let mut f = node.repl.feed();
                if f.replid != id {
                    f.shift_id(id.to_string());
                }
            }
            let end = node.repl.feed().end();
            if let Some(l) = node.repl.link().as_mut() {
                l.read_offset = end;
            }
        }
        _ => return Err(std::io::Error::other(format!("PSYNC answered {line}"))),
    }
    if !is_current(node, generation) {
        return Ok(());
    }
    set_state(node, generation, LinkState::Connected);
    *reached = true;
    stream(node, generation, &mut sock, &mut buf, &mut applier).await
}

/// Applies the snapshot's requests until `REPLCONF SNAPSHOT-END`.
async fn load_snapshot(
    node: &Node,
    generation: u64,
    sock: &mut TcpStream,
    buf: &mut BytesMut,
    applier: &mut Applier,
) -> Io<()> {
    let limits = node.limits;
    loop {
        // Redis sends newlines while it prepares an RDB file; so may others.
        while buf.first() == Some(&b'\n') {
            let _ = buf.split_to(1);
        }
        if buf.first() == Some(&b'$') {
            return Err(std::io::Error::other(
                "the primary is not a built-in shardis node (it sent an RDB file); a built-in node replicates only from a built-in node",
            ));
        }
        while let Some(req) =
            crate::resp::decode_request(buf, &limits).map_err(std::io::Error::other)?
        {
            let args: Vec<&[u8]> = req.args.iter().map(|a| &a[..]).collect();
            let end = args.len() == 2
                && crate::resp::eq_ignore_case(args[0], b"replconf")
                && crate::resp::eq_ignore_case(args[1], b"snapshot-end");
            if end {
                return Ok(());
            }
            applier.apply_now(node, &args).await;
        }
        if !is_current(node, generation) {
            return Err(std::io::Error::other("REPLICAOF changed"));
        }
        if sock.read_buf(buf).await? == 0 {
            return Err(std::io::Error::other(
                "the primary closed the link during the sync",
            ));
        }
        touch_io(node, 0);
    }
}

/// Applies the stream, acknowledging it, until the link fails.
async fn stream(
    node: &Node,
    generation: u64,
    sock: &mut TcpStream,
    buf: &mut BytesMut,
    applier: &mut Applier,
) -> Io<()> {
    let limits = node.limits;
    let mut tick = tokio::time::interval(Duration::from_millis(ACK_EVERY_MS));
    let timeout =
        Duration::from_secs(node.settings.int("repl-timeout").unwrap_or(60).max(1) as u64);
    let mut last_read = Instant::now();
    loop {
        let mut applied = false;
        while let Some(req) =
            crate::resp::decode_request(buf, &limits).map_err(std::io::Error::other)?
        {
            let args: Vec<&[u8]> = req.args.iter().map(|a| &a[..]).collect();
            applier.apply_now(node, &args).await;
            node.repl.append_raw(&req.raw);
            applied = true;
        }
        if !is_current(node, generation) {
            return Ok(());
        }
        if applied {
            ack(node, sock).await?;
        }
        tokio::select! {
            n = sock.read_buf(buf) => {
                let n = n?;
                if n == 0 {
                    return Err(std::io::Error::other("the primary closed the link"));
                }
                last_read = Instant::now();
                touch_io(node, n as u64);
            }
            _ = tick.tick() => {
                if last_read.elapsed() > timeout {
                    return Err(std::io::Error::other("timeout: nothing from the primary"));
                }
                if !is_current(node, generation) {
                    return Ok(());
                }
                ack(node, sock).await?;
            }
        }
    }
}

fn touch_io(node: &Node, read: u64) {
    if let Some(l) = node.repl.link().as_mut() {
        l.last_io = Instant::now();
        l.read_offset += read;
    }
}

async fn ack(node: &Node, sock: &mut TcpStream) -> Io<()> {
    let end = node.repl.feed().end().to_string();
    send(sock, &[b"REPLCONF", b"ACK", end.as_bytes()]).await
}

async fn send(sock: &mut TcpStream, args: &[&[u8]]) -> Io<()> {
    let mut bytes = Vec::new();
    crate::backend::keyspace::replicated::request(&mut bytes, args);
    sock.write_all(&bytes).await
}

/// One reply line (`+…`, `-…`), within the connect timeout.
async fn read_line(sock: &mut TcpStream, buf: &mut BytesMut) -> Io<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(CONNECT_TIMEOUT_MS * 5);
    loop {
        while buf.first() == Some(&b'\n') {
            let _ = buf.split_to(1);
        }
        if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
            let line = buf.split_to(i + 2);
            return Ok(String::from_utf8_lossy(&line[..i]).into_owned());
        }
        if buf.len() > 64 * 1024 {
            return Err(std::io::Error::other(
                "the primary's reply line is too long",
            ));
        }
        let n = tokio::time::timeout_at(deadline, sock.read_buf(buf))
            .await
            .map_err(|_| std::io::Error::other("the primary did not answer in time"))??;
        if n == 0 {
            return Err(std::io::Error::other("the primary closed the link"));
        }
    }
}
