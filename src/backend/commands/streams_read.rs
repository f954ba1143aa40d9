//! XREAD and XREADGROUP, with and without BLOCK: Redis 7.0's argument
//! parsing and errors, synchronous serving, history reads from a
//! consumer's PEL, and the wake-up path a blocked reader is served by
//! when XADD (or XGROUP DESTROY) makes its stream ready (see
//! `backend/blocking.rs`).

use super::streams::{bulk_id, parse_strict_id, write_entry};
use super::timeout::parse_ms;
use super::{parse_i64, Ctx};
use crate::backend::blocking::{Attempt, Block, Op};
use crate::backend::error::CmdError;

/// A blocking handler's result (`blocking::BlockResult`).
type BlockResult = Result<Option<Block>, CmdError>;
use crate::backend::node::Node;
use crate::backend::value::stream::{Stream, StreamId, XReadOp};
use crate::backend::value::Elem;
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;

/// A reply element: `[key, entries]` (RESP2) or `key => entries` (RESP3).
fn key_header(out: &mut BytesMut, key: &[u8], proto: u8) {
    if proto == 2 {
        encode::array_len(out, 2);
    }
    encode::bulk(out, key);
}

/// Delivers up to `count` entries after `gt` to a group's consumer (or
/// just reads them), writing them; Redis's `streamReplyWithRange`.
fn deliver(
    s: &mut Stream,
    gt: StreamId,
    count: usize,
    group: Option<(&[u8], &[u8], bool)>,
    now: u64,
    out: &mut BytesMut,
) {
    let Some(start) = gt.incr() else {
        encode::array_len(out, 0);
        return;
    };
    let n = if count == 0 { usize::MAX } else { count };
    let entries: Vec<(StreamId, Vec<Elem>)> =
        s.range(start, StreamId::MAX, false).take(n).collect();
    encode::array_len(out, entries.len());
    for (id, f) in &entries {
        write_entry(out, *id, f);
    }
    let Some((gname, cname, noack)) = group else {
        return;
    };
    let estimates: Vec<Option<u64>> = entries.iter().map(|e| s.estimate_read(e.0)).collect();
    let has_added = s.entries_added > 0;
    let tombs: Vec<bool> = entries.iter().map(|e| s.has_tombstones_from(e.0)).collect();
    let Some(g) = s.groups.get_mut(gname) else {
        return;
    };
    g.consumer(cname, now).0.seen_time = now;
    for (i, (id, _)) in entries.iter().enumerate() {
        if *id > g.last_id {
            match g.entries_read {
                Some(r) if !tombs[i] => g.entries_read = Some(r + 1),
                _ if has_added => g.entries_read = estimates[i],
                _ => {}
            }
            g.last_id = *id;
        }
        if !noack {
            if let Some(p) = g.pel.get_mut(id) {
                p.delivery_count = 0;
            }
            g.deliver(*id, cname, now, true);
        }
    }
}

/// History from a consumer's PEL after `gt` (`…FromConsumerPEL`):
/// deleted entries come as `[id, nil]`.
fn history(
    s: &mut Stream,
    (gname, cname): (&[u8], &[u8]),
    gt: StreamId,
    count: usize,
    now: u64,
    proto: u8,
    out: &mut BytesMut,
) {
    let Some(start) = gt.incr() else {
        encode::array_len(out, 0);
        return;
    };
    let n = if count == 0 { usize::MAX } else { count };
    let ids: Vec<StreamId> = match s.groups.get_mut(gname) {
        Some(g) => {
            let c = g.consumer(cname, now).0;
            c.seen_time = now;
            c.pel.range(start..).take(n).copied().collect()
        }
        None => Vec::new(),
    };
    encode::array_len(out, ids.len());
    let mut found = Vec::new();
    for id in ids {
        match s.get(id) {
            Some(f) => {
                write_entry(out, id, &f);
                found.push(id);
            }
            None => {
                encode::array_len(out, 2);
                bulk_id(out, id);
                encode::null_array(out, proto);
            }
        }
    }
    if let Some(g) = s.groups.get_mut(gname) {
        for id in found {
            if let Some(p) = g.pel.get_mut(&id) {
                p.delivery_time = now;
                p.delivery_count += 1;
            }
        }
    }
}

fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::Other(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
pub(crate) fn xread(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    read(ctx, args, false)
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key [key ...] id [id ...]
pub(crate) fn xreadgroup(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    read(ctx, args, true)
}

fn read(ctx: &mut Ctx, args: &[&[u8]], xgroup: bool) -> BlockResult {
    let (mut timeout, mut count, mut noack) = (None, 0usize, false);
    let mut group: Option<(&[u8], &[u8])> = None;
    let mut streams = 0;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args[i];
        if eq_ignore_case(o, b"block") && more > 0 {
            timeout = Some(parse_ms(args[i + 1])?);
            i += 1;
        } else if eq_ignore_case(o, b"count") && more > 0 {
            count = parse_i64(args[i + 1])?.max(0) as usize;
            i += 1;
        } else if eq_ignore_case(o, b"streams") && more > 0 {
            streams = i + 1;
            if !(args.len() - streams).is_multiple_of(2) {
                let (name, sym) = if xgroup {
                    ("xreadgroup", '>')
                } else {
                    ("xread", '$')
                };
                return Err(CmdError::err(format!("Unbalanced '{name}' list of streams: for each stream key an ID or '{sym}' must be specified.")));
            }
            break;
        } else if eq_ignore_case(o, b"group") && more >= 2 {
            if !xgroup {
                return Err(CmdError::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((args[i + 1], args[i + 2]));
            i += 2;
        } else if eq_ignore_case(o, b"noack") {
            if !xgroup {
                return Err(CmdError::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if streams == 0 {
        return Err(CmdError::Syntax);
    }
    if xgroup && group.is_none() {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }
    let n = (args.len() - streams) / 2;
    let keys = &args[streams..streams + n];
    let (node, now, proto) = (ctx.node, ctx.now, ctx.client.proto);
    let mut ids = Vec::with_capacity(n);
    for (k, raw) in keys.iter().zip(&args[streams + n..]) {
        let h = node.store.hash(k);
        let mut sh = node.store.lock(h, now);
        let s = sh.read_coll::<Stream>(h, k)?;
        if let Some((g, _)) = group {
            if s.is_none_or(|s| !s.groups.contains_key(g)) {
                return Err(nogroup(k, g));
            }
        }
        let id = match *raw {
            b"$" if xgroup => return Err(CmdError::err("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")),
            b"$" => s.map_or(StreamId::MIN, |s| s.last_id),
            b">" if !xgroup => return Err(CmdError::err("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")),
            b">" => StreamId::MAX,
            other => parse_strict_id(other, 0)?,
        };
        ids.push(((*k).into(), id));
    }
    let op = XReadOp {
        ids,
        count,
        group: group.map(|(g, c)| (g.into(), c.into(), noack)),
    };
    let mut body = BytesMut::new();
    let mut served = 0;
    for (key, gt) in &op.ids {
        if serve_key(node, &op, key, *gt, now, proto, true, &mut body)? {
            served += 1;
        }
    }
    if served > 0 {
        if proto == 2 {
            encode::array_len(ctx.out, served);
        } else {
            encode::map_len(ctx.out, served, proto);
        }
        ctx.out.extend_from_slice(&body);
        return Ok(None);
    }
    let Some(ms) = timeout else {
        encode::null_array(ctx.out, proto);
        return Ok(None);
    };
    let may_block = !ctx.client.never_block;
    let key_refs: Vec<&[u8]> = keys.to_vec();
    let mut op = op;
    if op.count == 0 {
        op.count = 1000;
    }
    let attempt = node.blocking.serve_or_wait(
        &node.store.ready,
        ctx.client.id,
        proto,
        &key_refs,
        Op::XRead(Box::new(op)),
        may_block,
        |_, _| Ok(false),
    )?;
    match attempt {
        Attempt::Served => Ok(None),
        Attempt::Empty => {
            encode::null_array(ctx.out, proto);
            Ok(None)
        }
        Attempt::Wait(ticket) => Ok(Some(Block {
            ticket: Some(ticket),
            wait: None,
            timeout_ms: ms,
            on_timeout: if proto >= 3 { b"_\r\n" } else { b"*-1\r\n" },
        })),
    }
}

/// Serves one key of a read, writing `key => entries` if there is
/// something: synchronously (`sync`: history reads and the first look) or
/// for a woken client. False when there is nothing to serve.
#[allow(clippy::too_many_arguments)]
fn serve_key(
    node: &Node,
    op: &XReadOp,
    key: &[u8],
    gt: StreamId,
    now: u64,
    proto: u8,
    sync: bool,
    out: &mut BytesMut,
) -> Result<bool, CmdError> {
    let h = node.store.hash(key);
    let mut sh = node.store.lock(h, now);
    let kind = sh.kind_of(h, key);
    if kind.is_none() {
        return Ok(false);
    }
    let r = sh.write_coll::<Stream, _>(h, key, false, |s| {
        let Some((g, c, noack)) = &op.group else {
            if !has_after(s, sync, gt) {
                return Ok(false);
            }
            key_header(out, key, proto);
            deliver(s, gt, op.count, None, now, out);
            return Ok(true);
        };
        let Some(grp) = s.groups.get(&**g) else {
            return Err(CmdError::Other(
                "NOGROUP the consumer group this client was blocked on no longer exists".into(),
            ));
        };
        if gt != StreamId::MAX {
            key_header(out, key, proto);
            history(s, (g, c), gt, op.count, now, proto, out);
            return Ok(true);
        }
        let last = grp.last_id;
        if !has_after(s, sync, last) {
            return Ok(false);
        }
        key_header(out, key, proto);
        deliver(s, last, op.count, Some((g, c, *noack)), now, out);
        Ok(true)
    })?;
    r.unwrap_or(Ok(false))
}

/// Whether `s` holds an entry past `id`: judged by its newest entry when
/// read synchronously, by its last generated ID for a woken client.
fn has_after(s: &Stream, sync: bool, id: StreamId) -> bool {
    let top = if sync {
        s.edge(true).map(|e| e.0)
    } else {
        Some(s.last_id)
    };
    top.is_some_and(|t| t > id)
}

/// Serves a client blocked in XREAD / XREADGROUP on `key` (the wake-up
/// path): the reply is a one-key array (RESP3 map).
pub(crate) fn serve_blocked(
    op: &XReadOp,
    node: &Node,
    key: &[u8],
    proto: u8,
    now: u64,
    out: &mut BytesMut,
) -> Result<bool, CmdError> {
    let Some((_, gt)) = op.ids.iter().find(|(k, _)| **k == *key) else {
        return Ok(false);
    };
    let mut body = BytesMut::new();
    if !serve_key(node, op, key, *gt, now, proto, false, &mut body)? {
        return Ok(false);
    }
    if proto == 2 {
        encode::array_len(out, 1);
    } else {
        encode::map_len(out, 1, proto);
    }
    out.extend_from_slice(&body);
    Ok(true)
}
