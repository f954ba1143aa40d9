//! Redis's conversion rules between replies and Lua values, both ways.
//!
//! A command's reply (RESP2 or RESP3, as `redis.setresp` chose) becomes a
//! Lua value for `redis.call`: integers numbers, bulk strings strings, a
//! nil bulk or array `false` (RESP3 null: `nil`), arrays tables, status
//! `{ok=…}`, errors `{err=…}`, and RESP3's map/set/double/boolean/big
//! number/verbatim tables. A script's return value becomes the reply:
//! numbers truncated to integers, arrays up to the first nil, the same
//! special tables back.

use crate::resp::encode;
use bytes::BytesMut;
use mlua::{Lua, Table, Value};

/// How deep a returned table may nest before the reply says so.
const MAX_DEPTH: usize = 1000;

/// The `err` text Redis keeps for an error reply line (without `-`): the
/// code, a blank, the message, no line breaks at either end.
pub(crate) fn error_text(line: &[u8]) -> Vec<u8> {
    let (code, msg): (&[u8], &[u8]) = match line.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", line),
    };
    let mut out = code.to_vec();
    out.push(b' ');
    out.extend_from_slice(trim_line_breaks(msg));
    out
}

/// A `{name=value}` table.
fn tagged(lua: &Lua, name: &str, v: impl mlua::IntoLua) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(name, v)?;
    Ok(Value::Table(t))
}

/// An `{err=…}` table for an error reply line.
pub(crate) fn error_table(lua: &Lua, line: &[u8]) -> mlua::Result<Value> {
    tagged(lua, "err", lua.create_string(error_text(line))?)
}

/// Reads one reply from `buf` at `*pos` as a Lua value.
pub(crate) fn reply_to_lua(lua: &Lua, buf: &[u8], pos: &mut usize) -> mlua::Result<Value> {
    let bad = || mlua::Error::runtime("malformed reply");
    let start = *pos;
    let end = start + memchr::memchr(b'\n', buf.get(start..).ok_or_else(bad)?).ok_or_else(bad)?;
    let line = &buf[start + 1..end.saturating_sub(1).max(start + 1)];
    *pos = end + 1;
    let int = || -> mlua::Result<i64> { crate::resp::parse_i64(line).ok_or_else(bad) };
    let bulk = |pos: &mut usize| -> mlua::Result<Option<&[u8]>> {
        let n = int()?;
        if n < 0 {
            return Ok(None);
        }
        let s = buf.get(*pos..*pos + n as usize).ok_or_else(bad)?;
        *pos += n as usize + 2;
        Ok(Some(s))
    };
    Ok(match buf[start] {
        b'+' => tagged(lua, "ok", lua.create_string(line)?)?,
        b'-' => error_table(lua, &buf[start..end.saturating_sub(1)])?,
        b':' => Value::Number(int()? as f64),
        b'$' => match bulk(pos)? {
            Some(s) => Value::String(lua.create_string(s)?),
            None => Value::Boolean(false),
        },
        b'=' => match bulk(pos)? {
            Some(s) if s.len() >= 4 => {
                let t = lua.create_table()?;
                t.raw_set("format", lua.create_string(&s[..3])?)?;
                t.raw_set("string", lua.create_string(&s[4..])?)?;
                tagged(lua, "verbatim_string", t)?
            }
            _ => Value::Boolean(false),
        },
        b'*' | b'>' => {
            let n = int()?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table()?;
            for i in 0..n as usize {
                let v = reply_to_lua(lua, buf, pos)?;
                t.raw_set(i + 1, v)?;
            }
            Value::Table(t)
        }
        b'%' | b'~' => {
            let map = buf[start] == b'%';
            let t = lua.create_table()?;
            for _ in 0..int()?.max(0) {
                let k = reply_to_lua(lua, buf, pos)?;
                let v = if map {
                    reply_to_lua(lua, buf, pos)?
                } else {
                    Value::Boolean(true)
                };
                t.raw_set(k, v)?;
            }
            tagged(lua, if map { "map" } else { "set" }, t)?
        }
        b'_' => Value::Nil,
        b'#' => Value::Boolean(line == b"t"),
        b',' => {
            let s = std::str::from_utf8(line).map_err(|_| bad())?;
            let d = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                s => s.parse().map_err(|_| bad())?,
            };
            tagged(lua, "double", d)?
        }
        b'(' => tagged(lua, "big_number", lua.create_string(line)?)?,
        _ => return Err(bad()),
    })
}

/// Replaces line breaks with blanks, as Redis does in status and error lines.
fn one_line(s: &[u8]) -> Vec<u8> {
    s.iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

/// Writes `-<text>` after trimming line breaks at both ends.
pub(crate) fn write_error(out: &mut BytesMut, text: &[u8]) {
    out.extend_from_slice(b"-");
    out.extend_from_slice(&one_line(trim_line_breaks(text)));
    out.extend_from_slice(b"\r\n");
}

/// `m` without the `\r` and `\n` bytes at either end.
fn trim_line_breaks(m: &[u8]) -> &[u8] {
    let s = m
        .iter()
        .position(|c| !b"\r\n".contains(c))
        .unwrap_or(m.len());
    let e = m
        .iter()
        .rposition(|c| !b"\r\n".contains(c))
        .map_or(s, |e| e + 1);
    &m[s..e.max(s)]
}

/// A string field of a table (no metamethods), if it is a string.
fn string_field(t: &Table, name: &str) -> Option<mlua::LuaString> {
    match t.raw_get::<Value>(name) {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// Writes a script's return value as the reply to a client speaking
/// `proto`; `resp` is the script's own `redis.setresp` choice, which
/// decides how booleans come out.
pub(crate) fn lua_to_reply(out: &mut BytesMut, v: &Value, proto: u8, resp: u8, depth: usize) {
    match v {
        Value::String(s) => encode::bulk(out, &s.as_bytes()),
        Value::Boolean(b) => match (resp, b) {
            (2, true) => encode::integer(out, 1),
            (2, false) => encode::null(out, proto),
            (_, b) if proto >= 3 => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            (_, b) => encode::integer(out, *b as i64),
        },
        Value::Integer(i) => encode::integer(out, *i),
        Value::Number(n) => encode::integer(out, *n as i64),
        Value::Table(t) if depth >= MAX_DEPTH => {
            let _ = t;
            write_error(out, b"ERR reached lua stack limit");
        }
        Value::Table(t) => table_to_reply(out, t, proto, resp, depth),
        _ => encode::null(out, proto),
    }
}

fn table_to_reply(out: &mut BytesMut, t: &Table, proto: u8, resp: u8, depth: usize) {
    if let Some(e) = string_field(t, "err") {
        return write_error(out, &e.as_bytes());
    }
    if let Some(s) = string_field(t, "ok") {
        out.extend_from_slice(b"+");
        out.extend_from_slice(&one_line(&s.as_bytes()));
        out.extend_from_slice(b"\r\n");
        return;
    }
    let double = match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => Some(d),
        Ok(Value::Integer(i)) => Some(i as f64),
        _ => None,
    };
    if let Some(d) = double {
        return crate::backend::commands::util::double(out, d, proto);
    }
    if let Some(s) = string_field(t, "big_number") {
        let s = one_line(&s.as_bytes());
        if proto >= 3 {
            out.extend_from_slice(b"(");
            out.extend_from_slice(&s);
            out.extend_from_slice(b"\r\n");
        } else {
            encode::bulk(out, &s);
        }
        return;
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        encode::map_len(out, pairs.len(), proto);
        for (k, v) in &pairs {
            lua_to_reply(out, k, proto, resp, depth + 1);
            lua_to_reply(out, v, proto, resp, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let keys: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(|r| r.ok().map(|(k, _)| k))
            .collect();
        encode::set_len(out, keys.len(), proto);
        for k in &keys {
            lua_to_reply(out, k, proto, resp, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Some(f), Some(s)) = (string_field(&v, "format"), string_field(&v, "string")) {
            let (f, s) = (f.as_bytes(), s.as_bytes());
            if proto >= 3 {
                let mut body = f.to_vec();
                body.push(b':');
                body.extend_from_slice(&s);
                out.extend_from_slice(format!("={}\r\n", body.len()).as_bytes());
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\r\n");
            } else {
                encode::bulk(out, &s);
            }
            return;
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    encode::array_len(out, items.len());
    for v in &items {
        lua_to_reply(out, v, proto, resp, depth + 1);
    }
}
