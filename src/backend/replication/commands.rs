//! The replication commands: REPLICAOF (SLAVEOF), ROLE, REPLCONF, PSYNC
//! (SYNC), WAIT, and the `replication` section of INFO, with Redis's
//! replies and field names.
//!
//! Handlers only change state and write replies: the link itself runs in
//! `replica.rs`, a replica's connection in `primary.rs` (the server loop
//! hands the socket over once PSYNC has been read), and WAIT's waiting in
//! [`wait`], which the server loop awaits.

use super::state::WaitFor;
use super::{feed::Feed, LinkState};
use crate::backend::commands::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::node::Node;
use crate::resp::{encode, eq_ignore_case};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// What a replica told us about itself before PSYNC.
#[derive(Debug, Default)]
pub(crate) struct Hello {
    /// REPLCONF listening-port.
    pub(crate) port: u16,
    /// PSYNC's replication id and offset (`?`, -1 for a full sync).
    pub(crate) psync: Option<(String, i64)>,
}

/// REPLICAOF host port | REPLICAOF NO ONE (and SLAVEOF). The dispatcher
/// runs it with the node's gate held exclusively.
pub(crate) fn replicaof(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if eq_ignore_case(args[1], b"no") && eq_ignore_case(args[2], b"one") {
        promote(ctx.node);
        ctx.ok();
        return Ok(());
    }
    let port = parse_i64(args[2]).map_err(|_| CmdError::err("Invalid master port"))?;
    let port = u16::try_from(port).map_err(|_| CmdError::err("Invalid master port"))?;
    let host = String::from_utf8_lossy(args[1]).into_owned();
    if ctx.node.port == port && matches!(host.as_str(), "127.0.0.1" | "localhost") {
        return Err(CmdError::err("Can't replicate from myself"));
    }
    let same = ctx
        .node
        .repl
        .link()
        .as_ref()
        .is_some_and(|l| l.host == host && l.port == port);
    if same {
        encode::simple(ctx.out, "OK Already connected to specified master");
        return Ok(());
    }
    follow_held(ctx.node, host, port);
    ctx.ok();
    Ok(())
}

/// Makes the node a replica of `host:port` (`--replicaof`).
pub(crate) fn follow(node: &Node, host: String, port: u16) {
    let _excl = node.exclusive();
    follow_held(node, host, port);
}

/// [`follow`], with the node's gate held exclusively by the caller.
fn follow_held(node: &Node, host: String, port: u16) {
    let repl = &node.repl;
    let generation = repl.generation.fetch_add(1, Relaxed) + 1;
    *repl.link() = Some(super::Link {
        host: host.clone(),
        port,
        state: LinkState::Connect,
        last_io: std::time::Instant::now(),
        read_offset: 0,
        down_since: Some(std::time::Instant::now()),
    });
    repl.set_replica(true);
    node.store.hooks.hide_expired.store(true, Relaxed);
    node.store.hooks.feeding.store(false, Relaxed);
    // Our own replicas reconnect and resync from what we become.
    for r in repl.feed().readers.iter_mut() {
        r.kicked = true;
    }
    repl.written.send_modify(|_| {});
    super::start_link(node, generation);
}

/// REPLICAOF NO ONE: a primary from now on, keeping the data and the
/// history (its old id stays valid up to the current offset, so the other
/// replicas of the shard continue from here with a partial resync). The
/// caller holds the node's gate exclusively.
fn promote(node: &Node) {
    let repl = &node.repl;
    if !repl.is_replica() {
        return;
    }
    repl.generation.fetch_add(1, Relaxed);
    *repl.link() = None;
    repl.set_replica(false);
    {
        let mut f = repl.feed();
        if f.active {
            f.shift_id(super::feed::new_replid());
        }
    }
    node.store.hooks.hide_expired.store(false, Relaxed);
    super::activate(node);
}

/// ROLE
pub(crate) fn role(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let repl = &ctx.node.repl;
    let link = repl.link().clone();
    let out = &mut *ctx.out;
    match link {
        Some(l) => {
            encode::array_len(out, 5);
            encode::bulk(out, b"slave");
            encode::bulk(out, l.host.as_bytes());
            encode::integer(out, l.port as i64);
            encode::bulk(out, l.state.name().as_bytes());
            let off = if l.state == LinkState::Connected {
                repl.feed().end() as i64
            } else {
                -1
            };
            encode::integer(out, off);
        }
        None => {
            let f = repl.feed();
            let online: Vec<_> = f.readers.iter().filter(|r| r.state == "online").collect();
            encode::array_len(out, 3);
            encode::bulk(out, b"master");
            encode::integer(out, f.end() as i64);
            encode::array_len(out, online.len());
            for r in online {
                encode::array_len(out, 3);
                encode::bulk(out, r.ip.as_bytes());
                encode::bulk(out, r.port.to_string().as_bytes());
                encode::bulk(out, r.ack.to_string().as_bytes());
            }
        }
    }
    Ok(())
}

/// REPLCONF option value …: a replica's handshake and its acknowledgements.
pub(crate) fn replconf(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut j = 1;
    while j + 1 < args.len() {
        let (opt, val) = (args[j], args[j + 1]);
        if eq_ignore_case(opt, b"listening-port") {
            let port = parse_i64(val)?;
            let hello = ctx.client.replica.get_or_insert_with(Default::default);
            hello.port = u16::try_from(port).map_err(|_| CmdError::NotInteger)?;
        } else if eq_ignore_case(opt, b"ack") || eq_ignore_case(opt, b"getack") {
            // Acknowledgements arrive on a replica's own connection
            // (`primary.rs`); elsewhere they get no reply, as in Redis.
            return Ok(());
        } else if !(eq_ignore_case(opt, b"capa")
            || eq_ignore_case(opt, b"ip-address")
            || eq_ignore_case(opt, b"rdb-only")
            || eq_ignore_case(opt, b"rdb-filter-only"))
        {
            let name = String::from_utf8_lossy(opt);
            return Err(CmdError::err(format!(
                "Unrecognized REPLCONF option: {name}"
            )));
        }
        j += 2;
    }
    ctx.ok();
    Ok(())
}

/// PSYNC replid offset (and SYNC): the connection becomes a replica's.
pub(crate) fn psync(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if ctx.node.repl.is_replica() {
        let linked = ctx.node.repl.link().as_ref().map(|l| l.state);
        if linked != Some(LinkState::Connected) {
            return Err(CmdError::Other(
                "NOMASTERLINK Can't SYNC while not connected with my master".into(),
            ));
        }
        return Err(CmdError::err(
            "a built-in replica does not serve replicas of its own (chained replication); point REPLICAOF at the primary",
        ));
    }
    if ctx.client.tx.is_queueing() || ctx.client.never_block {
        return Err(CmdError::err(
            "Replica can't be used inside MULTI/EXEC or a script",
        ));
    }
    let (id, off) = if args.len() >= 3 {
        let off = parse_i64(args[2])?;
        (String::from_utf8_lossy(args[1]).into_owned(), off)
    } else {
        ("?".to_string(), -1)
    };
    let hello = ctx.client.replica.get_or_insert_with(Default::default);
    hello.psync = Some((id, off));
    Ok(())
}

/// WAIT numreplicas timeout: how many replicas acknowledged this client's
/// writes, once `numreplicas` have or the timeout passes.
pub(crate) fn wait(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if ctx.node.repl.is_replica() {
        return Err(CmdError::err(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let wanted = parse_i64(args[1])?;
    let ms = crate::backend::commands::timeout::parse_ms(args[2])?;
    let offset = ctx.client.woff;
    let have = acked(&ctx.node.repl.feed(), offset);
    if wanted <= have as i64 || ctx.client.never_block {
        encode::integer(ctx.out, have as i64);
        return Ok(());
    }
    ctx.client.wait = Some(WaitFor {
        offset,
        replicas: wanted as usize,
        timeout_ms: ms,
    });
    Ok(())
}

/// Replicas whose acknowledged offset reached `offset`.
fn acked(f: &Feed, offset: u64) -> usize {
    f.readers
        .iter()
        .filter(|r| r.state == "online" && r.ack >= offset)
        .count()
}

/// Waits for a WAIT: the integer reply once enough replicas acknowledged or
/// the time is up (0 = no limit).
pub(crate) async fn wait_for(node: &Node, w: WaitFor) -> i64 {
    let mut acks = node.repl.acked.subscribe();
    let deadline = (w.timeout_ms > 0)
        .then(|| tokio::time::Instant::now() + Duration::from_millis(w.timeout_ms));
    loop {
        let have = acked(&node.repl.feed(), w.offset);
        if have >= w.replicas {
            return have as i64;
        }
        let changed = acks.changed();
        match deadline {
            Some(d) => {
                if tokio::time::timeout_at(d, changed).await.is_err() {
                    return acked(&node.repl.feed(), w.offset) as i64;
                }
            }
            None => {
                let _ = changed.await;
            }
        }
    }
}

/// INFO's `replication` section, with Redis's field names.
pub(crate) fn info_fields(node: &Node) -> Vec<(String, String)> {
    let repl = &node.repl;
    let link = repl.link().clone();
    let f = repl.feed();
    let mut v: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, val: String| v.push((k.to_string(), val));
    match &link {
        Some(l) => {
            put("role", "slave".into());
            put("master_host", l.host.clone());
            put("master_port", l.port.to_string());
            let up = l.state == LinkState::Connected;
            put("master_link_status", if up { "up" } else { "down" }.into());
            let io = if l.state == LinkState::Connect {
                -1
            } else {
                l.last_io.elapsed().as_secs() as i64
            };
            put("master_last_io_seconds_ago", io.to_string());
            let syncing = l.state == LinkState::Sync;
            put("master_sync_in_progress", (syncing as u8).to_string());
            put("slave_read_repl_offset", l.read_offset.to_string());
            put("slave_repl_offset", f.end().to_string());
            if let Some(since) = l.down_since.filter(|_| !up) {
                put(
                    "master_link_down_since_seconds",
                    since.elapsed().as_secs().to_string(),
                );
            }
            let s = &node.settings;
            let prio = s.int("replica-priority").unwrap_or(100);
            put("slave_priority", prio.to_string());
            put(
                "slave_read_only",
                (s.flag("replica-read-only") as u8).to_string(),
            );
            put(
                "replica_announced",
                (s.flag("replica-announced") as u8).to_string(),
            );
            put("connected_slaves", "0".into());
        }
        None => {
            put("role", "master".into());
            let online: Vec<_> = f.readers.iter().filter(|r| !r.kicked).collect();
            put("connected_slaves", online.len().to_string());
            for (i, r) in online.iter().enumerate() {
                let lag = r.last_ack.elapsed().as_secs();
                put(
                    &format!("slave{i}"),
                    format!(
                        "ip={},port={},state={},offset={},lag={lag}",
                        r.ip, r.port, r.state, r.ack
                    ),
                );
            }
        }
    }
    put("master_failover_state", "no-failover".into());
    put("master_replid", f.replid.clone());
    put("master_replid2", f.replid2.clone());
    put("master_repl_offset", f.end().to_string());
    put("second_repl_offset", f.second_offset.to_string());
    put("repl_backlog_active", (f.active as u8).to_string());
    put("repl_backlog_size", repl.backlog_size().to_string());
    let first = if f.active { f.first_byte() } else { 0 };
    put("repl_backlog_first_byte_offset", first.to_string());
    put("repl_backlog_histlen", f.histlen().to_string());
    v
}
