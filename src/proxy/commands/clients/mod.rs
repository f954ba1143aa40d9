//! The proxy's clients as one another see them: the registry entry each
//! session publishes ([`ClientEntry`]), and the CLIENT subcommands that read
//! or act on other clients (LIST, INFO, KILL) or on how this client is
//! answered (REPLY ON|OFF|SKIP).
//!
//! A session owns its [`ClientState`]; what other clients may see of it is
//! mirrored into its entry with relaxed stores once per request
//! ([`after_request`]), so the request path takes no lock and the registry's
//! mutex is held only to insert, remove, or copy the entries out.
//!
//! Called by `session` (registration, [`after_request`]) and `local`
//! (CLIENT …). Must never hold the registry lock across `.await`, nor close a
//! socket itself: a kill sets a flag and wakes the session that owns it.

pub(crate) mod entry;

pub(crate) use entry::{ClientEntry, ReplyMode, Unblock};

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::Proxy;
use crate::resp::{encode, eq_ignore_case, parse_i64};

/// CLIENT LIST [TYPE t | ID id…], CLIENT INFO.
pub(crate) fn list(proxy: &Proxy, s: &ClientState, args: &[Bytes]) -> Pending {
    let sub = if eq_ignore_case(&args[1], b"info") {
        "client|info"
    } else {
        "client|list"
    };
    let own = s.entry.line(Some(sub));
    let mut out = BytesMut::new();
    if sub == "client|info" {
        encode::verbatim(&mut out, own.as_bytes(), s.proto);
        return Pending::ready(out);
    }
    let filters = &args[2..];
    let keep: Box<dyn Fn(&ClientEntry) -> bool> = match filters.first() {
        None => Box::new(|_| true),
        Some(f) if eq_ignore_case(f, b"type") && filters.len() == 2 => {
            let t = filters[1].clone();
            if !is_known_type(&t) {
                return unknown_type(&t);
            }
            Box::new(move |e| e.is_type(&t))
        }
        Some(f) if eq_ignore_case(f, b"id") && filters.len() >= 2 => {
            let mut ids = Vec::with_capacity(filters.len() - 1);
            for a in &filters[1..] {
                match parse_i64(a) {
                    Some(id) => ids.push(id),
                    None => return Pending::error("ERR Invalid client ID"),
                }
            }
            Box::new(move |e| ids.contains(&(e.id as i64)))
        }
        Some(_) => return Pending::error("ERR syntax error"),
    };
    let mut text = String::new();
    for e in snapshot(proxy) {
        if keep(&e) {
            if e.id == s.id {
                text.push_str(&own);
            } else {
                text.push_str(&e.line(None));
            }
        }
    }
    encode::verbatim(&mut out, text.as_bytes(), s.proto);
    Pending::ready(out)
}

/// The live clients, oldest first (copied out; the lock is not kept).
fn snapshot(proxy: &Proxy) -> Vec<Arc<ClientEntry>> {
    let mut all: Vec<Arc<ClientEntry>> = proxy
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    all.sort_by_key(|e| e.id);
    all
}

fn is_known_type(t: &[u8]) -> bool {
    let known = [&b"normal"[..], b"master", b"replica", b"slave", b"pubsub"];
    known.iter().any(|k| eq_ignore_case(t, k))
}

fn unknown_type(t: &[u8]) -> Pending {
    Pending::error(&format!(
        "ERR Unknown client type '{}'",
        String::from_utf8_lossy(t)
    ))
}

/// One CLIENT KILL filter.
enum Filter {
    Id(u64),
    Type(Bytes),
    Addr(Bytes),
    Laddr(Bytes),
    MaxAge(u64),
}

impl Filter {
    fn matches(&self, e: &ClientEntry) -> bool {
        match self {
            Filter::Id(id) => e.id == *id,
            Filter::Type(t) => e.is_type(t),
            Filter::Addr(a) => e.peer.as_bytes() == &a[..],
            Filter::Laddr(a) => e.local.as_bytes() == &a[..],
            Filter::MaxAge(secs) => e.age_secs() >= *secs,
        }
    }
}

/// CLIENT KILL addr:port (replies +OK) or CLIENT KILL <filter> <value> …
/// (replies the count). A killed session ends at once, dropping what it is
/// owed and the connections it pins; the caller itself, when chosen, is
/// answered first and then closed.
pub(crate) fn kill(proxy: &Proxy, s: &ClientState, args: &[Bytes]) -> Pending {
    let old_form = args.len() == 3;
    let mut filters = Vec::new();
    let mut skip_me = true;
    if old_form {
        filters.push(Filter::Addr(args[2].clone()));
        skip_me = false;
    } else {
        if !args.len().is_multiple_of(2) {
            return Pending::error("ERR syntax error");
        }
        for pair in args[2..].chunks(2) {
            let (f, v) = (&pair[0], &pair[1]);
            let filter = if eq_ignore_case(f, b"id") {
                match parse_i64(v) {
                    Some(id) if id > 0 => Filter::Id(id as u64),
                    _ => return Pending::error("ERR client-id should be greater than 0"),
                }
            } else if eq_ignore_case(f, b"type") {
                if !is_known_type(v) {
                    return unknown_type(v);
                }
                Filter::Type(v.clone())
            } else if eq_ignore_case(f, b"addr") {
                Filter::Addr(v.clone())
            } else if eq_ignore_case(f, b"laddr") {
                Filter::Laddr(v.clone())
            } else if eq_ignore_case(f, b"user") {
                // Only Redis's `default` user exists; everyone is it.
                if !eq_ignore_case(v, b"default") {
                    return Pending::error(&format!(
                        "ERR No such user '{}'",
                        String::from_utf8_lossy(v)
                    ));
                }
                continue;
            } else if eq_ignore_case(f, b"skipme") {
                if eq_ignore_case(v, b"yes") {
                    skip_me = true;
                } else if eq_ignore_case(v, b"no") {
                    skip_me = false;
                } else {
                    return Pending::error("ERR syntax error");
                }
                continue;
            } else if eq_ignore_case(f, b"maxage") {
                match parse_i64(v) {
                    Some(secs) if secs >= 0 => Filter::MaxAge(secs as u64),
                    _ => return Pending::error("ERR value is not an integer or out of range"),
                }
            } else {
                return Pending::error("ERR syntax error");
            };
            filters.push(filter);
        }
    }
    let mut killed = 0;
    let mut me = false;
    for e in snapshot(proxy) {
        if !filters.iter().all(|f| f.matches(&e)) || (skip_me && e.id == s.id) {
            continue;
        }
        killed += 1;
        if e.id == s.id {
            me = true;
        } else if !e.killed.swap(true, Relaxed) {
            e.budget.wake();
        }
    }
    let mut out = BytesMut::new();
    match (old_form, killed) {
        (true, 0) => return Pending::error("ERR No such client"),
        (true, _) => encode::simple(&mut out, "OK"),
        (false, n) => encode::integer(&mut out, n),
    }
    if me {
        return Pending::Close(out.freeze());
    }
    Pending::ready(out)
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: asks the node where client `id`'s
/// blocking command waits to end it (the node's reply to the command, a
/// timeout's or `-UNBLOCKED`, reaches the client as any reply does);
/// a pop the proxy waits for itself (keys on several nodes) is told
/// directly; `:0` when that client is not blocked.
pub(crate) fn unblock(proxy: &Proxy, args: &[Bytes]) -> Pending {
    let Some(id) = parse_i64(&args[2]) else {
        return Pending::error("ERR value is not an integer or out of range");
    };
    let reason: &[u8] = match args.get(3) {
        None => b"TIMEOUT",
        Some(r) if eq_ignore_case(r, b"timeout") => b"TIMEOUT",
        Some(r) if eq_ignore_case(r, b"error") => b"ERROR",
        Some(_) => return Pending::error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let entry = proxy
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(id as u64))
        .cloned();
    if let Some(e) = &entry {
        let waiting = e
            .waiting_here
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((_, tx)) = waiting {
            let why = if reason == b"ERROR" {
                Unblock::Error
            } else {
                Unblock::Timeout
            };
            let answered = tx.send(why).is_ok();
            return Pending::Ready(Bytes::from_static(if answered {
                b":1\r\n"
            } else {
                b":0\r\n"
            }));
        }
    }
    let target = entry.and_then(|e| {
        let b = e.blocked_on.lock().unwrap_or_else(|e| e.into_inner());
        b.as_ref().map(|b| (b.node.clone(), b.node_id.clone()))
    });
    let Some((node, mut node_id)) = target else {
        return Pending::Ready(Bytes::from_static(b":0\r\n"));
    };
    Pending::Later(Box::pin(async move {
        let wait = std::time::Duration::from_millis(UNBLOCK_ID_WAIT_MS);
        let known = tokio::time::timeout(wait, node_id.wait_for(|v| v.is_some())).await;
        let Some(nid) = known.ok().and_then(|r| r.ok().and_then(|v| *v)) else {
            return Bytes::from_static(b":0\r\n");
        };
        let mut req = BytesMut::new();
        encode::array_len(&mut req, 4);
        for a in [
            &b"CLIENT"[..],
            b"UNBLOCK",
            nid.to_string().as_bytes(),
            reason,
        ] {
            encode::bulk(&mut req, a);
        }
        let rx = node.upstream(2, 0).send(req.freeze()).await;
        rx.await
            .unwrap_or_else(|_| crate::proxy::conn::error::lost())
    }))
}

/// How long CLIENT UNBLOCK waits for the node to have named the connection
/// a command just blocked on.
const UNBLOCK_ID_WAIT_MS: u64 = 1000;

/// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP are not answered, as in Redis.
pub(crate) fn reply(s: &mut ClientState, mode: &[u8]) -> Pending {
    if eq_ignore_case(mode, b"on") {
        s.reply = ReplyMode::On;
        let mut out = BytesMut::new();
        encode::simple(&mut out, "OK");
        return Pending::ready(out);
    }
    if eq_ignore_case(mode, b"off") {
        s.reply = ReplyMode::Off;
    } else if eq_ignore_case(mode, b"skip") {
        if s.reply != ReplyMode::Off {
            s.reply = ReplyMode::SkipNext;
        }
    } else {
        return Pending::error("ERR syntax error");
    }
    Pending::Ready(Bytes::new())
}

/// Keeps the entry's name and protocol equal to the session's.
pub(crate) fn publish_identity(s: &ClientState) {
    s.entry.set_name(s.name.clone());
    s.entry.proto.store(s.proto, Relaxed);
}
