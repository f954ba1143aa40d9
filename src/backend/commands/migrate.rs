//! Moving keys between nodes: DUMP, RESTORE and MIGRATE, the primitives the
//! proxy's online resharding is built on.
//!
//! MIGRATE is atomic at the source per key: MIGRATEs on this node are
//! serialized by one async mutex held across the whole operation, and a key
//! is deleted here only after the target acknowledged its RESTORE, and only
//! if it did not change meanwhile. Shard locks are taken only to read or
//! delete, never across an `.await`, and each such step holds the node's
//! gate shared (no transaction runs meanwhile). Target connections are cached per
//! address, as Redis does.
//!
//! The DUMP payload is our own, versioned and checksummed (`keyspace/dump.rs`);
//! only built-in nodes understand it.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::keyspace::clock::now_ms;
use crate::backend::keyspace::dump::{self, Value};
use crate::backend::keyspace::rdb::{self, RdbError};
use crate::backend::node::Node;
use crate::backend::value::Thresholds;
use crate::client::{ClientError, Conn};
use crate::resp::{encode, eq_ignore_case};
use bytes::{Bytes, BytesMut};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// Keys sent per round trip, so a large `KEYS` list cannot build an
/// unbounded buffer.
const BATCH_KEYS: usize = 128;
/// Payload bytes sent per round trip (at least one key is always sent).
const BATCH_BYTES: usize = 16 * 1024 * 1024;
/// Cached target connections idle longer than this are dropped (Redis: 10 s).
const IDLE_CONNECTION: Duration = Duration::from_secs(10);

/// DUMP key
pub(crate) fn dump(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let store = &ctx.node.store;
    let h = store.hash(args[1]);
    let payload = store
        .lock(h, ctx.now)
        .get(h, args[1])
        .map(|e| dump::encode(e));
    ctx.bulk_or_null(payload.as_deref());
    Ok(())
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]
pub(crate) fn restore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (mut replace, mut absttl) = (false, false);
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if eq_ignore_case(args[j], b"replace") {
            replace = true;
        } else if eq_ignore_case(args[j], b"absttl") {
            absttl = true;
        } else if eq_ignore_case(args[j], b"idletime") && more >= 1 {
            if parse_i64(args[j + 1])? < 0 {
                return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
            }
            j += 1;
        } else if eq_ignore_case(args[j], b"freq") && more >= 1 {
            let f = parse_i64(args[j + 1])?;
            if !(0..=255).contains(&f) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let store = &ctx.node.store;
    let (key, now) = (args[1], ctx.now);
    let h = store.hash(key);
    let mut s = store.lock(h, now);
    if !replace && s.contains(h, key) {
        return Err(CmdError::BusyKey);
    }
    let ttl = parse_i64(args[2])?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let value = decode(args[3], &ctx.node.thresholds())?;
    let expire_at = match (ttl, absttl) {
        (0, _) => 0,
        (t, true) => t as u64,
        (t, false) => now.saturating_add(t as u64),
    };
    if expire_at != 0 && expire_at <= now {
        // Already expired: nothing to create, but REPLACE still removes.
        s.remove(h, key);
    } else {
        match value {
            Value::Str(v) => s.put(h, key, &v, expire_at),
            Value::Coll(c) => s.put_coll(h, key, c, expire_at),
        }
    }
    ctx.ok();
    Ok(())
}

/// A RESTORE payload: the node's own (`SHD` magic) or Redis's.
fn decode<'a>(p: &'a [u8], t: &Thresholds) -> Result<Value<'a>, CmdError> {
    if p.starts_with(b"SHD") {
        return dump::decode(p, t).ok_or(CmdError::BadPayload);
    }
    rdb::decode(p, t).map_err(|e| match e {
        RdbError::Checksum => CmdError::BadPayload,
        RdbError::Format => CmdError::err("Bad data format"),
    })
}

/// A parsed MIGRATE request.
struct Migrate {
    host: String,
    port: u16,
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    auth: Option<(Option<Bytes>, Bytes)>,
    keys: Vec<Bytes>,
}

fn parse_migrate(args: &[&[u8]]) -> Result<Migrate, CmdError> {
    let (mut copy, mut replace, mut auth) = (false, false, None);
    let mut keys = vec![Bytes::copy_from_slice(args[3])];
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = &args[j];
        if eq_ignore_case(a, b"copy") {
            copy = true;
        } else if eq_ignore_case(a, b"replace") {
            replace = true;
        } else if eq_ignore_case(a, b"auth") && more >= 1 {
            auth = Some((None, Bytes::copy_from_slice(args[j + 1])));
            j += 1;
        } else if eq_ignore_case(a, b"auth2") && more >= 2 {
            auth = Some((
                Some(Bytes::copy_from_slice(args[j + 1])),
                Bytes::copy_from_slice(args[j + 2]),
            ));
            j += 2;
        } else if eq_ignore_case(a, b"keys") {
            if !args[3].is_empty() {
                return Err(CmdError::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            keys = args[j + 1..]
                .iter()
                .map(|a| Bytes::copy_from_slice(a))
                .collect();
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let timeout = parse_i64(args[5])?;
    let db = parse_i64(args[4])?;
    let port = parse_i64(args[2])
        .ok()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0);
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let host = String::from_utf8_lossy(args[1]).into_owned();
    Ok(Migrate {
        host,
        port,
        db,
        timeout,
        copy,
        replace,
        auth,
        keys,
    })
}

/// Why a MIGRATE round trip failed.
enum IoFail {
    Connect,
    Write,
    Read,
}

impl IoFail {
    fn error(&self) -> CmdError {
        CmdError::Other(match self {
            IoFail::Connect => "IOERR error or timeout connecting to the client".into(),
            IoFail::Write => "IOERR error or timeout writing to target instance".into(),
            IoFail::Read => "IOERR error or timeout reading to target instance".into(),
        })
    }
}

impl From<ClientError> for IoFail {
    fn from(e: ClientError) -> IoFail {
        match e {
            ClientError::Connect { .. } | ClientError::ConnectTimeout { .. } => IoFail::Connect,
            ClientError::Write(_) | ClientError::WriteTimeout => IoFail::Write,
            _ => IoFail::Read,
        }
    }
}

/// One key's state at the source when it was sent.
struct Sent {
    key: Bytes,
    hash: u64,
    /// The DUMP payload of its value.
    payload: Vec<u8>,
    expire_at: u64,
}

/// Writes the queued batch and reads its replies, each without its CRLF.
/// Returns the number of replies read before an I/O failure (for the
/// retry decision) on error.
async fn round_trip(conn: &mut Conn, replies: &mut Vec<Bytes>) -> Result<(), (IoFail, usize)> {
    let n = conn.flush().await.map_err(|e| (e.into(), 0))?;
    for i in 0..n {
        let reply = conn.read_reply().await.map_err(|e| (e.into(), i))?;
        replies.push(reply.slice(..reply.len() - 2));
    }
    Ok(())
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key ...]
pub(crate) async fn migrate(node: &Node, args: &[&[u8]]) -> Result<BytesMut, CmdError> {
    let m = parse_migrate(args)?;
    let mut state = node.migrate.lock().await;
    state
        .conns
        .retain(|_, (_, used)| used.elapsed() < IDLE_CONNECTION);
    let store = &node.store;
    let mut sent_any = false;
    let mut first_error: Option<String> = None;
    let mut changed = 0;
    let mut keys = m.keys.iter().peekable();
    while keys.peek().is_some() {
        // Read a batch of live keys under short shard locks.
        let now = now_ms();
        let (mut batch, mut bytes) = (Vec::new(), 0);
        while batch.len() < BATCH_KEYS && (bytes < BATCH_BYTES || batch.is_empty()) {
            let Some(key) = keys.next() else { break };
            let h = store.hash(key);
            let found = {
                // No transaction may run while this step reads the store.
                let _shared = node.shared();
                store
                    .lock(h, now)
                    .get(h, key)
                    .map(|e| (dump::encode(e), e.expire_at))
            };
            if let Some((payload, expire_at)) = found {
                bytes += payload.len();
                batch.push(Sent {
                    key: key.clone(),
                    hash: h,
                    payload,
                    expire_at,
                });
            }
        }
        if batch.is_empty() {
            continue;
        }
        sent_any = true;
        let replies = send_batch(&mut state, &m, &batch, node.port).await?;
        for (sent, reply) in batch.iter().zip(&replies) {
            if let Some(err) = reply.strip_prefix(b"-") {
                first_error.get_or_insert_with(|| String::from_utf8_lossy(err).into_owned());
                continue;
            }
            if !m.copy && !delete_if_unchanged(node, sent) {
                changed += 1;
            }
        }
    }
    if !sent_any {
        let mut out = BytesMut::new();
        encode::simple(&mut out, "NOKEY");
        return Ok(out);
    }
    if first_error.is_none() && changed > 0 {
        return Err(CmdError::err(format!(
            "{changed} key(s) changed at the source during MIGRATE; the source copies were kept"
        )));
    }
    if let Some(e) = first_error {
        return Err(CmdError::err(format!(
            "Target instance replied with error: {e}"
        )));
    }
    let mut out = BytesMut::new();
    encode::simple(&mut out, "OK");
    Ok(out)
}

/// `host:port` as a connect address (an IPv6 host in brackets).
fn target(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Whether `sock` is connected to this node's own listener: the same host
/// (a connection to oneself has equal local and peer addresses) and port.
fn is_self(sock: &TcpStream, own_port: u16) -> bool {
    match (sock.local_addr(), sock.peer_addr()) {
        (Ok(local), Ok(peer)) => peer.port() == own_port && peer.ip() == local.ip(),
        _ => false,
    }
}

/// Sends one batch on the cached (or a new) connection and returns one reply
/// line per key. A cached connection that fails before any reply arrived
/// may just have been closed by the target while idle: retry once on a
/// fresh one (nothing was applied, so this cannot apply twice).
async fn send_batch(
    state: &mut crate::backend::node::MigrateState,
    m: &Migrate,
    batch: &[Sent],
    own_port: u16,
) -> Result<Vec<Bytes>, CmdError> {
    let addr = (m.host.clone(), m.port);
    for attempt in 0..2 {
        let (mut conn, fresh) = match state.conns.remove(&addr) {
            Some((mut conn, _)) => {
                conn.set_timeout(m.timeout);
                (conn, false)
            }
            None => match Conn::connect(&target(&m.host, m.port), m.timeout).await {
                Ok(c) if is_self(c.stream(), own_port) => {
                    // RESTORE REPLACE on ourselves, then the DEL that
                    // ends a MIGRATE, would delete the key.
                    return Err(CmdError::err("MIGRATE target is this node itself"));
                }
                Ok(c) => (c, true),
                Err(_) => return Err(IoFail::Connect.error()),
            },
        };
        let mut preamble = 0;
        // Every round trip re-sends AUTH and SELECT: a cached connection
        // may have been reset by a RESET or another client of the target.
        if let Some((user, pass)) = &m.auth {
            match user {
                Some(u) => conn.queue(&[b"AUTH", u, pass]),
                None => conn.queue(&[b"AUTH", pass]),
            }
            preamble += 1;
        }
        if m.db != 0 {
            conn.queue(&[b"SELECT", m.db.to_string().as_bytes()]);
            preamble += 1;
        }
        let now = now_ms();
        for s in batch {
            let ttl = if s.expire_at == 0 {
                0
            } else {
                s.expire_at.saturating_sub(now).max(1)
            };
            let ttl = ttl.to_string();
            let mut parts: Vec<&[u8]> = vec![b"RESTORE", &s.key, ttl.as_bytes(), &s.payload];
            if m.replace {
                parts.push(b"REPLACE");
            }
            conn.queue(&parts);
        }
        let mut replies = Vec::new();
        match round_trip(&mut conn, &mut replies).await {
            Ok(()) => {
                state.conns.insert(addr, (conn, Instant::now()));
                if let Some(err) = replies[..preamble].iter().find(|r| r.starts_with(b"-")) {
                    let e = String::from_utf8_lossy(&err[1..]).into_owned();
                    return Err(CmdError::err(format!(
                        "Target instance replied with error: {e}"
                    )));
                }
                return Ok(replies.split_off(preamble));
            }
            Err((fail, read)) => {
                if fresh || read > 0 || attempt == 1 {
                    return Err(fail.error());
                }
            }
        }
    }
    Err(IoFail::Read.error())
}

/// Deletes a migrated key unless it changed at the source while its RESTORE
/// was in flight (a write that did not come through the proxy): then the
/// newer source copy is kept and false is returned.
fn delete_if_unchanged(node: &Node, sent: &Sent) -> bool {
    let store = &node.store;
    let _shared = node.shared();
    let mut s = store.lock(sent.hash, now_ms());
    let current = s
        .get(sent.hash, &sent.key)
        .map(|e| e.expire_at == sent.expire_at && dump::encode(e) == sent.payload);
    if current == Some(true) {
        let old = s.remove(sent.hash, &sent.key);
        // A replica learns of the move as a DEL.
        store.hooks.removed(&sent.key);
        use crate::backend::keyspace::notices::GENERIC;
        store.hooks.notices.raise(GENERIC, "del", &sent.key);
        drop(s);
        drop(old);
        crate::backend::replication::flush_removed(node);
        crate::backend::notify::flush(node, now_ms());
    }
    current != Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrate_keys_option_requires_empty_key() {
        let args: Vec<&[u8]> = ["MIGRATE", "h", "1", "k", "0", "100", "KEYS", "a"]
            .iter()
            .map(|s| s.as_bytes())
            .collect();
        assert!(parse_migrate(&args).is_err());
        let mut ok = args.clone();
        ok[3] = b"";
        let m = parse_migrate(&ok).ok().unwrap();
        assert_eq!(m.keys, vec![Bytes::from_static(b"a")]);
    }
}
