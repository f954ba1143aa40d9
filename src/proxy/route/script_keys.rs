//! Where a keyless script runs: the keys its code names as string literals.
//!
//! A script sent with no declared keys (`EVAL body 0`, `FCALL f 0`) may
//! still read and write keys, named in its code: `redis.call('GET',
//! 'user:1')`. On one Redis that works; behind a sharding proxy it works
//! only on the node that owns `user:1`. So the proxy reads the code once:
//! every `redis.call` / `redis.pcall` whose command and leading arguments
//! are string literals gives the keys at the command's key positions
//! (from the catalogue). When all of them live on one node, the script
//! runs there; otherwise (keys built at run time, or on several nodes) it
//! goes where its body or function name would live as a key, as before.
//!
//! For functions, `FUNCTION LOAD` through the proxy records each
//! registered function's literal keys ([`FunctionKeys`]), so `FCALL f 0`
//! finds them by name. The scan is a Lua tokenizer (strings with their
//! escapes, long brackets, comments), so a call inside a string or a
//! comment is not taken for one; it reads at most [`MAX_SCAN`] bytes.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;

/// Code past this many bytes is not read (it routes as before).
pub(crate) const MAX_SCAN: usize = 1 << 20;
/// Function names remembered; past it the map starts again empty.
const MAX_FUNCTIONS: usize = 10_000;
/// Literal keys kept per script or function.
const MAX_KEYS: usize = 64;

#[derive(Debug, PartialEq)]
enum Tok<'a> {
    Name(&'a [u8]),
    Str(Vec<u8>),
    Punct(u8),
    /// A number or anything else that ends a run of literal arguments.
    Other,
}

/// The literal keys `code` names, in order, at most [`MAX_KEYS`].
pub(crate) fn literal_keys(code: &[u8]) -> Vec<Bytes> {
    if code.len() > MAX_SCAN {
        return Vec::new();
    }
    keys_in(&tokens(code))
}

fn keys_in(toks: &[Tok]) -> Vec<Bytes> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i + 4 < toks.len() && keys.len() < MAX_KEYS {
        let call = matches!(
            (&toks[i], &toks[i + 1], &toks[i + 2], &toks[i + 3]),
            (
                Tok::Name(b"redis"),
                Tok::Punct(b'.'),
                Tok::Name(b"call" | b"pcall"),
                Tok::Punct(b'(')
            )
        );
        if !call {
            i += 1;
            continue;
        }
        let mut args: Vec<Bytes> = Vec::new();
        let mut j = i + 4;
        while let Some(Tok::Str(s)) = toks.get(j) {
            args.push(Bytes::copy_from_slice(s));
            match toks.get(j + 1) {
                Some(Tok::Punct(b',')) => j += 2,
                _ => break,
            }
        }
        if let Some(spec) = args.first().and_then(|n| crate::catalogue::lookup(n)) {
            if let Ok(positions) = spec.key_positions(&args) {
                keys.extend(positions.into_iter().filter_map(|p| args.get(p).cloned()));
            }
        }
        i = j.max(i + 4);
    }
    keys.truncate(MAX_KEYS);
    keys
}

/// Each function a library registers, with the literal keys of its part of
/// the code (from its `register_function` to the next) and of the code
/// before the first (helpers the functions share).
pub(crate) fn library_functions(code: &[u8]) -> Vec<(Bytes, Vec<Bytes>)> {
    if code.len() > MAX_SCAN {
        return Vec::new();
    }
    let toks = tokens(code);
    let starts: Vec<usize> = (0..toks.len())
        .filter(|&i| toks[i] == Tok::Name(b"register_function"))
        .collect();
    let Some(&first) = starts.first() else {
        return Vec::new();
    };
    let shared = keys_in(&toks[..first]);
    let mut out = Vec::new();
    for (n, &s) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(toks.len());
        let Some(name) = registered_name(&toks[s..end]) else {
            continue;
        };
        let mut keys = shared.clone();
        keys.extend(keys_in(&toks[s..end]));
        keys.truncate(MAX_KEYS);
        out.push((name, keys));
    }
    out
}

/// `register_function('name', …)` or `register_function{function_name = 'name', …}`.
fn registered_name(toks: &[Tok]) -> Option<Bytes> {
    match (toks.get(1), toks.get(2)) {
        (Some(Tok::Punct(b'(')), Some(Tok::Str(s))) => Some(Bytes::copy_from_slice(s)),
        (Some(Tok::Punct(b'(' | b'{')), _) => toks.windows(3).find_map(|w| match w {
            [Tok::Name(b"function_name"), Tok::Punct(b'='), Tok::Str(s)] => {
                Some(Bytes::copy_from_slice(s))
            }
            _ => None,
        }),
        _ => None,
    }
}

/// The literal keys of each function loaded through this proxy, by name.
#[derive(Default)]
pub(crate) struct FunctionKeys {
    /// A std mutex, never held across `.await`.
    inner: Mutex<HashMap<Bytes, Vec<Bytes>>>,
}

impl FunctionKeys {
    /// After a `FUNCTION LOAD` every node accepted.
    pub(crate) fn learn(&self, code: &[u8]) {
        let found = library_functions(code);
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() + found.len() > MAX_FUNCTIONS {
            map.clear();
        }
        for (name, keys) in found {
            map.insert(name, keys);
        }
    }

    /// `FUNCTION FLUSH`.
    pub(crate) fn clear(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    pub(crate) fn keys(&self, name: &[u8]) -> Vec<Bytes> {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.get(name).cloned().unwrap_or_default()
    }
}

/// Lua 5.1's tokens, as far as finding calls needs.
fn tokens(code: &[u8]) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if code[i..].starts_with(b"--") {
            i += 2;
            match long_bracket(code, i) {
                Some((_, end)) => i = end,
                None => {
                    while i < code.len() && code[i] != b'\n' {
                        i += 1;
                    }
                }
            }
        } else if c == b'\'' || c == b'"' {
            let (s, end) = short_string(code, i);
            out.push(Tok::Str(s));
            i = end;
        } else if c == b'[' {
            match long_bracket(code, i) {
                Some((s, end)) => {
                    out.push(Tok::Str(s));
                    i = end;
                }
                None => {
                    out.push(Tok::Punct(c));
                    i += 1;
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < code.len() && (code[i].is_ascii_alphanumeric() || code[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Name(&code[start..i]));
        } else if c.is_ascii_digit() {
            while i < code.len() && (code[i].is_ascii_alphanumeric() || code[i] == b'.') {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c == b'.' && code.get(i + 1) == Some(&b'.') {
            while i < code.len() && code[i] == b'.' {
                i += 1;
            }
            out.push(Tok::Other);
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// The string that starts with the quote at `start`, unescaped, and the
/// index after it (an unterminated one runs to the end of its line).
fn short_string(code: &[u8], start: usize) -> (Vec<u8>, usize) {
    let quote = code[start];
    let mut s = Vec::new();
    let mut i = start + 1;
    while i < code.len() {
        let c = code[i];
        if c == quote {
            return (s, i + 1);
        }
        if c == b'\n' {
            return (s, i);
        }
        if c != b'\\' || i + 1 >= code.len() {
            s.push(c);
            i += 1;
            continue;
        }
        let e = code[i + 1];
        i += 2;
        match e {
            b'n' => s.push(b'\n'),
            b't' => s.push(b'\t'),
            b'r' => s.push(b'\r'),
            b'a' => s.push(7),
            b'b' => s.push(8),
            b'f' => s.push(12),
            b'v' => s.push(11),
            b'0'..=b'9' => {
                let mut v = (e - b'0') as u32;
                for _ in 0..2 {
                    match code.get(i) {
                        Some(d @ b'0'..=b'9') => {
                            v = v * 10 + (d - b'0') as u32;
                            i += 1;
                        }
                        _ => break,
                    }
                }
                s.push(v.min(255) as u8);
            }
            other => s.push(other),
        }
    }
    (s, i)
}

/// A long bracket `[==[ … ]==]` opening at `start`: its text (without a
/// first newline) and the index after it; None if `start` opens none.
fn long_bracket(code: &[u8], start: usize) -> Option<(Vec<u8>, usize)> {
    if code.get(start) != Some(&b'[') {
        return None;
    }
    let mut i = start + 1;
    while code.get(i) == Some(&b'=') {
        i += 1;
    }
    if code.get(i) != Some(&b'[') {
        return None;
    }
    let level = i - start - 1;
    let mut body = i + 1;
    if code.get(body) == Some(&b'\r') {
        body += 1;
    }
    if code.get(body) == Some(&b'\n') {
        body += 1;
    }
    let mut close = Vec::with_capacity(level + 2);
    close.push(b']');
    close.extend(std::iter::repeat_n(b'=', level));
    close.push(b']');
    match code[body..].windows(close.len()).position(|w| w == close) {
        Some(p) => Some((code[body..body + p].to_vec(), body + p + close.len())),
        None => Some((code[body..].to_vec(), code.len())),
    }
}

#[cfg(test)]
#[path = "script_keys_tests.rs"]
mod tests;
