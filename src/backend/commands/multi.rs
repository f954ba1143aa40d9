//! MULTI / EXEC / DISCARD / WATCH / UNWATCH, as Redis 7.0 answers them.
//!
//! ```text
//!  MULTI ──► +OK, the client queues from now on
//!  cmd   ──► unknown / wrong arity / OOM / too large ──► its error, the transaction is flagged
//!        └─► +QUEUED (a copy of its arguments is kept, bounded in bytes)
//!  EXEC  ──► take the node's gate exclusively ──► flagged? -EXECABORT
//!            watched key touched or expired? nil ──► else run every queued command, one array
//! ```
//!
//! Atomicity: every other command holds the node's gate shared while it
//! runs (see `Node::gate`), so while EXEC holds it exclusively no other
//! client's command, expiry sweep or MIGRATE step interleaves with the
//! queued commands. Called by the dispatcher in `mod.rs`; WATCH's records
//! live in `backend::keyspace::watch`. Never awaits while holding the gate.

use std::fmt;
use std::sync::atomic::Ordering::Relaxed;

use bytes::BytesMut;
use smallvec::SmallVec;

use super::{CmdResult, Command, Ctx, Run, DENYOOM};
use crate::backend::error::CmdError;
use crate::backend::keyspace::watch::ClientWatch;
use crate::backend::node::Node;
use crate::resp::encode;

/// Bytes of queued commands one transaction may hold (arguments plus
/// [`QUEUED_OVERHEAD`] per command and 4 per argument). Above what the
/// proxy lets a client queue (64 MiB of requests, 100 000 commands), so a
/// transaction the proxy accepts always fits.
pub(crate) const MAX_QUEUED_BYTES: usize = 128 * 1024 * 1024;
/// What one queued command costs beyond its arguments.
const QUEUED_OVERHEAD: usize = 64;

const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// A client's transaction state.
#[derive(Debug, Default)]
pub(crate) struct TxState {
    /// Between MULTI and EXEC/DISCARD.
    multi: Option<Multi>,
    /// The keys WATCH registered.
    pub(crate) watch: ClientWatch,
}

impl TxState {
    /// Whether the client is between MULTI and EXEC/DISCARD.
    pub(crate) fn is_queueing(&self) -> bool {
        self.multi.is_some()
    }

    /// Flags the open transaction (a command was refused): EXEC will answer
    /// `-EXECABORT`. The queue is freed, since it will never run.
    pub(crate) fn flag(&mut self) {
        if let Some(m) = &mut self.multi {
            m.aborted = true;
            m.queued = Vec::new();
            m.bytes = 0;
        }
    }

    /// Discards the transaction and every watch (DISCARD, RESET, a
    /// malformed EXEC, disconnect).
    pub(crate) fn clear(&mut self, node: &Node) {
        self.multi = None;
        self.watch.unwatch_all(&node.store);
    }
}

/// A transaction being queued.
#[derive(Default)]
struct Multi {
    queued: Vec<Queued>,
    bytes: usize,
    /// A queue-time error: EXEC answers `-EXECABORT`.
    aborted: bool,
    /// Some queued command may grow memory: EXEC makes room first.
    denyoom: bool,
}

impl fmt::Debug for Multi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Multi")
            .field("queued", &self.queued.len())
            .field("bytes", &self.bytes)
            .field("aborted", &self.aborted)
            .finish()
    }
}

/// One queued command: its arguments back to back, and where each ends.
struct Queued {
    cmd: &'static Command,
    data: Vec<u8>,
    ends: SmallVec<[u32; 4]>,
}

impl Queued {
    fn args(&self) -> SmallVec<[&[u8]; 8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let a = &self.data[start..end as usize];
                start = end as usize;
                a
            })
            .collect()
    }
}

/// Commands that run at once inside MULTI instead of being queued (Redis's
/// list in `processCommand`).
pub(crate) fn runs_immediately(cmd: &Command) -> bool {
    matches!(cmd.run, Run::Exec)
        || ["discard", "multi", "watch", "quit", "reset"].contains(&cmd.name)
}

/// Queues a well-formed command sent inside MULTI: `+QUEUED`, or the error
/// that flags the transaction.
pub(crate) fn queue(
    node: &Node,
    client: &mut super::Client,
    out: &mut BytesMut,
    cmd: &'static Command,
    args: &[&[u8]],
    now: u64,
) {
    let tx = &mut client.tx;
    if matches!(cmd.run, Run::Migrate) {
        tx.flag();
        CmdError::err("MIGRATE cannot be queued in a transaction on the built-in node").write(out);
        return;
    }
    // Redis refuses to queue anything while over maxmemory.
    if node.make_room(now).is_err() {
        tx.flag();
        CmdError::OutOfMemory.write(out);
        return;
    }
    let m = tx.multi.as_mut().expect("queueing");
    if !m.aborted {
        let data_len: usize = args.iter().map(|a| a.len()).sum();
        let cost = data_len + 4 * args.len() + QUEUED_OVERHEAD;
        if m.bytes + cost > MAX_QUEUED_BYTES {
            tx.flag();
            CmdError::err(format!(
                "transaction too large: queued commands may hold at most {MAX_QUEUED_BYTES} bytes; it will be discarded at EXEC"
            ))
            .write(out);
            return;
        }
        let mut data = Vec::with_capacity(data_len);
        let mut ends = SmallVec::with_capacity(args.len());
        for a in args {
            data.extend_from_slice(a);
            ends.push(data.len() as u32);
        }
        m.bytes += cost;
        m.denyoom |= cmd.flags & DENYOOM != 0;
        m.queued.push(Queued { cmd, data, ends });
    }
    out.extend_from_slice(b"+QUEUED\r\n");
}

/// MULTI
pub(crate) fn multi(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    if ctx.client.tx.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.client.tx.multi = Some(Multi::default());
    ctx.ok();
    Ok(())
}

/// DISCARD
pub(crate) fn discard(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    if ctx.client.tx.multi.is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.client.tx.clear(ctx.node);
    ctx.ok();
    Ok(())
}

/// WATCH key [key ...]
pub(crate) fn watch(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if ctx.client.tx.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    for key in &args[1..] {
        ctx.client.tx.watch.watch(&ctx.node.store, key, ctx.now)?;
    }
    ctx.ok();
    Ok(())
}

/// UNWATCH
pub(crate) fn unwatch(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.client.tx.watch.unwatch_all(&ctx.node.store);
    ctx.ok();
    Ok(())
}

/// EXEC with its arity already checked: runs the transaction under the
/// node's gate held exclusively.
pub(crate) fn exec(node: &Node, client: &mut super::Client, out: &mut BytesMut, now: u64) {
    let Some(multi) = client.tx.multi.take() else {
        CmdError::err("EXEC without MULTI").write(out);
        return;
    };
    let fault = fault();
    // The fault switch for tests: the gate held shared, so a transaction
    // can interleave with other clients on a multi-threaded node.
    let (_exclusive, _shared) = match fault {
        Fault::NoGate => (None, Some(node.shared())),
        _ => (Some(node.exclusive()), None),
    };
    if multi.denyoom && node.make_room(now).is_err() {
        client.tx.watch.unwatch_all(&node.store);
        abort_exec(out, &CmdError::OutOfMemory);
        return;
    }
    let dirty = client.tx.watch.is_dirty(&node.store, now) && fault != Fault::IgnoreWatch;
    // Redis unwatches before running: the transaction's own writes must
    // not count against it.
    client.tx.watch.unwatch_all(&node.store);
    if multi.aborted {
        CmdError::Other(EXECABORT.into()).write(out);
        return;
    }
    if dirty {
        encode::null_array(out, client.proto);
        return;
    }
    encode::array_len(out, multi.queued.len());
    // Nothing blocks inside a transaction: a blocking pop that finds
    // nothing answers like a timeout at once (Redis's DENY_BLOCKING).
    let never_block = std::mem::replace(&mut client.never_block, true);
    for q in &multi.queued {
        node.stats.total_commands.fetch_add(1, Relaxed);
        let next = super::run(node, client, out, q.cmd, &q.args(), now);
        debug_assert!(matches!(next, super::Next::Done), "blocked inside EXEC");
    }
    client.never_block = never_block;
}

/// Fault injection for tests and `shardis check`'s self-test:
/// `SHARDIS_FAULT_TX=no-gate` runs EXEC without excluding other clients,
/// `ignore-watch` runs it even when a watched key changed. Read once.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    NoGate,
    IgnoreWatch,
}

fn fault() -> Fault {
    static FAULT: std::sync::OnceLock<Fault> = std::sync::OnceLock::new();
    *FAULT.get_or_init(|| match std::env::var("SHARDIS_FAULT_TX").as_deref() {
        Ok("no-gate") => Fault::NoGate,
        Ok("ignore-watch") => Fault::IgnoreWatch,
        _ => Fault::None,
    })
}

/// Writes `-EXECABORT Transaction discarded because of: <why>` (a refused
/// EXEC discards the transaction).
pub(crate) fn abort_exec(out: &mut BytesMut, why: &CmdError) {
    let why = why.to_string();
    let why = why.strip_prefix("ERR ").unwrap_or(&why);
    CmdError::Other(format!("EXECABORT Transaction discarded because of: {why}")).write(out);
}
