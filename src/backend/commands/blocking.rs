//! Blocking commands: BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP and WAIT, with Redis 7.0's argument order and errors.
//!
//! A handler parses its arguments, then asks `backend::blocking` to serve
//! it from the first key with data or register it; when registered it
//! returns a [`Block`] and the server loop suspends the connection until a
//! push serves it, the timeout passes (`*-1`, RESP3 `_`), the client
//! leaves or the node stops. [`Op`] is what a served client gets, shared
//! by the immediate path and the wake-up path. Inside MULTI
//! (`Client::never_block`) nothing blocks: an empty result answers like a
//! timeout at once, as Redis's CLIENT_DENY_BLOCKING does.

use super::lists::{move_one, parse_side, pop_many, reply_key_and_items};
use super::timeout::parse_secs;
use super::util::{double, parse_mpop};
use super::zsets::{reply_key_and_pairs, zpop_many};
use super::Ctx;
use crate::backend::blocking::{Attempt, Block, Op};
use crate::backend::error::CmdError;
use crate::backend::node::Node;
use crate::resp::encode;
use bytes::BytesMut;

/// A blocking handler's result: `Ok(None)` when it already replied.
pub(crate) type BlockResult = Result<Option<Block>, CmdError>;

/// Pops from `key` for a client blocked in `op` and writes the reply for a
/// `proto` client: false if the key is absent, WRONGTYPE if it (or
/// BLMOVE's destination) holds another type.
pub(crate) fn serve(
    op: &Op,
    node: &Node,
    key: &[u8],
    proto: u8,
    now: u64,
    out: &mut BytesMut,
) -> Result<bool, CmdError> {
    match op {
        Op::Pop { head } => {
            let Some(v) = pop_many(node, now, key, *head, 1)? else {
                return Ok(false);
            };
            encode::array_len(out, 2);
            encode::bulk(out, key);
            encode::bulk(out, &v[0]);
        }
        Op::MPop { head, count } => {
            let Some(v) = pop_many(node, now, key, *head, *count)? else {
                return Ok(false);
            };
            reply_key_and_items(out, key, &v);
        }
        Op::Move {
            dst,
            from_head,
            to_head,
        } => {
            let Some(v) = move_one(node, now, key, dst, *from_head, *to_head)? else {
                return Ok(false);
            };
            encode::bulk(out, &v);
        }
        Op::ZPop { max } => {
            let Some(p) = zpop_many(node, now, key, *max, 1)? else {
                return Ok(false);
            };
            encode::array_len(out, 3);
            encode::bulk(out, key);
            encode::bulk(out, &p[0].0);
            double(out, p[0].1, proto);
        }
        Op::ZMPop { max, count } => {
            let Some(p) = zpop_many(node, now, key, *max, *count)? else {
                return Ok(false);
            };
            reply_key_and_pairs(out, key, &p, proto);
        }
        Op::XRead(x) => {
            let fresh = crate::backend::notify::lacks_consumer(node, x, key, now);
            let served = super::streams_read::serve_blocked(x, node, key, proto, now, out)?;
            if served {
                crate::backend::replication::effects::served(node, op, key, now);
                crate::backend::notify::consumer_created(node, fresh, x, key, now);
                crate::backend::notify::after_served(node, op, key, now);
            }
            return Ok(served);
        }
    }
    crate::backend::replication::effects::served(node, op, key, now);
    crate::backend::notify::after_served(node, op, key, now);
    Ok(true)
}

/// Serves the clients blocked on keys a command made ready (the server
/// loop calls this after each command), under the node's gate.
pub(crate) fn serve_ready(node: &Node, now: u64) {
    let _shared = node.shared();
    node.blocking
        .serve_ready(&node.store, now, &mut |op, key, proto, out| {
            serve(op, node, key, proto, now, out)
        });
}

/// Serves `op` from the first of `keys` with data, or blocks on them.
/// `null_bulk`: inside MULTI an empty result is `$-1` (BLMOVE,
/// BRPOPLPUSH) rather than `*-1`; a timeout is `*-1` for all, as in Redis.
fn pop_or_block(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    op: Op,
    timeout_ms: u64,
    null_bulk: bool,
) -> BlockResult {
    let (node, proto) = (ctx.node, ctx.client.proto);
    let may_block = !ctx.client.never_block;
    let (out, now) = (&mut *ctx.out, ctx.now);
    let attempt = node.blocking.serve_or_wait(
        &node.store.ready,
        ctx.client.id,
        proto,
        keys,
        op,
        may_block,
        |op, key| serve(op, node, key, proto, now, out),
    )?;
    match attempt {
        Attempt::Served => Ok(None),
        Attempt::Empty => {
            if null_bulk {
                encode::null(ctx.out, proto);
            } else {
                encode::null_array(ctx.out, proto);
            }
            Ok(None)
        }
        Attempt::Wait(ticket) => Ok(Some(Block {
            ticket: Some(ticket),
            wait: None,
            timeout_ms,
            on_timeout: if proto >= 3 { b"_\r\n" } else { b"*-1\r\n" },
        })),
    }
}

/// BLPOP / BRPOP key [key ...] timeout
fn pop(ctx: &mut Ctx, args: &[&[u8]], head: bool) -> BlockResult {
    let last = args.len() - 1;
    let ms = parse_secs(args[last])?;
    pop_or_block(ctx, &args[1..last], Op::Pop { head }, ms, false)
}

/// BLPOP key [key ...] timeout
pub(crate) fn blpop(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    pop(ctx, args, true)
}

/// BRPOP key [key ...] timeout
pub(crate) fn brpop(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    pop(ctx, args, false)
}

/// BRPOPLPUSH source destination timeout
pub(crate) fn brpoplpush(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    let ms = parse_secs(args[3])?;
    let op = Op::Move {
        dst: args[2].into(),
        from_head: false,
        to_head: true,
    };
    pop_or_block(ctx, &args[1..2], op, ms, true)
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
pub(crate) fn blmove(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    let (from_head, to_head) = (parse_side(args[3])?, parse_side(args[4])?);
    let ms = parse_secs(args[5])?;
    let op = Op::Move {
        dst: args[2].into(),
        from_head,
        to_head,
    };
    pop_or_block(ctx, &args[1..2], op, ms, true)
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub(crate) fn blmpop(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    // Redis 7.0 checks the other arguments before the timeout.
    let a = parse_mpop(args, 2, b"left", b"right")?;
    let ms = parse_secs(args[1])?;
    let op = Op::MPop {
        head: a.first,
        count: a.count,
    };
    pop_or_block(ctx, &args[a.keys], op, ms, false)
}

/// BZPOPMIN / BZPOPMAX key [key ...] timeout
fn zpop(ctx: &mut Ctx, args: &[&[u8]], max: bool) -> BlockResult {
    let last = args.len() - 1;
    let ms = parse_secs(args[last])?;
    pop_or_block(ctx, &args[1..last], Op::ZPop { max }, ms, false)
}

/// BZPOPMIN key [key ...] timeout
pub(crate) fn bzpopmin(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    zpop(ctx, args, false)
}

/// BZPOPMAX key [key ...] timeout
pub(crate) fn bzpopmax(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    zpop(ctx, args, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub(crate) fn bzmpop(ctx: &mut Ctx, args: &[&[u8]]) -> BlockResult {
    let a = parse_mpop(args, 2, b"min", b"max")?;
    let ms = parse_secs(args[1])?;
    let op = Op::ZMPop {
        max: !a.first,
        count: a.count,
    };
    pop_or_block(ctx, &args[a.keys], op, ms, false)
}

#[cfg(test)]
mod tests {
    use super::super::{dispatch, Client, Next};
    use crate::backend::keyspace::clock::now_ms;
    use crate::backend::node::Node;
    use crate::backend::NodeConfig;
    use bytes::BytesMut;

    fn run(node: &Node, client: &mut Client, args: &[&str]) -> (String, bool) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut out = BytesMut::new();
        let blocked = matches!(
            dispatch(node, client, &mut out, &args, now_ms()),
            Next::Block(_)
        );
        (String::from_utf8_lossy(&out).into_owned(), blocked)
    }

    #[test]
    fn a_client_that_may_not_block_gets_the_timeout_reply_at_once() {
        let node = Node::new(&NodeConfig::default(), 0);
        let mut c = Client::new(1, String::new(), String::new(), 0);
        assert_eq!(
            run(&node, &mut c, &["BLPOP", "q", "0"]),
            (String::new(), true)
        );
        c.never_block = true;
        let cases: &[(&[&str], &str)] = &[
            (&["BLPOP", "q", "0"], "*-1\r\n"),
            (&["BRPOP", "q", "a", "0"], "*-1\r\n"),
            (&["BLMPOP", "0", "1", "q", "LEFT"], "*-1\r\n"),
            (&["BZPOPMIN", "z", "0"], "*-1\r\n"),
            (&["BZMPOP", "0", "1", "z", "MAX"], "*-1\r\n"),
            (&["BRPOPLPUSH", "q", "d", "0"], "$-1\r\n"),
            (&["BLMOVE", "q", "d", "LEFT", "LEFT", "0"], "$-1\r\n"),
            (&["WAIT", "1", "0"], ":0\r\n"),
            (&["BLPOP", "q", "-1"], "-ERR timeout is negative\r\n"),
            (&["RPUSH", "q", "x"], ":1\r\n"),
            (&["BLPOP", "q", "0"], "*2\r\n$1\r\nq\r\n$1\r\nx\r\n"),
        ];
        for (args, want) in cases {
            assert_eq!(
                run(&node, &mut c, args),
                (want.to_string(), false),
                "{args:?}"
            );
        }
        c.proto = 3;
        assert_eq!(
            run(&node, &mut c, &["BLMOVE", "q", "d", "LEFT", "LEFT", "0"]).0,
            "_\r\n"
        );
        assert_eq!(run(&node, &mut c, &["BLPOP", "q", "0"]).0, "_\r\n");
    }
}
