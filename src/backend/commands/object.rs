//! Whole-key commands: RENAME, RENAMENX, COPY, OBJECT and MEMORY USAGE.
//! Two-key commands lock both shards (in shard order) so the move is atomic.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::keyspace::clock::lru_clock;
use crate::backend::keyspace::store::Store;
use crate::resp::{encode, eq_ignore_case};

/// Moves `src` to `dst` under both shard locks. `nx`: only if `dst` is
/// absent. `copy`: keep `src`. Returns None if `src` is missing, else
/// whether the destination was written.
fn transfer(ctx: &mut Ctx, src: &[u8], dst: &[u8], nx: bool, copy: bool) -> Option<bool> {
    let store = &ctx.node.store;
    let (hs, hd) = (store.hash(src), store.hash(dst));
    let mut locked = store.lock_many(&[hs, hd], ctx.now);
    let (is, id) = (Store::shard_of(hs), Store::shard_of(hd));
    let entry = locked[is].as_mut()?.get(hs, src)?.clone();
    let dst_shard = locked[id].as_mut()?;
    if nx && dst_shard.contains(hd, dst) {
        return Some(false);
    }
    if !copy {
        locked[is].as_mut()?.remove(hs, src);
    }
    let moved = entry.with_key(dst, ctx.now);
    locked[id].as_mut()?.insert(hd, moved);
    Some(true)
}

/// RENAME key newkey
pub(crate) fn rename(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args[1] == args[2] {
        let store = &ctx.node.store;
        let h = store.hash(args[1]);
        if !store.lock(h, ctx.now).contains(h, args[1]) {
            return Err(CmdError::err("no such key"));
        }
    } else if transfer(ctx, args[1], args[2], false, false).is_none() {
        return Err(CmdError::err("no such key"));
    }
    ctx.ok();
    Ok(())
}

/// RENAMENX key newkey
pub(crate) fn renamenx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let done = if args[1] == args[2] {
        let store = &ctx.node.store;
        let h = store.hash(args[1]);
        if !store.lock(h, ctx.now).contains(h, args[1]) {
            return Err(CmdError::err("no such key"));
        }
        false
    } else {
        transfer(ctx, args[1], args[2], true, false).ok_or_else(|| CmdError::err("no such key"))?
    };
    encode::integer(ctx.out, done as i64);
    Ok(())
}

/// COPY source destination [DB destination-db] [REPLACE]
pub(crate) fn copy(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut replace = false;
    let mut j = 3;
    while j < args.len() {
        if eq_ignore_case(args[j], b"replace") {
            replace = true;
        } else if eq_ignore_case(args[j], b"db") && j + 1 < args.len() {
            if parse_i64(args[j + 1])? != 0 {
                return Err(CmdError::DbIndexOutOfRange);
            }
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if args[1] == args[2] {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let done = transfer(ctx, args[1], args[2], !replace, true).unwrap_or(false);
    encode::integer(ctx.out, done as i64);
    Ok(())
}

/// The encoding Redis would report for a string value.
pub(crate) fn encoding(value: &[u8]) -> &'static str {
    if value.len() <= 20 && crate::resp::parse_i64(value).is_some() {
        "int"
    } else if value.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// OBJECT ENCODING|IDLETIME|FREQ|REFCOUNT key, OBJECT HELP
pub(crate) fn object(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let sub = &args[1];
    if eq_ignore_case(sub, b"help") {
        if args.len() != 2 {
            return Err(CmdError::WrongArity("object|help".into()));
        }
        let lines = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "FREQ <key>",
            "IDLETIME <key>",
            "REFCOUNT <key>",
            "HELP",
        ];
        ctx.help(&lines);
        return Ok(());
    }
    let known = [&b"encoding"[..], b"idletime", b"freq", b"refcount"]
        .iter()
        .any(|n| eq_ignore_case(sub, n));
    if !known {
        return Err(CmdError::UnknownSubcommand(
            String::from_utf8_lossy(sub).into_owned(),
            "OBJECT",
        ));
    }
    if args.len() != 3 {
        return Err(CmdError::WrongArity(format!(
            "object|{}",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )));
    }
    let store = &ctx.node.store;
    let h = store.hash(args[2]);
    let s = store.lock(h, ctx.now);
    // OBJECT must not count as an access: read the entry without touching it.
    let Some((enc, lru, int)) = s.peek(h, args[2]).map(|e| match e.coll() {
        Some(c) => (c.encoding(), e.lru, None),
        None => (
            encoding(e.value()),
            e.lru,
            crate::resp::parse_i64(e.value()),
        ),
    }) else {
        drop(s);
        encode::null(ctx.out, ctx.client.proto);
        return Ok(());
    };
    drop(s);
    let lfu = &ctx.node.store.counters.lfu;
    if eq_ignore_case(sub, b"encoding") {
        encode::bulk(ctx.out, enc.as_bytes());
    } else if eq_ignore_case(sub, b"idletime") && lfu.is_on() {
        return Err(CmdError::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    } else if eq_ignore_case(sub, b"freq") && lfu.is_on() {
        encode::integer(ctx.out, lfu.decayed(lru, ctx.now) as i64);
    } else if eq_ignore_case(sub, b"idletime") {
        encode::integer(ctx.out, (lru_clock(ctx.now).wrapping_sub(lru) / 100) as i64);
    } else if eq_ignore_case(sub, b"refcount") {
        // Redis shares the integers 0..9999 (refcount INT_MAX).
        let shared = matches!(int, Some(0..=9999)) && enc == "int";
        encode::integer(ctx.out, if shared { i32::MAX as i64 } else { 1 });
    } else {
        return Err(CmdError::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    Ok(())
}

/// MEMORY USAGE key [SAMPLES n]: the bytes this node counts for the key.
pub(crate) fn memory(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if !eq_ignore_case(args[1], b"usage") {
        return Err(CmdError::UnknownSubcommand(
            String::from_utf8_lossy(args[1]).into_owned(),
            "MEMORY",
        ));
    }
    if args.len() != 3 && args.len() != 5 {
        return Err(CmdError::WrongArity("memory|usage".into()));
    }
    let store = &ctx.node.store;
    let h = store.hash(args[2]);
    let mem = store
        .lock(h, ctx.now)
        .peek(h, args[2])
        .map(|e| e.mem() as i64);
    match mem {
        Some(m) => encode::integer(ctx.out, m),
        None => encode::null(ctx.out, ctx.client.proto),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodings_follow_redis_thresholds() {
        let long = "x".repeat(45);
        let cases = [
            ("123", "int"),
            ("-5", "int"),
            ("01", "embstr"),
            ("hello", "embstr"),
            (&long[..44], "embstr"),
            (&long[..], "raw"),
        ];
        for (v, want) in cases {
            assert_eq!(super::encoding(v.as_bytes()), want, "{v}");
        }
    }
}
