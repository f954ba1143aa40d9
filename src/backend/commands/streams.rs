//! Stream commands: XADD, XLEN (in `elements.rs`), XRANGE, XREVRANGE, XDEL, XTRIM and
//! XSETID, with Redis 7.0's ID parsing, argument checks, error texts and
//! reply shapes; the ID parsers and the entry replies the other stream
//! families (`streams_read.rs`, `streams_group.rs`, `streams_info.rs`)
//! share.

use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::stream::{Stream, StreamId, Trim};
use crate::backend::value::Elem;
use crate::resp::{encode, eq_ignore_case};
use bytes::BytesMut;

/// `ERR Invalid stream ID specified as stream command argument`
pub(crate) fn invalid_id() -> CmdError {
    CmdError::err("Invalid stream ID specified as stream command argument")
}

/// Redis's `string2ull`: a strict integer, or what `strtoull` accepts.
fn parse_u64(b: &[u8]) -> Option<u64> {
    if let Some(v) = crate::resp::parse_i64(b) {
        return (v >= 0).then_some(v as u64);
    }
    let s = std::str::from_utf8(b).ok()?;
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Redis's `streamGenericParseIDOrReply`: `ms-seq`, `ms` (seq =
/// `missing_seq`), and unless `strict` also `-` and `+`. With `auto_seq`,
/// `ms-*` parses too and the second value says whether seq was given.
pub(crate) fn parse_id_full(
    b: &[u8],
    missing_seq: u64,
    strict: bool,
    auto_seq: bool,
) -> Result<(StreamId, bool), CmdError> {
    if b.len() > 127 {
        return Err(invalid_id());
    }
    let b = b.split(|&c| c == 0).next().unwrap_or(b);
    match b {
        b"-" | b"+" if strict => return Err(invalid_id()),
        b"-" => return Ok((StreamId::MIN, true)),
        b"+" => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    let (ms, seq) = match b.iter().position(|&c| c == b'-') {
        Some(at) => (&b[..at], Some(&b[at + 1..])),
        None => (b, None),
    };
    let ms = parse_u64(ms).ok_or_else(invalid_id)?;
    match seq {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if auto_seq => Ok((StreamId::new(ms, 0), false)),
        Some(s) => Ok((
            StreamId::new(ms, parse_u64(s).ok_or_else(invalid_id)?),
            true,
        )),
    }
}

/// An ID where `-` and `+` are allowed.
pub(crate) fn parse_id(b: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    parse_id_full(b, missing_seq, false, false).map(|r| r.0)
}

/// An ID where `-` and `+` are not allowed.
pub(crate) fn parse_strict_id(b: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    parse_id_full(b, missing_seq, true, false).map(|r| r.0)
}

/// A range bound: `(id` is exclusive (`streamParseIntervalIDOrReply`).
pub(crate) fn parse_bound(b: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if b.len() > 1 && b[0] == b'(' {
        Ok((parse_strict_id(&b[1..], missing_seq)?, true))
    } else {
        Ok((parse_id(b, missing_seq)?, false))
    }
}

/// An ID as a bulk string.
pub(crate) fn bulk_id(out: &mut BytesMut, id: StreamId) {
    encode::bulk(out, id.to_string().as_bytes());
}

/// One entry: `[id, [field, value, …]]`.
pub(crate) fn write_entry(out: &mut BytesMut, id: StreamId, fields: &[Elem]) {
    encode::array_len(out, 2);
    bulk_id(out, id);
    encode::array_len(out, fields.len());
    fields.iter().for_each(|f| encode::bulk(out, f));
}

/// Entries as an array of [`write_entry`]s.
pub(crate) fn write_entries(out: &mut BytesMut, entries: &[(StreamId, Vec<Elem>)]) {
    encode::array_len(out, entries.len());
    for (id, f) in entries {
        write_entry(out, *id, f);
    }
}

/// Up to `count` (0 = all) entries from `start` to `end`, copied.
pub(crate) fn collect(
    s: &Stream,
    start: StreamId,
    end: StreamId,
    rev: bool,
    count: usize,
) -> Vec<(StreamId, Vec<Elem>)> {
    let n = if count == 0 { usize::MAX } else { count };
    s.range(start, end, rev).take(n).collect()
}

/// XADD's and XTRIM's options (`streamParseAddOrTrimArgsOrReply`).
pub(crate) struct TrimArgs {
    pub(crate) how: Trim,
    pub(crate) approx: bool,
    pub(crate) limit: u64,
    pub(crate) nomkstream: bool,
    /// XADD: the ID (None = `*`) and whether its seq was given.
    pub(crate) id: Option<(StreamId, bool)>,
    /// Where XADD's ID is.
    pub(crate) at: usize,
}

const BOTH: &str = "syntax error, MAXLEN and MINID options at the same time are not compatible";

/// Parses XADD's or XTRIM's options; `node_entries` is
/// `stream-node-max-entries`, which sets the default LIMIT of `~`.
pub(crate) fn parse_trim(
    args: &[&[u8]],
    xadd: bool,
    node_entries: usize,
) -> Result<TrimArgs, CmdError> {
    let mut a = TrimArgs {
        how: Trim::None,
        approx: false,
        limit: 0,
        nomkstream: false,
        id: None,
        at: args.len(),
    };
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args[i];
        if xadd && opt == b"*" {
            break;
        }
        let maxlen = eq_ignore_case(opt, b"maxlen");
        if (maxlen || eq_ignore_case(opt, b"minid")) && more > 0 {
            if a.how != Trim::None {
                return Err(CmdError::err(BOTH));
            }
            a.approx = false;
            let next = args[i + 1];
            if more >= 2 && (next == b"~" || next == b"=") {
                a.approx = next == b"~";
                i += 1;
            }
            a.how = if maxlen {
                let n = parse_i64(args[i + 1])?;
                if n < 0 {
                    return Err(CmdError::err("The MAXLEN argument must be >= 0."));
                }
                Trim::MaxLen(n as u64)
            } else {
                Trim::MinId(parse_strict_id(args[i + 1], 0)?)
            };
            i += 2;
        } else if eq_ignore_case(opt, b"limit") && more > 0 {
            let n = parse_i64(args[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            a.limit = n as u64;
            limit_given = true;
            i += 2;
        } else if xadd && eq_ignore_case(opt, b"nomkstream") {
            a.nomkstream = true;
            i += 1;
        } else if xadd {
            a.id = Some(parse_id_full(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    a.at = i;
    if a.limit != 0 && a.how == Trim::None {
        return Err(CmdError::err(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && a.how == Trim::None {
        return Err(CmdError::err(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !a.approx {
            return Err(CmdError::err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else {
        let limit = node_entries.saturating_mul(100) as u64;
        a.limit = match (a.approx, limit) {
            (false, _) => 0,
            (true, 1..=10_000) => limit,
            (true, _) => 10_000,
        };
    }
    Ok(a)
}

/// The ID XADD gives the next entry (`streamAppendItem`'s checks).
fn next_id(s: &Stream, given: Option<(StreamId, bool)>, now: u64) -> Result<StreamId, CmdError> {
    let smaller = || {
        CmdError::err(
            "The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    let id = match given {
        Some((id, true)) => id,
        // Redis 7.0 reports an exhausted sequence this way.
        Some((id, false)) if id.ms == s.last_id.ms => s
            .last_id
            .incr()
            .filter(|n| n.ms == id.ms)
            .ok_or_else(|| CmdError::err("Elements are too large to be stored"))?,
        Some((id, false)) => id,
        None if now > s.last_id.ms => StreamId::new(now, 0),
        None => s.last_id.incr().ok_or_else(smaller)?,
    };
    if id <= s.last_id {
        return Err(smaller());
    }
    Ok(id)
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]
pub(crate) fn xadd(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let a = parse_trim(args, true, ctx.node.thresholds().stream_node_entries)?;
    let fields = &args[(a.at + 1).min(args.len())..];
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return Err(CmdError::WrongArity("xadd".into()));
    }
    if let Some((id, true)) = a.id {
        if id.is_zero() {
            return Err(CmdError::err(
                "The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let now = ctx.now;
    let r = ctx.write::<Stream, _>(args[1], !a.nomkstream, |s, t| {
        if s.last_id == StreamId::MAX {
            return Err(CmdError::err(
                "The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        let id = next_id(s, a.id, now)?;
        s.append(id, fields, t);
        s.trim(a.how, a.approx, a.limit);
        Ok(id)
    })?;
    match r {
        None => encode::null(ctx.out, ctx.client.proto),
        Some(r) => {
            bulk_id(ctx.out, r?);
            ctx.node.store.ready.signal(args[1]);
        }
    }
    Ok(())
}

fn range(ctx: &mut Ctx, args: &[&[u8]], rev: bool) -> CmdResult {
    let (lo, hi) = if rev {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let (mut start, ex) = parse_bound(lo, 0)?;
    if ex {
        start = start
            .incr()
            .ok_or_else(|| CmdError::err("invalid start ID for the interval"))?;
    }
    let (mut end, ex) = parse_bound(hi, u64::MAX)?;
    if ex {
        end = end
            .decr()
            .ok_or_else(|| CmdError::err("invalid end ID for the interval"))?;
    }
    let mut count = -1i64;
    let mut j = 4;
    while j < args.len() {
        if eq_ignore_case(args[j], b"count") && j + 1 < args.len() {
            count = parse_i64(args[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let n = count.max(0) as usize;
    let found = ctx.read::<Stream, _>(args[1], |st| {
        (count != 0).then(|| collect(st, start, end, rev, n))
    })?;
    match found {
        None => encode::array_len(ctx.out, 0),
        Some(None) => encode::null_array(ctx.out, ctx.client.proto),
        Some(Some(v)) => write_entries(ctx.out, &v),
    }
    Ok(())
}

/// XRANGE key start end [COUNT count]
pub(crate) fn xrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range(ctx, args, false)
}

/// XREVRANGE key end start [COUNT count]
pub(crate) fn xrevrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    range(ctx, args, true)
}

/// XDEL key id [id ...]
pub(crate) fn xdel(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = ctx.write::<Stream, _>(args[1], false, |s, _| {
        let ids = args[2..]
            .iter()
            .map(|a| parse_strict_id(a, 0))
            .collect::<Result<Vec<_>, _>>()?;
        let mut n = 0;
        let mut first = false;
        for id in ids {
            if s.delete(id) {
                first |= id == s.first_id;
                s.max_deleted = s.max_deleted.max(id);
                n += 1;
            }
        }
        if n > 0 && s.len() == 0 {
            s.first_id = StreamId::MIN;
        } else if first {
            s.reset_first_id();
        }
        Ok::<_, CmdError>(n)
    })?;
    encode::integer(ctx.out, n.transpose()?.unwrap_or(0));
    Ok(())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
pub(crate) fn xtrim(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let a = parse_trim(args, false, ctx.node.thresholds().stream_node_entries)?;
    let n = ctx.write::<Stream, _>(args[1], false, |s, _| s.trim(a.how, a.approx, a.limit))?;
    encode::integer(ctx.out, n.unwrap_or(0) as i64);
    Ok(())
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
pub(crate) fn xsetid(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let id = parse_strict_id(args[2], 0)?;
    let (mut added, mut maxdel) = (None, StreamId::MIN);
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if eq_ignore_case(args[i], b"entriesadded") && more {
            let n = parse_i64(args[i + 1])?;
            if n < 0 {
                return Err(CmdError::err("entries_added must be positive"));
            }
            added = Some(n as u64);
        } else if eq_ignore_case(args[i], b"maxdeletedid") && more {
            maxdel = parse_strict_id(args[i + 1], 0)?;
            if id < maxdel {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let r = ctx.write::<Stream, _>(args[1], false, |s, _| {
        if let Some((top, _)) = s.edge(true) {
            if id < top {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if added.is_some_and(|a| (s.len() as u64) > a) {
                return Err(CmdError::err(
                    "The entries_added specified in XSETID is smaller than the target stream length",
                ));
            }
        }
        if id < s.max_deleted {
            return Err(CmdError::err(
                "The ID specified in XSETID is smaller than current max_deleted_entry_id",
            ));
        }
        s.last_id = id;
        if let Some(a) = added {
            s.entries_added = a;
        }
        if !maxdel.is_zero() {
            s.max_deleted = maxdel;
        }
        Ok(())
    })?;
    match r {
        None => return Err(CmdError::err("no such key")),
        Some(r) => r?,
    }
    ctx.ok();
    Ok(())
}
