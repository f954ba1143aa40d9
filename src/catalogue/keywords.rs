//! Keys found by keyword rather than by position: SORT's `STORE` destination
//! and the keys its `BY`/`GET` patterns reach, GEORADIUS's `STORE`/`STOREDIST`,
//! and the stream keys after XREAD's and XREADGROUP's `STREAMS`.
//!
//! Called by [`super::command::CommandSpec::key_positions`]. Pure: scans the
//! arguments the way Redis's own key finders do (`sortGetKeys`,
//! `georadiusGetKeys`, `xreadGetKeys`), and refuses, with a clear error, what
//! cannot be routed to one node. Never validates the rest of the syntax: the
//! node does, with its own errors.

use bytes::Bytes;

use crate::resp::eq_ignore_case;

/// Which keyword scan finds a command's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keywords {
    /// SORT / SORT_RO: the key at 1, the last `STORE` destination, and each
    /// `BY`/`GET` pattern that forms keys. Such a pattern stands for the keys
    /// it forms: they all carry its hash tag, so the ring places the pattern
    /// where it places them, which is all routing (and a migration's
    /// moving-key checks) needs of a key.
    Sort,
    /// GEORADIUS[BYMEMBER]: the key at 1 and the last `STORE`/`STOREDIST`
    /// destination among the options, which start at `options_at`.
    GeoRadius { options_at: u8 },
    /// XREAD / XREADGROUP: the first half of what follows `STREAMS` (with
    /// `BLOCK`, routed to a pinned connection: see `proxy::blocking`).
    Streams,
}

/// True when an XREAD / XREADGROUP carries `BLOCK` before `STREAMS`.
pub fn is_blocking_stream_read(args: &[Bytes]) -> bool {
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        if is(a, "block") {
            return true;
        } else if is(a, "count") {
            i += 2;
        } else if is(a, "group") {
            i += 3;
        } else if is(a, "noack") {
            i += 1;
        } else {
            return false;
        }
    }
    false
}

impl Keywords {
    /// Positions of the keys of `name` (the command) in `args`.
    pub(crate) fn positions(self, name: &str, args: &[Bytes]) -> Result<Vec<usize>, String> {
        match self {
            Keywords::Sort => sort(args),
            Keywords::GeoRadius { options_at } => {
                let mut pos = vec![1];
                let mut dest = None;
                let mut i = options_at as usize;
                while i + 1 < args.len() {
                    if is(&args[i], "store") || is(&args[i], "storedist") {
                        // The last one given is the one Redis uses.
                        dest = Some(i + 1);
                        i += 1;
                    }
                    i += 1;
                }
                pos.extend(dest);
                Ok(pos)
            }
            Keywords::Streams => streams(name, args),
        }
    }
}

fn is(arg: &[u8], word: &str) -> bool {
    eq_ignore_case(arg, word.as_bytes())
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern …] [ASC|DESC]
/// [ALPHA] [STORE destination].
fn sort(args: &[Bytes]) -> Result<Vec<usize>, String> {
    let mut pos = vec![1];
    let mut dest = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "limit") {
            i += 3;
        } else if (is(a, "by") || is(a, "get")) && i + 1 < args.len() {
            let option = if is(a, "by") { "BY" } else { "GET" };
            if forms_keys(&args[i + 1], option == "GET")? {
                pos.push(i + 1);
            }
            i += 2;
        } else if is(a, "store") && i + 1 < args.len() {
            dest = Some(i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    pos.extend(dest);
    Ok(pos)
}

/// Whether a SORT pattern reads keys that must share the sorted key's node:
/// `Ok(false)` when it reads none (no `*`: BY sorts nothing, GET returns nil;
/// `GET #` returns the element), `Ok(true)` when every key it forms carries
/// the hash tag written before its `*` (the pattern itself then places them:
/// `{user}:*->name`), and an error when the formed keys may be on any node —
/// Redis Cluster refuses those too.
fn forms_keys(pattern: &[u8], is_get: bool) -> Result<bool, String> {
    if is_get && pattern == b"#" {
        return Ok(false);
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(false);
    };
    let head = &pattern[..star];
    let fixed_tag = head.iter().position(|&b| b == b'{').is_some_and(|open| {
        // The ring's rule: the first `}` after the first `{`, non-empty inside.
        head[open + 1..]
            .iter()
            .position(|&b| b == b'}')
            .is_some_and(|len| len > 0)
    });
    if fixed_tag {
        return Ok(true);
    }
    Err(format!(
        "ERR {} option of SORT denied by shardis when keys formed by the pattern may be on different nodes: put a {{hash tag}} before the '*' that keeps them with the sorted key",
        if is_get { "GET" } else { "BY" }
    ))
}

/// XREAD [COUNT n] [BLOCK ms] STREAMS key … id …; XREADGROUP GROUP g c
/// [COUNT n] [BLOCK ms] [NOACK] STREAMS key … id …
fn streams(name: &str, args: &[Bytes]) -> Result<Vec<usize>, String> {
    let mut i = 1;
    let mut at = None;
    while i < args.len() {
        let a = &args[i];
        if is(a, "count") || is(a, "block") {
            i += 2;
        } else if is(a, "group") {
            i += 3;
        } else if is(a, "noack") {
            i += 1;
        } else if is(a, "streams") {
            at = Some(i);
            break;
        } else {
            break;
        }
    }
    let Some(at) = at else {
        return Err("ERR syntax error".into());
    };
    let rest = args.len() - at - 1;
    if rest == 0 || !rest.is_multiple_of(2) {
        let symbol = if name == "xreadgroup" { '>' } else { '$' };
        return Err(format!(
            "ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{symbol}' must be specified."
        ));
    }
    Ok((at + 1..at + 1 + rest / 2).collect())
}
