//! One client's state as its request handlers see it: plain data (identity,
//! protocol, transaction and pub/sub state, budget, CLIENT settings). The
//! session owns it and lends it to each handler; nothing here reaches the
//! socket or the FIFO of owed replies.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use bytes::Bytes;

use crate::proxy::commands::clients::entry::{ClientEntry, ReplyMode};
use crate::proxy::commands::pubsub::subscriber::Subscriber;
use crate::proxy::commands::transaction::state::TxState;
use crate::proxy::conn::budget::ReplyBudget;
use crate::proxy::ops::metrics::ServedCell;

/// What the handlers of one client's requests read and change: the
/// connection's identity and the choices it made (HELLO, CLIENT SETNAME).
/// Handlers get this, never the session, so they cannot reach its socket or
/// its FIFO of owed replies.
pub struct ClientState {
    pub id: u64,
    /// Protocol version chosen by HELLO: 2 or 3.
    pub proto: u8,
    pub name: Option<Bytes>,
    pub peer: String,
    /// The proxy address this client connected to (announced by CLUSTER SLOTS).
    pub local: String,
    /// MULTI / WATCH state and the connection it pins.
    pub tx: TxState,
    /// Its subscriber connection and the messages it receives.
    pub pubsub: Subscriber,
    /// Blocking commands of this client waiting on a node right now.
    pub blocked: Arc<AtomicUsize>,
    /// Reply bytes held for this client; replies forwarded with it are
    /// charged on arrival.
    pub budget: Arc<ReplyBudget>,
    /// The request being dispatched: its command and the nodes routing sent it to.
    pub served: ServedCell,
    /// What CLIENT LIST and CLIENT KILL see of this client.
    pub entry: Arc<ClientEntry>,
    /// CLIENT REPLY.
    pub reply: ReplyMode,
    /// MONITOR was run: once its `+OK` is written the session serves the
    /// monitor loop.
    pub monitor: bool,
}
