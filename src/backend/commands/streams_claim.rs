//! XCLAIM and XAUTOCLAIM: moving pending entries between a group's
//! consumers, with Redis 7.0's option parsing, idle checks, delivery
//! counts, and XAUTOCLAIM's cursor and list of deleted IDs.

use super::streams::{bulk_id, parse_bound, parse_strict_id, write_entry};
use super::streams_group::{lossy, nogroup};
use super::{CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::stream::{Group, Stream, StreamId};
use crate::resp::{encode, eq_ignore_case};

fn int_or(b: &[u8], msg: &str) -> Result<i64, CmdError> {
    crate::resp::parse_i64(b).ok_or_else(|| CmdError::err(msg))
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
pub(crate) fn xclaim(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (key, gname, cname) = (args[1], args[2], args[3]);
    if ctx.read::<Stream, _>(key, |s| s.groups.contains_key(gname))? != Some(true) {
        return Err(nogroup(key, gname));
    }
    let minidle = int_or(args[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_strict_id(args[j], 0) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now as i64;
    let (mut retry, mut when, mut force, mut justid) = (None, None, false, false);
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = j + 1 < args.len();
        let o = args[j];
        if eq_ignore_case(o, b"force") {
            force = true;
        } else if eq_ignore_case(o, b"justid") {
            justid = true;
        } else if eq_ignore_case(o, b"idle") && more {
            j += 1;
            when = Some(now - int_or(args[j], "Invalid IDLE option argument for XCLAIM")?);
        } else if eq_ignore_case(o, b"time") && more {
            j += 1;
            when = Some(int_or(args[j], "Invalid TIME option argument for XCLAIM")?);
        } else if eq_ignore_case(o, b"retrycount") && more {
            j += 1;
            retry = Some(int_or(
                args[j],
                "Invalid RETRYCOUNT option argument for XCLAIM",
            )?);
        } else if eq_ignore_case(o, b"lastid") && more {
            j += 1;
            last_id = parse_strict_id(args[j], 0)?;
        } else {
            return Err(CmdError::err(format!(
                "Unrecognized XCLAIM option '{}'",
                lossy(o)
            )));
        }
        j += 1;
    }
    let when = match when {
        Some(t) if (0..=now).contains(&t) => t as u64,
        _ => now as u64,
    };
    let proto = ctx.client.proto;
    let out = &mut *ctx.out;
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut sh = store.lock(h, now as u64);
    let done = sh.write_coll::<Stream, _>(h, key, false, |s| {
        let mut claimed = Vec::new();
        let exists: Vec<bool> = ids.iter().map(|id| s.contains(*id)).collect();
        // Looked up again: the group may have gone since the check.
        let Some(g) = s.groups.get_mut(gname) else {
            return Err(nogroup(key, gname));
        };
        if last_id > g.last_id {
            g.last_id = last_id;
        }
        for (id, live) in ids.iter().zip(exists) {
            if !live {
                g.ack(*id);
                continue;
            }
            let forced = force && !g.pel.contains_key(id);
            let Some(p) = g.pel.get(id) else {
                if !forced {
                    continue;
                }
                g.consumer(cname, now as u64);
                g.deliver(*id, cname, now as u64, false);
                finish(g, *id, when, retry, justid, true);
                claimed.push(*id);
                continue;
            };
            if minidle > 0 && now - (p.delivery_time as i64) < minidle {
                continue;
            }
            g.consumer(cname, now as u64);
            g.deliver(*id, cname, now as u64, false);
            finish(g, *id, when, retry, justid, false);
            claimed.push(*id);
        }
        if let Some(c) = s
            .groups
            .get_mut(gname)
            .and_then(|g| g.consumers.get_mut(cname))
        {
            c.seen_time = now as u64;
        }
        encode::array_len(out, claimed.len());
        for id in claimed {
            if justid {
                bulk_id(out, id);
            } else {
                match s.get(id) {
                    Some(f) => write_entry(out, id, &f),
                    None => encode::null(out, proto),
                }
            }
        }
        Ok(())
    })?;
    done.unwrap_or_else(|| Err(nogroup(key, gname)))
}

/// Sets a claimed entry's delivery time and count, as XCLAIM does.
fn finish(g: &mut Group, id: StreamId, when: u64, retry: Option<i64>, justid: bool, forced: bool) {
    if let Some(p) = g.pel.get_mut(&id) {
        p.delivery_time = when;
        if forced {
            p.delivery_count = 1;
        }
        match retry {
            Some(r) if r >= 0 => p.delivery_count = r as u64,
            _ if !justid => p.delivery_count += 1,
            _ => {}
        }
    }
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
pub(crate) fn xautoclaim(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (key, gname, cname) = (args[1], args[2], args[3]);
    let minidle = int_or(args[4], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let (mut start, ex) = parse_bound(args[5], 0)?;
    if ex {
        start = start
            .incr()
            .ok_or_else(|| CmdError::err("invalid start ID for the interval"))?;
    }
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < args.len() {
        if eq_ignore_case(args[j], b"count") && j + 1 < args.len() {
            count = match crate::resp::parse_i64(args[j + 1]) {
                Some(n) if (1..=i64::MAX / 16).contains(&n) => n,
                _ => return Err(CmdError::err("COUNT must be > 0")),
            };
            j += 1;
        } else if eq_ignore_case(args[j], b"justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if ctx.read::<Stream, _>(key, |s| s.groups.contains_key(gname))? != Some(true) {
        return Err(nogroup(key, gname));
    }
    let now = ctx.now;
    let out = &mut *ctx.out;
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut sh = store.lock(h, now);
    let done = sh.write_coll::<Stream, _>(h, key, false, |s| {
        let Some(g) = s.groups.get(gname) else {
            return Err(nogroup(key, gname));
        };
        let pel: Vec<StreamId> = g.pel.range(start..).map(|(id, _)| *id).collect();
        let exists: Vec<bool> = pel.iter().map(|id| s.contains(*id)).collect();
        let Some(g) = s.groups.get_mut(gname) else {
            return Err(nogroup(key, gname));
        };
        let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
        let mut attempts = count.saturating_mul(10);
        let mut at = 0;
        while attempts > 0 && count > 0 && at < pel.len() {
            attempts -= 1;
            let id = pel[at];
            at += 1;
            if !exists[at - 1] {
                g.ack(id);
                deleted.push(id);
                count -= 1;
                continue;
            }
            let Some(p) = g.pel.get(&id) else {
                continue;
            };
            let idle = now as i64 - p.delivery_time as i64;
            if minidle > 0 && idle < minidle {
                continue;
            }
            g.consumer(cname, now);
            g.deliver(id, cname, now, !justid);
            claimed.push(id);
            count -= 1;
        }
        if let Some(c) = g.consumers.get_mut(cname) {
            c.seen_time = now;
        }
        encode::array_len(out, 3);
        bulk_id(out, pel.get(at).copied().unwrap_or(StreamId::MIN));
        encode::array_len(out, claimed.len());
        for id in claimed {
            if justid {
                bulk_id(out, id);
            } else if let Some(f) = s.get(id) {
                write_entry(out, id, &f);
            }
        }
        encode::array_len(out, deleted.len());
        deleted.into_iter().for_each(|id| bulk_id(out, id));
        Ok(())
    })?;
    done.unwrap_or_else(|| Err(nogroup(key, gname)))
}
