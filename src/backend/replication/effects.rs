//! What a write puts in the replication stream, so that a replica applying
//! the stream ends identical to its primary whatever its clock and its
//! random numbers:
//!
//! - a deterministic command (SET k v, LPUSH, ZADD, DEL, FLUSHALL …) goes
//!   as it came;
//! - a relative expiry becomes absolute: EXPIRE, PEXPIRE, EXPIREAT,
//!   PEXPIREAT, GETEX and PERSIST send `PEXPIREAT key ms` (or `PERSIST`, or
//!   `DEL` when the key is gone);
//! - a command whose result depends on the time or on chance (SET … EX,
//!   SETEX, RESTORE with a TTL, SPOP, XADD, XREADGROUP, XCLAIM, field TTLs
//!   …) sends the new state of its keys: `RESTORE key at payload REPLACE
//!   ABSTTL`, or `DEL`;
//! - blocking pops send the pop they made (`LPOP`, `LMOVE`, `ZPOPMIN` …,
//!   see [`served`]); scripts and EXEC send the commands they ran, wrapped
//!   in MULTI/EXEC (the dispatcher brackets them);
//! - keys the keyspace removes itself (expiry, eviction) send `DEL`.
//!
//! Called by `commands::run` after every handler. Pure decisions plus
//! reads of the keyspace; never blocks.

use crate::backend::blocking::Op;
use crate::backend::commands::Command;
use crate::backend::keyspace::replicated::restore_request;
use crate::backend::node::Node;
use crate::catalogue::Id::{self, *};
use crate::resp::eq_ignore_case;
use bytes::Bytes;

/// How one command reaches the stream.
enum Rule {
    /// Not at all (reads, scripts and EXEC, whose commands go instead).
    None,
    /// As it came.
    Verbatim,
    /// Its key's expiry, as an absolute time.
    Ttl,
    /// The new state of its keys.
    State,
}

fn rule(id: Id, args: &[&[u8]]) -> Rule {
    match id {
        Eval | Evalsha | Fcall | Script | Migrate => Rule::None,
        Blpop | Brpop | Brpoplpush | Blmove | Blmpop | Bzpopmin | Bzpopmax | Bzmpop => Rule::None,
        Expire | Pexpire | Expireat | Pexpireat | Persist => Rule::Ttl,
        Getex if args.len() > 2 => Rule::Ttl,
        Getex => Rule::None,
        Set if args.len() > 3 => Rule::State,
        Setex | Psetex | Restore | Spop | Xadd | Xreadgroup | Xclaim | Xautoclaim | Xgroup
        | Hexpire | Hpexpire | Hexpireat | Hpexpireat | Hpersist | Incrbyfloat | Hincrbyfloat => {
            Rule::State
        }
        Function => match args.get(1) {
            Some(sub)
                if [&b"load"[..], b"delete", b"flush", b"restore"]
                    .iter()
                    .any(|s| eq_ignore_case(sub, s)) =>
            {
                Rule::Verbatim
            }
            _ => Rule::None,
        },
        _ => Rule::Verbatim,
    }
}

/// Whether a command may change the keyspace or the libraries, so that
/// it has to reach the stream (and is refused on a read-only replica).
pub(crate) fn is_write(cmd: &Command, args: &[&[u8]]) -> bool {
    if cmd.id == Function {
        return matches!(rule(cmd.id, args), Rule::Verbatim);
    }
    cmd.flags & crate::catalogue::WRITE != 0
}

/// Puts the effect of `cmd` (which just ran) in the stream.
pub(crate) fn after_command(node: &Node, cmd: &Command, args: &[&[u8]], now: u64) {
    if !is_write(cmd, args) {
        return;
    }
    match rule(cmd.id, args) {
        Rule::None => {}
        Rule::Verbatim => super::emit(node, args),
        Rule::Ttl => ttl(node, args[1], now),
        Rule::State => {
            let owned: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
            for i in cmd.key_positions(&owned).unwrap_or_default() {
                state(node, args[i], now);
            }
        }
    }
}

/// `PEXPIREAT key at`, `PERSIST key` or `DEL key`: the key's expiry now.
fn ttl(node: &Node, key: &[u8], now: u64) {
    let h = node.store.hash(key);
    let at = node.store.lock(h, now).peek(h, key).map(|e| e.expire_at);
    match at {
        None => super::emit(node, &[b"DEL", key]),
        Some(0) => super::emit(node, &[b"PERSIST", key]),
        Some(at) => super::emit(node, &[b"PEXPIREAT", key, at.to_string().as_bytes()]),
    }
}

/// `RESTORE key at payload REPLACE ABSTTL` or `DEL key`: the key's state now.
pub(crate) fn state(node: &Node, key: &[u8], now: u64) {
    let h = node.store.hash(key);
    let mut bytes = Vec::new();
    if let Some(e) = node.store.lock(h, now).peek(h, key) {
        restore_request(&mut bytes, e);
    }
    if bytes.is_empty() {
        super::emit(node, &[b"DEL", key]);
    } else {
        node.repl.with_feed(|f| {
            super::push_removed(node, f);
            f.append(&bytes);
        });
    }
}

/// Puts in the stream what a blocking command took from `key` when it was
/// served (at once or later): the plain pop that does the same.
pub(crate) fn served(node: &Node, op: &Op, key: &[u8], now: u64) {
    if !super::is_feeding(node) {
        return;
    }
    let side = |head: bool| -> &'static [u8] {
        if head {
            b"LEFT"
        } else {
            b"RIGHT"
        }
    };
    match op {
        Op::Pop { head } => {
            let name: &[u8] = if *head { b"LPOP" } else { b"RPOP" };
            super::emit(node, &[name, key]);
        }
        Op::MPop { head, count } => {
            let name: &[u8] = if *head { b"LPOP" } else { b"RPOP" };
            super::emit(node, &[name, key, count.to_string().as_bytes()]);
        }
        Op::Move {
            dst,
            from_head,
            to_head,
        } => super::emit(
            node,
            &[b"LMOVE", key, dst, side(*from_head), side(*to_head)],
        ),
        Op::ZPop { max } => {
            let name: &[u8] = if *max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            super::emit(node, &[name, key]);
        }
        Op::ZMPop { max, count } => {
            let name: &[u8] = if *max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            super::emit(node, &[name, key, count.to_string().as_bytes()]);
        }
        // XREAD changes nothing; XREADGROUP's deliveries change the group.
        Op::XRead(_) => state(node, key, now),
    }
}
