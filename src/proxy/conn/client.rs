//! One client's state as its request handlers see it: plain data (identity,
//! protocol, transaction and pub/sub state, budget, CLIENT settings). The
//! session owns it and lends it to each handler; nothing here reaches the
//! socket or the FIFO of owed replies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use tokio::net::TcpStream;

use crate::proxy::commands::clients::entry::{ClientEntry, ReplyMode};
use crate::proxy::commands::pubsub::subscriber::Subscriber;
use crate::proxy::commands::transaction::state::TxState;
use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::conn::error::HUNG_UP_IN_CUTOVER;
use crate::proxy::conn::pending::Pending;
use crate::proxy::ops::metrics::ServedCell;
use crate::proxy::upstream::topology::{self, Gate, Node, Routing};
use crate::proxy::upstream::Upstream;
use crate::proxy::Proxy;

/// What the handlers of one client's requests read and change: the
/// connection's identity and the choices it made (HELLO, CLIENT SETNAME).
/// Handlers get this, never the session, so they cannot reach its socket or
/// its FIFO of owed replies.
pub(crate) struct ClientState {
    pub(crate) id: u64,
    /// Protocol version chosen by HELLO: 2 or 3.
    pub(crate) proto: u8,
    pub(crate) name: Option<Bytes>,
    pub(crate) peer: String,
    /// The proxy address this client connected to (announced by CLUSTER SLOTS).
    pub(crate) local: String,
    /// MULTI / WATCH state and the connection it pins.
    pub(crate) tx: TxState,
    /// Its subscriber connection and the messages it receives.
    pub(crate) pubsub: Subscriber,
    /// The node whose script lane its requests take, if any.
    pub(crate) lane: crate::proxy::conn::lane::Lane,
    /// Blocking commands of this client waiting on a node right now.
    pub(crate) blocked: Arc<AtomicUsize>,
    /// Reply bytes held for this client; replies forwarded with it are
    /// charged on arrival.
    pub(crate) budget: Arc<ReplyBudget>,
    /// The request being dispatched: its command and the nodes routing sent it to.
    pub(crate) served: ServedCell,
    /// What CLIENT LIST and CLIENT KILL see of this client.
    pub(crate) entry: Arc<ClientEntry>,
    /// CLIENT REPLY.
    pub(crate) reply: ReplyMode,
    /// MONITOR was run: once its `+OK` is written the session serves the
    /// monitor loop.
    pub(crate) monitor: bool,
    /// The user this client authenticated as; `None` before it has (with
    /// users configured) or always (without).
    pub(crate) user: Option<Arc<crate::proxy::conn::auth::users::User>>,
    /// Gave the pool's password (`Auth::Twemproxy`).
    pub(crate) authenticated: bool,
}

impl ClientState {
    /// The state of a client just connected on `sock`, registered with the
    /// proxy (CLIENT LIST sees it, a drain wakes it), and its share of the
    /// query buffer total, which unregisters it when dropped.
    pub(crate) fn register(proxy: &Arc<Proxy>, sock: &TcpStream) -> (ClientState, QueryCharge) {
        let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let local = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let fd = std::os::fd::AsRawFd::as_raw_fd(sock) as i64;
        let id = proxy.next_client_id.fetch_add(1, Ordering::Relaxed);
        let budget = ReplyBudget::counted(proxy.config().output_limits, &proxy.reply_total, id);
        let entry = Arc::new(ClientEntry::new(
            id,
            peer.clone(),
            local.clone(),
            fd,
            budget.clone(),
        ));
        proxy
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, entry.clone());
        let query = QueryCharge {
            proxy: proxy.clone(),
            id,
            budget: budget.clone(),
            bytes: 0,
            entry: entry.clone(),
        };
        let state = ClientState {
            id,
            proto: 2,
            name: None,
            peer,
            local,
            tx: Default::default(),
            pubsub: Default::default(),
            lane: Default::default(),
            blocked: entry.blocked.clone(),
            budget,
            served: ServedCell::default(),
            entry,
            reply: Default::default(),
            monitor: false,
            user: None,
            authenticated: false,
        };
        (state, query)
    }

    /// Whether the client has closed its connection (or it was reset) with
    /// no request left unread: a look at the socket that consumes nothing.
    pub(crate) fn hung_up(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: the fd is the session's socket, open for as long as the
        // session (which owns this state) runs; MSG_PEEK reads nothing out
        // and MSG_DONTWAIT never blocks.
        let n = unsafe {
            libc::recv(
                self.entry.fd as libc::c_int,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n == 0
            || (n < 0
                && matches!(
                    std::io::Error::last_os_error().raw_os_error(),
                    Some(libc::ECONNRESET) | Some(libc::ENOTCONN) | Some(libc::EPIPE)
                ))
    }

    /// Enters the epoch gate for a request on `keys` (see
    /// [`topology::enter_for`]); a request that waited out a cutover is
    /// not sent if the client hung up meanwhile, and is answered
    /// [`HUNG_UP_IN_CUTOVER`] instead.
    pub(crate) async fn enter_for<'k, I>(
        &self,
        current: &ArcSwap<Routing>,
        keys: impl Fn() -> I,
    ) -> Result<Gate, Pending>
    where
        I: Iterator<Item = &'k Bytes>,
    {
        topology::enter_for(current, keys, || self.hung_up())
            .await
            .ok_or_else(|| Pending::error(HUNG_UP_IN_CUTOVER))
    }

    /// The connection for a request of this client to `node`: its script
    /// lane while it holds that node's (`conn/lane.rs`), else the node's
    /// shared one.
    pub(crate) fn upstream_to<'a>(&'a self, node: &'a Node) -> &'a Upstream {
        match self.lane.to(node) {
            Some(up) => up,
            None => node.upstream(self.proto, self.id),
        }
    }
}

/// A session's query buffer bytes as counted in the proxy-wide total; the
/// count is given back (and what it was owed leaves the reply total), and
/// the session leaves the proxy's registry, when the session ends, however
/// it ends.
pub(crate) struct QueryCharge {
    pub(crate) proxy: Arc<Proxy>,
    pub(crate) id: u64,
    pub(crate) budget: Arc<ReplyBudget>,
    pub(crate) bytes: usize,
    pub(crate) entry: Arc<ClientEntry>,
}

impl QueryCharge {
    pub(crate) fn resize(&mut self, bytes: usize) {
        self.entry.qbuf.store(bytes, Ordering::Relaxed);
        let q = &self.proxy.query_buffers;
        q.resize(self.id, &self.budget, self.bytes, bytes);
        self.bytes = bytes;
    }
}

impl Drop for QueryCharge {
    fn drop(&mut self) {
        self.resize(0);
        // What it is still owed is dropped with the session.
        self.budget.close();
        let mut sessions = self
            .proxy
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        sessions.remove(&self.id);
    }
}
