//! Blocking pops whose keys live on several nodes (BLPOP, BRPOP, BLMPOP,
//! BZPOPMIN, BZPOPMAX, BZMPOP): no node can block on keys it does not own,
//! so the proxy waits itself and pops with the non-blocking forms.
//!
//! ```text
//!  attempt: keys in the client's order, each run of consecutive keys on
//!           one node -> one LMPOP/ZMPOP there; first non-empty wins
//!     │ nothing
//!     ▼
//!  wait:    a routed write to a key answered (route::wake) ─┐
//!           or POLL_MS passed (writes made elsewhere)       ├─► attempt
//!           or the timeout (nil) or CLIENT UNBLOCK          ┘
//! ```
//!
//! One attempt pops at most one element (or one LMPOP/ZMPOP batch) at one
//! node, so nothing is popped twice; a client that leaves drops this future
//! (its session ends at once while it blocks) and no further pop is sent.
//! Each step routes by the ring current when it is sent, so a topology
//! change while waiting only moves where the next attempt goes. Called by
//! `blocking::handle` only when the keys span several nodes; must never
//! pop more than the reply carries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::catalogue::Id;
use crate::proxy::commands::blocked::BlockedGuard;
use crate::proxy::commands::clients::entry::{ClientEntry, Unblock};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::{sleep_until_some, Pending};
use crate::proxy::upstream::dirty::track_write;
use crate::proxy::upstream::topology;
use crate::proxy::Proxy;
use crate::resp::reply::elements;
use crate::resp::{encode, Request};

/// How often a waiting pop retries without a wake-up: writes this proxy
/// did not route (scripts' own writes, another proxy, a node's client).
pub(crate) const POLL_MS: u64 = 100;

/// The commands served here when their keys span several nodes.
pub(crate) fn is_pop(id: Id) -> bool {
    matches!(
        id,
        Id::Blpop | Id::Brpop | Id::Blmpop | Id::Bzpopmin | Id::Bzpopmax | Id::Bzmpop
    )
}

/// Whether `keys` are owned by more than one node in the current ring.
pub(crate) fn is_cross(proxy: &Proxy, keys: &[Bytes]) -> bool {
    let routing = proxy.routing.load();
    let first = routing.owner(&keys[0]);
    keys.iter().any(|k| !Arc::ptr_eq(routing.owner(k), first))
}

/// How a blocking pop is asked of one node without blocking, and how that
/// answer becomes the blocking command's reply.
struct Form {
    /// LMPOP or ZMPOP.
    name: &'static [u8],
    /// What follows the keys: LEFT|RIGHT|MIN|MAX [COUNT n].
    tail: Vec<Bytes>,
    shape: Shape,
}

#[derive(Clone, Copy)]
enum Shape {
    /// BLMPOP, BZMPOP: the same reply as LMPOP, ZMPOP.
    Same,
    /// BLPOP, BRPOP: [key, value] from [key, [value]].
    KeyValue,
    /// BZPOPMIN, BZPOPMAX: [key, member, score] from [key, [[member, score]]].
    KeyMemberScore,
}

impl Form {
    /// The form of `req` (keys at `keys_at`, `nkeys` of them), and where its
    /// timeout is.
    fn of(id: Id, args: &[Bytes], nkeys: usize) -> (Form, usize) {
        let word = |w: &'static [u8]| vec![Bytes::from_static(w)];
        let last = args.len() - 1;
        match id {
            Id::Blpop | Id::Brpop => {
                let side: &'static [u8] = if id == Id::Blpop { b"LEFT" } else { b"RIGHT" };
                let tail = word(side);
                (Form::new(b"LMPOP", tail, Shape::KeyValue), last)
            }
            Id::Bzpopmin | Id::Bzpopmax => {
                let side: &'static [u8] = if id == Id::Bzpopmin { b"MIN" } else { b"MAX" };
                let tail = word(side);
                (Form::new(b"ZMPOP", tail, Shape::KeyMemberScore), last)
            }
            _ => {
                // B?MPOP timeout numkeys key… side [COUNT n]
                let name: &'static [u8] = if id == Id::Blmpop { b"LMPOP" } else { b"ZMPOP" };
                let tail = args[(3 + nkeys).min(args.len())..].to_vec();
                (Form::new(name, tail, Shape::Same), 1)
            }
        }
    }

    fn new(name: &'static [u8], tail: Vec<Bytes>, shape: Shape) -> Form {
        Form { name, tail, shape }
    }

    /// The non-blocking request for `keys`, all on one node.
    fn request(&self, keys: &[Bytes]) -> Bytes {
        let n = keys.len().to_string();
        let mut parts: Vec<&[u8]> = Vec::with_capacity(2 + keys.len() + self.tail.len());
        parts.push(self.name);
        parts.push(n.as_bytes());
        parts.extend(keys.iter().map(|k| &k[..]));
        parts.extend(self.tail.iter().map(|t| &t[..]));
        let mut raw = BytesMut::new();
        encode::command(&mut raw, &parts);
        raw.freeze()
    }

    /// The blocking command's reply for a node's non-nil answer (errors and
    /// anything unexpected pass as they came).
    fn reply(&self, r: Bytes) -> Bytes {
        let reshaped = match self.shape {
            Shape::Same => None,
            Shape::KeyValue => key_and_first(&r, 1),
            Shape::KeyMemberScore => key_and_first(&r, 2),
        };
        reshaped.unwrap_or(r)
    }
}

/// `[key, [x, …]]` → `[key, x]` (depth 1) or `[key, [[m, s], …]]` →
/// `[key, m, s]` (depth 2).
fn key_and_first(r: &[u8], depth: usize) -> Option<Bytes> {
    let outer = elements(r)?;
    let (key, list) = (outer.first()?.clone(), outer.get(1)?.clone());
    let list = &r[list];
    let first = elements(list)?.first()?.clone();
    let first = &list[first];
    let mut out = BytesMut::new();
    if depth == 1 {
        encode::array_len(&mut out, 2);
        out.extend_from_slice(&r[key]);
        out.extend_from_slice(first);
    } else {
        let pair = elements(first)?;
        encode::array_len(&mut out, 1 + pair.len());
        out.extend_from_slice(&r[key]);
        for p in pair {
            out.extend_from_slice(&first[p]);
        }
    }
    Some(out.freeze())
}

/// A null reply in either protocol: nothing to pop there.
fn is_nil(r: &[u8]) -> bool {
    r == b"*-1\r\n" || r == b"_\r\n"
}

/// The timeout's reply.
fn nil(proto: u8) -> Bytes {
    Bytes::from_static(if proto >= 3 { b"_\r\n" } else { b"*-1\r\n" })
}

/// Serves a blocking pop over keys on several nodes (see the module doc).
pub(crate) async fn handle(
    proxy: &Arc<Proxy>,
    client: &mut ClientState,
    id: Id,
    req: Request,
    keys: Vec<Bytes>,
) -> Pending {
    let (form, timeout_at) = Form::of(id, &req.args, keys.len());
    let ms = match crate::resp::timeout::parse_secs(&req.args[timeout_at]) {
        Ok(ms) => ms,
        Err(e) => return Pending::error(&format!("ERR {}", e.0)),
    };
    let proxy = proxy.clone();
    let (proto, client_id) = (client.proto, client.id);
    let guard = BlockedGuard::new(&proxy, client, ms > 0);
    let entry = client.entry.clone();
    Pending::Later(Box::pin(async move {
        let deadline = (ms > 0).then(|| Instant::now() + Duration::from_millis(ms));
        // Registered before the first attempt: a write answered between
        // that attempt and the wait still leaves a permit.
        let watch = proxy.wake.watch(&keys);
        let mut unblock: Option<Unblocking> = None;
        loop {
            if let Some(r) = attempt(&proxy, proto, client_id, &form, &keys).await {
                return r;
            }
            let on = unblock.get_or_insert_with(|| {
                guard.at_node.arm();
                Unblocking::register(&entry)
            });
            tokio::select! {
                _ = watch.notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(POLL_MS)) => {}
                _ = sleep_until_some(deadline) => return nil(proto),
                why = &mut on.rx => return match why {
                    Ok(Unblock::Error) => Bytes::from_static(
                        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
                    ),
                    _ => nil(proto),
                },
            }
        }
    }))
}

/// One pass over the keys in the client's order: `Some` with the reply once
/// a node popped something (or refused), `None` when all were empty.
async fn attempt(
    proxy: &Proxy,
    proto: u8,
    client_id: u64,
    form: &Form,
    keys: &[Bytes],
) -> Option<Bytes> {
    let mut i = 0;
    while i < keys.len() {
        let rest = &keys[i..];
        let routing = topology::enter(&proxy.routing, || rest.iter()).await;
        let node = routing.owner(&rest[0]).clone();
        let run = 1 + rest[1..]
            .iter()
            .take_while(|k| Arc::ptr_eq(routing.owner(k), &node))
            .count();
        let run_keys = &rest[..run];
        invalidate(proxy, run_keys);
        let mut rx = node
            .upstream(proto, client_id)
            .send(form.request(run_keys))
            .await;
        if let Some(m) = &routing.migration {
            let moving: Vec<Bytes> = run_keys
                .iter()
                .filter(|k| routing.is_moving(k))
                .cloned()
                .collect();
            if !moving.is_empty() {
                rx = track_write(&m.dirty, moving, rx);
            }
        }
        drop(routing);
        let r = rx
            .await
            .unwrap_or_else(|_| crate::proxy::conn::error::lost());
        if !is_nil(&r) {
            // A pop may reach the node after a cached GET was refilled.
            invalidate(proxy, run_keys);
            return Some(form.reply(r));
        }
        i += run;
    }
    None
}

/// Forgets cached GETs of keys a pop may change.
fn invalidate(proxy: &Proxy, keys: &[Bytes]) {
    if let Some(cache) = &proxy.ops.hot_cache {
        for k in keys {
            cache.invalidate(k);
        }
    }
}

/// Tells apart a client's successive waits.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Publishes in the client's entry that it waits here, so CLIENT UNBLOCK
/// can end the wait; withdrawn on drop.
struct Unblocking {
    entry: Arc<ClientEntry>,
    token: u64,
    rx: oneshot::Receiver<Unblock>,
}

impl Unblocking {
    fn register(entry: &Arc<ClientEntry>) -> Unblocking {
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        *lock(&entry.waiting_here) = Some((token, tx));
        Unblocking {
            entry: entry.clone(),
            token,
            rx,
        }
    }
}

impl Drop for Unblocking {
    fn drop(&mut self) {
        let mut w = lock(&self.entry.waiting_here);
        if w.as_ref().is_some_and(|(t, _)| *t == self.token) {
            *w = None;
        }
    }
}

/// A poisoned lock still holds a consistent `Option`.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_answers_become_the_blocking_replies() {
        let (f, at) = Form::of(Id::Blpop, &args(&["BLPOP", "a", "b", "0"]), 2);
        assert_eq!(at, 3);
        let r = f.reply(Bytes::from_static(b"*2\r\n$1\r\na\r\n*1\r\n$1\r\nx\r\n"));
        assert_eq!(&r[..], b"*2\r\n$1\r\na\r\n$1\r\nx\r\n");
        let (f, _) = Form::of(Id::Bzpopmax, &args(&["BZPOPMAX", "a", "b", "0"]), 2);
        let r = f.reply(Bytes::from_static(
            b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n",
        ));
        assert_eq!(&r[..], b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n,1.5\r\n");
        assert_eq!(
            &f.request(&args(&["a", "b"]))[..],
            b"*5\r\n$5\r\nZMPOP\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\nb\r\n$3\r\nMAX\r\n"
        );
        let bz = args(&["BZMPOP", "0", "2", "a", "b", "max", "count", "10"]);
        let (f, at) = Form::of(Id::Bzmpop, &bz, 2);
        assert_eq!(at, 1);
        assert_eq!(
            &f.request(&args(&["b"]))[..],
            b"*6\r\n$5\r\nZMPOP\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\nmax\r\n$5\r\ncount\r\n$2\r\n10\r\n"
        );
        let err = Bytes::from_static(b"-WRONGTYPE x\r\n");
        assert_eq!(f.reply(err.clone()), err);
        assert!(is_nil(b"*-1\r\n") && is_nil(b"_\r\n") && !is_nil(b"*0\r\n"));
    }

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::from(s.to_string())).collect()
    }
}
