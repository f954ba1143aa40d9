//! Pub/sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH and
//! PUBSUB, with Redis 7.0's confirmations (one per name, carrying the
//! connection's subscription count), and the RESP2 subscribe-mode gate the
//! dispatcher applies to every other command.
//!
//! The subscriptions themselves live in `backend/pubsub` (the node's hub
//! and the connection's [`Subscriber`]); this file parses and replies.

use super::{CmdResult, Command, Ctx};
use crate::backend::error::CmdError;
use crate::backend::pubsub::mailbox::{push_header, Taken};
use crate::backend::pubsub::{Space, Subscriber};
use crate::resp::encode;
use bytes::BytesMut;

/// One confirmation: `*3`/`>3` `subscribe name count` (a null name when a
/// bare UNSUBSCRIBE finds nothing to leave).
fn confirm(out: &mut BytesMut, proto: u8, what: &str, name: Option<&[u8]>, count: usize) {
    push_header(out, proto, 3);
    encode::bulk(out, what.as_bytes());
    match name {
        Some(n) => encode::bulk(out, n),
        None => encode::null(out, proto),
    }
    encode::integer(out, count as i64);
}

fn join(ctx: &mut Ctx, args: &[&[u8]], space: Space, what: &str) -> CmdResult {
    let (proto, id) = (ctx.client.proto, ctx.client.id);
    let hub = &ctx.node.pubsub;
    let sub = ctx
        .client
        .pubsub
        .get_or_insert_with(|| Box::new(Subscriber::new(hub.clone(), id, proto)));
    for name in &args[1..] {
        sub.subscribe(space, name);
        confirm(ctx.out, proto, what, Some(name), sub.count(space));
    }
    Ok(())
}

fn part(ctx: &mut Ctx, args: &[&[u8]], space: Space, what: &str) -> CmdResult {
    let proto = ctx.client.proto;
    let out = &mut *ctx.out;
    let Some(sub) = ctx.client.pubsub.as_mut() else {
        // Never subscribed: each name (or the bare form) is confirmed at 0.
        if args.len() == 1 {
            confirm(out, proto, what, None, 0);
        }
        for name in &args[1..] {
            confirm(out, proto, what, Some(name), 0);
        }
        return Ok(());
    };
    if args.len() == 1 {
        let names = sub.names(space);
        if names.is_empty() {
            confirm(out, proto, what, None, sub.count(space));
        }
        for name in names {
            sub.unsubscribe(space, &name);
            confirm(out, proto, what, Some(&name), sub.count(space));
        }
    } else {
        for name in &args[1..] {
            sub.unsubscribe(space, name);
            confirm(out, proto, what, Some(name), sub.count(space));
        }
    }
    Ok(())
}

/// SUBSCRIBE channel [channel ...]
pub(crate) fn subscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    join(ctx, args, Space::Channel, "subscribe")
}

/// PSUBSCRIBE pattern [pattern ...]
pub(crate) fn psubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    join(ctx, args, Space::Pattern, "psubscribe")
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
pub(crate) fn ssubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    join(ctx, args, Space::Shard, "ssubscribe")
}

/// UNSUBSCRIBE [channel ...]
pub(crate) fn unsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    part(ctx, args, Space::Channel, "unsubscribe")
}

/// PUNSUBSCRIBE [pattern ...]
pub(crate) fn punsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    part(ctx, args, Space::Pattern, "punsubscribe")
}

/// SUNSUBSCRIBE [shardchannel ...]
pub(crate) fn sunsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    part(ctx, args, Space::Shard, "sunsubscribe")
}

fn publish_in(ctx: &mut Ctx, args: &[&[u8]], sharded: bool) -> CmdResult {
    let limits = ctx.node.settings.pubsub_limits();
    let n = ctx
        .node
        .pubsub
        .publish(sharded, args[1], args[2], limits, ctx.now);
    // A connection publishing to itself gets the message before the reply,
    // as from Redis.
    if !take_pushes(ctx.client, ctx.out) {
        ctx.client.quit = true;
        return Ok(());
    }
    encode::integer(ctx.out, n as i64);
    Ok(())
}

/// PUBLISH channel message
pub(crate) fn publish(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    publish_in(ctx, args, false)
}

/// SPUBLISH shardchannel message
pub(crate) fn spublish(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    publish_in(ctx, args, true)
}

/// Appends every message waiting for this connection to `out`. False when
/// its mailbox was closed over the output buffer limit: the connection
/// must close. The serve loop calls it before each command, so a message
/// published before a command was read precedes that command's reply.
pub(crate) fn take_pushes(client: &mut super::Client, out: &mut BytesMut) -> bool {
    match &client.pubsub {
        Some(sub) => sub.mailbox.take(out, usize::MAX) != Taken::Closed,
        None => true,
    }
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

/// PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT |
/// SHARDCHANNELS [pattern] | SHARDNUMSUB [channel ...] | HELP
pub(crate) fn pubsub(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let sub = args[1].to_ascii_lowercase();
    let n = args.len();
    let hub = &ctx.node.pubsub;
    let out = &mut *ctx.out;
    let arity = |name: &str| CmdError::WrongArity(format!("pubsub|{name}"));
    match &sub[..] {
        b"help" if n == 2 => {
            encode::array_len(out, HELP.len());
            HELP.iter().for_each(|l| encode::simple(out, l));
        }
        b"help" => return Err(arity("help")),
        b"numpat" if n == 2 => encode::integer(out, hub.count(Space::Pattern) as i64),
        b"numpat" => return Err(arity("numpat")),
        b"channels" | b"shardchannels" if n <= 3 => {
            let space = if sub[0] == b'c' {
                Space::Channel
            } else {
                Space::Shard
            };
            let names = hub.names(space, args.get(2).copied());
            encode::array_len(out, names.len());
            names.iter().for_each(|c| encode::bulk(out, c));
        }
        b"numsub" | b"shardnumsub" => {
            let space = if sub[0] == b'n' {
                Space::Channel
            } else {
                Space::Shard
            };
            encode::array_len(out, 2 * (n - 2));
            for name in &args[2..] {
                encode::bulk(out, name);
                encode::integer(out, hub.listeners(space, name) as i64);
            }
        }
        b"channels" | b"shardchannels" => {
            return Err(CmdError::err(format!(
                "unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
                String::from_utf8_lossy(args[1])
            )))
        }
        _ => {
            return Err(CmdError::UnknownSubcommand(
                String::from_utf8_lossy(args[1]).into_owned(),
                "PUBSUB",
            ))
        }
    }
    Ok(())
}

/// Commands a RESP2 connection in subscribe mode may run.
const ALLOWED_SUBSCRIBED: &[&str] = &[
    "ping",
    "subscribe",
    "ssubscribe",
    "unsubscribe",
    "sunsubscribe",
    "psubscribe",
    "punsubscribe",
    "quit",
    "reset",
];

/// The subcommands of the node's container commands and their arities, as
/// Redis 7 lists them: Redis checks a subcommand's arity, and names it
/// `name|sub`, before refusing it in subscribe mode.
const SUBCOMMANDS: &[(&str, i32)] = &[
    ("client|caching", 3),
    ("client|getname", 2),
    ("client|getredir", 2),
    ("client|help", 2),
    ("client|id", 2),
    ("client|info", 2),
    ("client|kill", -3),
    ("client|list", -2),
    ("client|no-evict", 3),
    ("client|no-touch", 3),
    ("client|pause", -3),
    ("client|reply", 3),
    ("client|setinfo", 4),
    ("client|setname", 3),
    ("client|tracking", -3),
    ("client|trackinginfo", 2),
    ("client|unblock", -3),
    ("client|unpause", 2),
    ("command|count", 2),
    ("command|docs", -2),
    ("command|getkeys", -4),
    ("command|getkeysandflags", -4),
    ("command|help", 2),
    ("command|info", -2),
    ("command|list", -2),
    ("config|get", -3),
    ("config|help", 2),
    ("config|resetstat", 2),
    ("config|rewrite", 2),
    ("config|set", -4),
    ("memory|doctor", 2),
    ("memory|help", 2),
    ("memory|malloc-stats", 2),
    ("memory|purge", 2),
    ("memory|stats", 2),
    ("memory|usage", -3),
    ("object|encoding", 3),
    ("object|freq", 3),
    ("object|help", 2),
    ("object|idletime", 3),
    ("object|refcount", 3),
    ("pubsub|channels", -2),
    ("pubsub|help", 2),
    ("pubsub|numpat", 2),
    ("pubsub|numsub", -2),
    ("pubsub|shardchannels", -2),
    ("pubsub|shardnumsub", -2),
];

/// Redis's refusal of `cmd` on a RESP2 connection in subscribe mode, or
/// `None` when it may run (or, for an unknown subcommand, when its handler
/// must give the "unknown subcommand" error, as Redis does first).
pub(crate) fn refusal(cmd: &Command, args: &[&[u8]]) -> Option<CmdError> {
    if ALLOWED_SUBSCRIBED.contains(&cmd.name) {
        return None;
    }
    let mut name = cmd.name.to_string();
    let is_container = SUBCOMMANDS
        .iter()
        .any(|(full, _)| full.split('|').next() == Some(cmd.name));
    if is_container && args.len() >= 2 {
        let full = format!(
            "{}|{}",
            cmd.name,
            String::from_utf8_lossy(args[1]).to_ascii_lowercase()
        );
        let (_, arity) = SUBCOMMANDS.iter().find(|(f, _)| *f == full)?;
        if !super::arity_ok(*arity, args.len()) {
            return Some(CmdError::WrongArity(full));
        }
        name = full;
    }
    Some(CmdError::err(format!(
        "Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    )))
}
