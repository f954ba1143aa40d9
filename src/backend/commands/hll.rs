//! HyperLogLog commands: PFADD, PFCOUNT (one key, or the union of several)
//! and PFMERGE, over string values in Redis's own representation (see
//! `hll_repr.rs`), so GET, DUMP and a redis-server agree on the bytes.
//! PFDEBUG and PFSELFTEST are not provided.

use super::bits::{string_value, with_string};
use super::hll_repr::{self as repr, HllError, REGISTERS};
use super::{CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::keyspace::entry::Entry;
use crate::resp::encode;
use std::sync::atomic::Ordering::Relaxed;

fn hll_error(e: HllError) -> CmdError {
    CmdError::Other(match e {
        HllError::NotHll => "WRONGTYPE Key is not a valid HyperLogLog string value.".into(),
        HllError::Corrupt => "INVALIDOBJ Corrupted HLL object detected".into(),
    })
}

/// The HLL at `key` (None when absent), checked.
fn load(ctx: &Ctx, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let v = with_string(ctx, key, |v| v.map(<[u8]>::to_vec))?;
    if let Some(v) = &v {
        repr::check(v).map_err(hll_error)?;
    }
    Ok(v)
}

/// Stores `v` at `key`, keeping an existing key's TTL.
fn store(ctx: &Ctx, key: &[u8], v: &[u8]) {
    let store = &ctx.node.store;
    let h = store.hash(key);
    let mut s = store.lock(h, ctx.now);
    if s.update(h, key, |e| e.set_value(v)).is_none() {
        s.insert(h, Entry::new(key, v, 0, ctx.now));
    }
}

fn sparse_max(ctx: &Ctx) -> usize {
    ctx.node.settings.hll_sparse_max_bytes.load(Relaxed) as usize
}

/// PFADD key [element ...]
pub(crate) fn pfadd(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (mut v, mut updated) = match load(ctx, args[1])? {
        Some(v) => (v, false),
        None => (repr::new_sparse(), true),
    };
    let max = sparse_max(ctx);
    for ele in &args[2..] {
        let (index, count) = repr::pat_len(ele);
        updated |= repr::set(&mut v, index, count, max).map_err(hll_error)?;
    }
    if updated {
        repr::invalidate(&mut v);
        store(ctx, args[1], &v);
    }
    encode::integer(ctx.out, updated as i64);
    Ok(())
}

/// PFCOUNT key [key ...]
pub(crate) fn pfcount(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len() > 2 {
        let mut max = [0u8; REGISTERS];
        for key in &args[1..] {
            if let Some(v) = load(ctx, key)? {
                repr::merge_into(&mut max, &v).map_err(hll_error)?;
            }
        }
        encode::integer(ctx.out, repr::count(&max) as i64);
        return Ok(());
    }
    let Some(v) = load(ctx, args[1])? else {
        encode::integer(ctx.out, 0);
        return Ok(());
    };
    let card = match repr::cached(&v) {
        Some(card) => card,
        None => {
            let card = repr::count(&repr::registers(&v).map_err(hll_error)?);
            // Redis writes the estimate back into the value's header.
            let store = &ctx.node.store;
            let h = store.hash(args[1]);
            store.lock(h, ctx.now).update(h, args[1], |e| {
                if let Ok(cur) = string_value(e) {
                    if cur.len() >= repr::HDR {
                        e.write_at(8, &card.to_le_bytes());
                    }
                }
            });
            card
        }
    };
    encode::integer(ctx.out, card as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey ...]
pub(crate) fn pfmerge(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut max = [0u8; REGISTERS];
    let mut use_dense = false;
    // The destination takes part in the union, as in Redis.
    for key in &args[1..] {
        if let Some(v) = load(ctx, key)? {
            use_dense |= v[4] == repr::DENSE;
            repr::merge_into(&mut max, &v).map_err(hll_error)?;
        }
    }
    let mut dest = load(ctx, args[1])?.unwrap_or_else(repr::new_sparse);
    if use_dense {
        repr::to_dense(&mut dest).map_err(hll_error)?;
    }
    let limit = sparse_max(ctx);
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            repr::set(&mut dest, i, m, limit).map_err(hll_error)?;
        }
    }
    repr::invalidate(&mut dest);
    store(ctx, args[1], &dest);
    ctx.ok();
    Ok(())
}
