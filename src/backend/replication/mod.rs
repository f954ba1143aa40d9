//! Replication between built-in nodes: a primary feeds every write to a
//! stream with byte offsets; a replica (`REPLICAOF host port`) takes a
//! snapshot of the primary once (a full sync), then applies the stream,
//! and after a short disconnect continues from its offset (a partial
//! resync) while the primary's backlog still holds it.
//!
//! ```text
//!  primary                                          replica
//!  command ─► effects ─► Feed (backlog, offsets)    link task (replica.rs)
//!                          │ read positions         PING, REPLCONF, PSYNC id off
//!                          ▼                          ▲
//!             sender (primary.rs) ── +FULLRESYNC id off, snapshot, stream ─►
//!                                 ◄─ REPLCONF ACK off ─── apply (apply.rs)
//! ```
//!
//! - `feed.rs` the backlog, the ids (PSYNC2's `replid`/`replid2`) and the
//!   replicas' read positions with their output limits;
//! - `effects.rs` what a write puts in the stream: the command itself when
//!   it is deterministic, its absolute effect otherwise (expiry as
//!   PEXPIREAT, random or time-dependent results as the keys' new state);
//! - `primary.rs` a replica's connection on the primary: PSYNC, the
//!   snapshot (taken shard by shard, `keyspace/replicated.rs`), the stream,
//!   the acknowledgements;
//! - `replica.rs` the replica's link to its primary, with retries;
//! - `apply.rs` running the primary's stream on the replica;
//! - `state.rs` what a node holds: the feed, the link, the counters;
//! - `commands.rs` REPLICAOF, ROLE, REPLCONF, PSYNC, WAIT, INFO replication.
//!
//! Called by the dispatcher (after each write, around EXEC and scripts),
//! by the server loop (a connection that sent PSYNC becomes a replica's
//! sender) and by the expiry tick. Never touches the proxy.

mod apply;
pub(crate) mod commands;
pub(crate) mod effects;
pub(crate) mod feed;
mod primary;
mod replica;
pub(crate) mod state;

use self::feed::Feed;
use crate::backend::node::Node;
use std::sync::atomic::Ordering::Relaxed;

pub(crate) use primary::serve as serve_replica;
pub(crate) use replica::{run_links, start as start_link};
pub(crate) use state::{Link, LinkState};

/// Whether writes on `node` go to a stream now (it is a primary whose
/// backlog exists).
pub(crate) fn is_feeding(node: &Node) -> bool {
    node.store.hooks.feeding.load(Relaxed)
}

/// `-NOREPLICAS`: `min-replicas-to-write` is set and fewer replicas
/// than that have acknowledged within `min-replicas-max-lag` seconds, so
/// a write is refused (as Redis refuses it, a replica's own stream aside).
pub(crate) fn lacks_replicas(node: &Node) -> bool {
    let [want, lag] = &node.settings.min_replicas;
    let want = want.load(Relaxed);
    if want == 0 || node.repl.is_replica() {
        return false;
    }
    let lag = std::time::Duration::from_secs(lag.load(Relaxed));
    let good = node
        .repl
        .feed()
        .readers
        .iter()
        .filter(|r| !r.kicked && r.state == "online" && r.last_ack.elapsed() <= lag)
        .count();
    (good as u64) < want
}

/// Puts `args` in the stream, after the removals the keyspace made on its
/// own since the last append (so a DEL of an expired key precedes the
/// command that found it gone).
pub(crate) fn emit(node: &Node, args: &[&[u8]]) {
    let mut bytes = Vec::new();
    crate::backend::keyspace::replicated::request(&mut bytes, args);
    node.repl.with_feed(|f| {
        push_removed(node, f);
        f.append(&bytes);
    });
}

/// Sends the DELs of keys the keyspace removed on its own (the expiry
/// tick calls this; every append does it first).
pub(crate) fn flush_removed(node: &Node) {
    if is_feeding(node) {
        node.repl.with_feed(|f| push_removed(node, f));
    }
}

fn push_removed(node: &Node, f: &mut Feed) {
    for key in node.store.hooks.take_removed() {
        let mut bytes = Vec::new();
        crate::backend::keyspace::replicated::request(&mut bytes, &[b"DEL", &key]);
        f.append(&bytes);
    }
}

/// Starts recording a transaction (EXEC, a script) when feeding.
pub(crate) fn begin_tx(node: &Node) {
    if is_feeding(node) {
        node.repl.with_feed(|f| {
            push_removed(node, f);
            f.begin_tx()
        });
    }
}

/// Ends it: its writes go out as one MULTI … EXEC.
pub(crate) fn end_tx(node: &Node) {
    if is_feeding(node) {
        node.repl.with_feed(|f| f.end_tx());
    }
}

/// Creates the backlog (the first replica attached): from now on writes
/// are fed. The caller holds the node's gate exclusively.
pub(crate) fn activate(node: &Node) {
    node.repl.with_feed(|f| f.active = true);
    node.store.hooks.feeding.store(true, Relaxed);
}
