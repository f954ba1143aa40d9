//! `cjson`: lua-cjson 2.1's `encode` and `decode` as Redis bundles them
//! (`%.14g` numbers, `/` escaped, empty tables as `{}`, sparse arrays
//! refused, `cjson.null` for JSON null), and its error texts.

use mlua::{LightUserData, Lua, Table, Value};

const MAX_DEPTH: usize = 1000;

/// lua-cjson's settings a script may change (they last, as in Redis, for
/// the life of the Lua state): nesting limits and NaN/Inf encoding.
#[derive(Clone, Copy)]
struct Settings {
    encode_max_depth: usize,
    decode_max_depth: usize,
    encode_invalid_numbers: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            encode_max_depth: MAX_DEPTH,
            decode_max_depth: MAX_DEPTH,
            encode_invalid_numbers: false,
        }
    }
}

fn settings(lua: &Lua) -> Settings {
    lua.app_data_ref::<Settings>()
        .map(|s| *s)
        .unwrap_or_default()
}

/// A depth setter: `cjson.encode_max_depth([n])` sets n (1 to 2^31-1)
/// when given and returns the value in force.
fn depth_setting(
    lua: &Lua,
    v: Option<Value>,
    name: &str,
    field: fn(&mut Settings) -> &mut usize,
) -> mlua::Result<usize> {
    let mut s = settings(lua);
    match v {
        None | Some(Value::Nil) => {}
        Some(Value::Integer(n)) if n >= 1 && n <= i32::MAX as i64 => *field(&mut s) = n as usize,
        Some(Value::Number(n)) if n >= 1.0 && n <= i32::MAX as f64 => *field(&mut s) = n as usize,
        Some(_) => {
            return Err(err(format!(
                "bad argument #1 to '{name}' (expected integer between 1 and 2147483647)"
            )))
        }
    }
    lua.set_app_data(s);
    Ok(*field(&mut s))
}

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

/// Lua's `%.14g`.
fn number_text(lua: &Lua, n: f64) -> mlua::Result<Vec<u8>> {
    Ok(lua
        .coerce_string(Value::Number(n))?
        .map(|s| s.as_bytes().to_vec())
        .unwrap_or_default())
}

fn escape(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// lua-cjson's `lua_array_length`: the array's length, or None for an
/// object.
fn array_length(t: &Table) -> mlua::Result<Option<usize>> {
    let (mut max, mut items) = (0usize, 0usize);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let k = match k {
            Value::Integer(i) if i >= 1 => i as f64,
            Value::Number(n) if n >= 1.0 && n.floor() == n => n,
            _ => return Ok(None),
        };
        max = max.max(k as usize);
        items += 1;
    }
    if max > 10 && max > items * 2 {
        return Err(err("Cannot serialise table: excessively sparse array"));
    }
    Ok(if max > 0 { Some(max) } else { None })
}

fn encode_value(lua: &Lua, out: &mut Vec<u8>, v: &Value, depth: usize) -> mlua::Result<()> {
    let max_depth = settings(lua).encode_max_depth;
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(&number_text(lua, *i as f64)?),
        Value::Number(n) if !n.is_finite() && !settings(lua).encode_invalid_numbers => {
            return Err(err("Cannot serialise number: must not be NaN or Inf"))
        }
        Value::Number(n) => out.extend_from_slice(&number_text(lua, *n)?),
        Value::String(s) => escape(out, &s.as_bytes()),
        Value::Table(t) => {
            if depth + 1 > max_depth {
                return Err(err(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                )));
            }
            match array_length(t)? {
                Some(n) => {
                    out.push(b'[');
                    for i in 1..=n {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode_value(lua, out, &t.raw_get::<Value>(i)?, depth + 1)?;
                    }
                    out.push(b']');
                }
                None => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, v) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => escape(out, &s.as_bytes()),
                            Value::Integer(_) | Value::Number(_) => {
                                let n = match k {
                                    Value::Integer(i) => i as f64,
                                    Value::Number(n) => n,
                                    _ => 0.0,
                                };
                                out.push(b'"');
                                out.extend_from_slice(&number_text(lua, n)?);
                                out.push(b'"');
                            }
                            k => {
                                return Err(err(format!(
                                    "Cannot serialise {}: table key must be a number or string",
                                    k.type_name()
                                )))
                            }
                        }
                        out.push(b':');
                        encode_value(lua, out, &v, depth + 1)?;
                    }
                    out.push(b'}');
                }
            }
        }
        v => {
            return Err(err(format!(
                "Cannot serialise {}: type not supported",
                v.type_name()
            )))
        }
    }
    Ok(())
}

/// A JSON reader with lua-cjson's error texts.
struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| b" \t\r\n".contains(c)) {
            self.i += 1;
        }
    }

    /// The name lua-cjson gives what is at the cursor.
    fn found(&self) -> &'static str {
        match self.s.get(self.i) {
            None => "T_END",
            Some(b'{') => "T_OBJ_BEGIN",
            Some(b'}') => "T_OBJ_END",
            Some(b'[') => "T_ARR_BEGIN",
            Some(b']') => "T_ARR_END",
            Some(b'"') => "T_STRING",
            Some(b'-' | b'0'..=b'9') => "T_NUMBER",
            Some(b't') if self.s[self.i..].starts_with(b"true") => "T_BOOLEAN",
            Some(b'f') if self.s[self.i..].starts_with(b"false") => "T_BOOLEAN",
            Some(b'n') if self.s[self.i..].starts_with(b"null") => "T_NULL",
            Some(b':') => "T_COLON",
            Some(b',') => "T_COMMA",
            _ => "invalid token",
        }
    }

    fn expected(&self, what: &str) -> mlua::Error {
        err(format!(
            "Expected {what} but found {} at character {}",
            self.found(),
            self.i + 1
        ))
    }

    fn string(&mut self) -> mlua::Result<Vec<u8>> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let at = self.i + 1;
            let bad = |msg: &str| err(format!("Expected value but found {msg} at character {at}"));
            let c = *self
                .s
                .get(self.i)
                .ok_or_else(|| bad("unexpected end of string"))?;
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let e = *self
                        .s
                        .get(self.i)
                        .ok_or_else(|| bad("invalid escape code"))?;
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let hex = |r: &mut Self| -> Option<u32> {
                                let h = r.s.get(r.i..r.i + 4)?;
                                r.i += 4;
                                u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
                            };
                            let mut cp =
                                hex(self).ok_or_else(|| bad("invalid unicode escape code"))?;
                            if (0xD800..0xDC00).contains(&cp)
                                && self.s.get(self.i..self.i + 2) == Some(b"\\u")
                            {
                                self.i += 2;
                                let lo =
                                    hex(self).ok_or_else(|| bad("invalid unicode escape code"))?;
                                cp = 0x10000
                                    + ((cp - 0xD800) << 10)
                                    + (lo.wrapping_sub(0xDC00) & 0x3FF);
                            }
                            let ch = char::from_u32(cp)
                                .ok_or_else(|| bad("invalid unicode escape code"))?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(bad("invalid escape code")),
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> mlua::Result<Value> {
        self.ws();
        let Some(&c) = self.s.get(self.i) else {
            return Err(self.expected("value"));
        };
        let max_depth = settings(lua).decode_max_depth;
        let nested = |r: &Self| {
            if depth + 1 > max_depth {
                Err(err(format!(
                    "Found too many nested data structures ({}) at character {}",
                    depth + 1,
                    r.i + 1
                )))
            } else {
                Ok(())
            }
        };
        match c {
            b'"' => Ok(Value::String(lua.create_string(self.string()?)?)),
            b'{' => {
                nested(self)?;
                self.i += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return Err(self.expected("object key string"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return Err(self.expected("colon"));
                    }
                    self.i += 1;
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(lua.create_string(k)?, v)?;
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.expected("comma or object end")),
                    }
                }
            }
            b'[' => {
                nested(self)?;
                self.i += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Value::Table(t));
                }
                let mut n = 0;
                loop {
                    n += 1;
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(n, v)?;
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.expected("comma or array end")),
                    }
                }
            }
            b't' if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(Value::LightUserData(LightUserData(std::ptr::null_mut())))
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| b"+-.eE0123456789".contains(c))
                {
                    self.i += 1;
                }
                std::str::from_utf8(&self.s[start..self.i])
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .map(Value::Number)
                    .ok_or_else(|| {
                        err(format!(
                            "Expected value but found invalid number at character {}",
                            start + 1
                        ))
                    })
            }
            _ => Err(self.expected("value")),
        }
    }
}

pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: mlua::MultiValue| {
            if v.len() != 1 {
                return Err(err("bad argument #1 to 'encode' (expected 1 argument)"));
            }
            let mut out = Vec::new();
            encode_value(lua, &mut out, &v[0], 0)?;
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, s: Value| {
            let text = super::string(lua, &s, "decode", 1)?;
            let mut r = Reader { s: &text, i: 0 };
            let v = r.value(lua, 0)?;
            r.ws();
            if r.i < text.len() {
                return Err(r.expected("the end"));
            }
            Ok(v)
        })?,
    )?;
    t.set(
        "encode_max_depth",
        lua.create_function(|lua, v: Option<Value>| {
            depth_setting(lua, v, "encode_max_depth", |s| &mut s.encode_max_depth)
        })?,
    )?;
    t.set(
        "decode_max_depth",
        lua.create_function(|lua, v: Option<Value>| {
            depth_setting(lua, v, "decode_max_depth", |s| &mut s.decode_max_depth)
        })?,
    )?;
    t.set(
        "encode_invalid_numbers",
        lua.create_function(|lua, v: Option<Value>| {
            let mut s = settings(lua);
            match v {
                None | Some(Value::Nil) => {}
                Some(Value::Boolean(b)) => s.encode_invalid_numbers = b,
                Some(Value::String(m)) => {
                    s.encode_invalid_numbers = matches!(&m.as_bytes()[..], b"on" | b"null")
                }
                Some(_) => {
                    return Err(err(
                        "bad argument #1 to 'encode_invalid_numbers' (invalid option)",
                    ))
                }
            }
            lua.set_app_data(s);
            Ok(s.encode_invalid_numbers)
        })?,
    )?;
    // Other settings of lua-cjson; the node keeps their defaults.
    for name in [
        "encode_keep_buffer",
        "encode_number_precision",
        "decode_invalid_numbers",
        "encode_sparse_array",
    ] {
        t.set(name, lua.create_function(|_, v: mlua::MultiValue| Ok(v))?)?;
    }
    t.set(
        "null",
        Value::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}
