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

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::conn::session::{ClientState, Pending};
use crate::proxy::ops::metrics::Served;
use crate::proxy::Proxy;
use crate::resp::command::TABLE;
use crate::resp::{encode, eq_ignore_case, parse_i64};

/// What the other clients (CLIENT LIST, KILL) and the drain see of one
/// client. Written by its session only, read by anyone.
pub struct ClientEntry {
    pub id: u64,
    pub peer: String,
    pub local: String,
    /// The socket's descriptor, as CLIENT LIST shows it.
    pub fd: i64,
    pub budget: Arc<ReplyBudget>,
    /// Blocking commands waiting on a node (shared with the session's state).
    pub blocked: Arc<AtomicUsize>,
    connected: Instant,
    /// A std mutex: written on SETNAME / HELLO SETNAME / RESET only.
    name: Mutex<Option<Bytes>>,
    /// Milliseconds after `connected` of the last request.
    last_ms: AtomicU64,
    /// The last command's index in the table; `u32::MAX`: none yet.
    cmd: AtomicU32,
    /// Commands queued by MULTI; -1 outside a transaction.
    multi: AtomicI64,
    /// Bytes in its query buffer.
    pub qbuf: AtomicUsize,
    proto: AtomicU8,
    monitor: AtomicBool,
    killed: AtomicBool,
    /// Channels, patterns and shard channels subscribed (set by whatever
    /// serves SUBSCRIBE for the client); any makes the client type `pubsub`.
    pub subscriptions: [AtomicUsize; 3],
}

impl ClientEntry {
    pub fn new(id: u64, peer: String, local: String, fd: i64, budget: Arc<ReplyBudget>) -> Self {
        ClientEntry {
            id,
            peer,
            local,
            fd,
            budget,
            blocked: Default::default(),
            connected: Instant::now(),
            name: Mutex::new(None),
            last_ms: AtomicU64::new(0),
            cmd: AtomicU32::new(u32::MAX),
            multi: AtomicI64::new(-1),
            qbuf: AtomicUsize::new(0),
            proto: AtomicU8::new(2),
            monitor: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            subscriptions: Default::default(),
        }
    }

    /// True once CLIENT KILL chose this client: its session ends at once.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Relaxed)
    }

    pub fn set_name(&self, name: Option<Bytes>) {
        *self.name.lock().unwrap_or_else(|e| e.into_inner()) = name;
    }

    pub fn set_monitor(&self, on: bool) {
        self.monitor.store(on, Relaxed);
    }

    fn is_pubsub(&self) -> bool {
        self.subscriptions.iter().any(|n| n.load(Relaxed) > 0)
    }

    /// Its type for the TYPE filters: a monitor counts as `normal`, as in Redis.
    fn is_type(&self, t: &[u8]) -> bool {
        if eq_ignore_case(t, b"pubsub") {
            self.is_pubsub()
        } else if eq_ignore_case(t, b"normal") {
            !self.is_pubsub()
        } else {
            false // master, replica, slave: the proxy has none
        }
    }

    fn age_secs(&self) -> u64 {
        self.connected.elapsed().as_secs()
    }

    /// Its CLIENT LIST line, in redis-server 7.0's field order. `cmd`
    /// overrides the last command (the client listing itself is running
    /// `client|list` right now).
    fn line(&self, cmd: Option<&str>) -> String {
        let name = self.name.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let name = name.as_deref().map(String::from_utf8_lossy);
        let age = self.connected.elapsed();
        let idle = age.as_millis() as u64 - self.last_ms.load(Relaxed).min(age.as_millis() as u64);
        let mut flags = String::new();
        if self.monitor.load(Relaxed) {
            flags.push('O');
        }
        if self.is_pubsub() {
            flags.push('P');
        }
        let multi = self.multi.load(Relaxed);
        if multi >= 0 {
            flags.push('x');
        }
        if self.blocked.load(Relaxed) > 0 {
            flags.push('b');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let last = self.cmd.load(Relaxed) as usize;
        let cmd = cmd.unwrap_or(TABLE.get(last).map_or("NULL", |s| s.name));
        let [sub, psub, ssub] = &self.subscriptions;
        let qbuf = self.qbuf.load(Relaxed);
        let omem = self.budget.owed();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db=0 \
             sub={} psub={} ssub={} multi={multi} qbuf={qbuf} qbuf-free=0 argv-mem=0 \
             multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={omem} tot-mem={} events=r{} \
             cmd={cmd} user=default redir=-1 resp={}\n",
            self.id,
            self.peer,
            self.local,
            self.fd,
            name.unwrap_or_default(),
            age.as_secs(),
            idle / 1000,
            sub.load(Relaxed),
            psub.load(Relaxed),
            ssub.load(Relaxed),
            qbuf + omem,
            if omem > 0 { "w" } else { "" },
            self.proto.load(Relaxed),
        )
    }
}

/// How this client's replies are sent (CLIENT REPLY).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    #[default]
    On,
    /// No reply at all until CLIENT REPLY ON.
    Off,
    /// CLIENT REPLY SKIP was just run: the next command's reply is dropped.
    SkipNext,
    /// This command's reply is dropped.
    Skip,
}

/// Called by the session after each request was dispatched: publishes what
/// CLIENT LIST shows, feeds the monitors, and drops the reply when CLIENT
/// REPLY says so (the request still runs; its reply is read and discarded,
/// in order, so nothing behind it waits and no pinned connection is left
/// mid-reply).
#[inline]
pub fn after_request(
    proxy: &Arc<Proxy>,
    s: &mut ClientState,
    p: Pending,
    raw: &Bytes,
    served: Served,
    at: Instant,
) -> Pending {
    let e = &s.entry;
    e.last_ms.store(
        at.saturating_duration_since(e.connected).as_millis() as u64,
        Relaxed,
    );
    e.cmd.store(served.command as u32, Relaxed);
    e.multi
        .store(s.tx.queued().map_or(-1, |n| n as i64), Relaxed);
    proxy.monitors.feed(proxy, raw, served, s);
    let silent = match s.reply {
        ReplyMode::On => false,
        ReplyMode::Off => true,
        ReplyMode::SkipNext => {
            s.reply = ReplyMode::Skip;
            false
        }
        ReplyMode::Skip => {
            s.reply = ReplyMode::On;
            true
        }
    };
    if silent {
        silence(p, &s.budget)
    } else {
        p
    }
}

/// The same request, its reply awaited and thrown away.
fn silence(p: Pending, budget: &Arc<ReplyBudget>) -> Pending {
    match p {
        Pending::Ready(_) => Pending::Ready(Bytes::new()),
        Pending::One(rx) => Pending::Later(Box::pin(async move {
            let _ = rx.await;
            Bytes::new()
        })),
        Pending::Charged(rx) => {
            let budget = budget.clone();
            Pending::Later(Box::pin(async move {
                // Charged on arrival; never written, so given back here.
                if let Ok(b) = rx.await {
                    budget.release(b.len());
                }
                Bytes::new()
            }))
        }
        // Messages are charged on arrival (and never come from dispatch).
        Pending::Pushed(b) => {
            budget.release(b.len());
            Pending::Ready(Bytes::new())
        }
        Pending::Later(f) => Pending::Later(Box::pin(async move {
            let _ = f.await;
            Bytes::new()
        })),
        Pending::Close(_) => Pending::Close(Bytes::new()),
    }
}

/// CLIENT LIST [TYPE t | ID id…], CLIENT INFO.
pub fn list(proxy: &Proxy, s: &ClientState, args: &[Bytes]) -> Pending {
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
pub fn kill(proxy: &Proxy, s: &ClientState, args: &[Bytes]) -> Pending {
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

/// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP are not answered, as in Redis.
pub fn reply(s: &mut ClientState, mode: &[u8]) -> Pending {
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
pub fn publish_identity(s: &ClientState) {
    s.entry.set_name(s.name.clone());
    s.entry.proto.store(s.proto, Relaxed);
}
