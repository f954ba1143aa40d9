//! `cmsgpack`: lua-cmsgpack's `pack` and `unpack` as Redis bundles them
//! (integral numbers as the smallest integer, others as float32 when
//! exact, tables as arrays when their keys are 1..n, 16 levels deep).

use mlua::{Lua, MultiValue, Table, Value};

const MAX_NESTING: usize = 16;

fn err(msg: &str) -> mlua::Error {
    mlua::Error::runtime(msg.to_string())
}

fn header(out: &mut Vec<u8>, len: usize, fix: u8, fix_max: usize, b16: u8, b32: u8) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x10000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(out: &mut Vec<u8>, n: f64) {
    if n.is_finite() && (n as i64) as f64 == n {
        return encode_int(out, n as i64);
    }
    let f = n as f32;
    if f as f64 == n || (n.is_nan() && f.is_nan()) {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// lua-cmsgpack's `table_is_an_array`: every key a positive integer, as
/// many keys as the largest.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut max, mut count) = (0f64, 0f64);
    for pair in t.pairs::<Value, Value>() {
        let n = match pair?.0 {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n != (n as i64) as f64 {
            return Ok(false);
        }
        max = f64::max(max, n);
        count += 1.0;
    }
    Ok(max == count)
}

fn encode(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::String(s) => {
            let s = s.as_bytes();
            if s.len() < 32 {
                out.push(0xa0 | s.len() as u8);
            } else if s.len() <= 0xff {
                out.extend_from_slice(&[0xd9, s.len() as u8]);
            } else {
                header(out, s.len(), 0, 0, 0xda, 0xdb);
            }
            out.extend_from_slice(&s);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(out, *i),
        Value::Number(n) => encode_number(out, *n),
        Value::Table(_) if level == MAX_NESTING => out.push(0xc0),
        Value::Table(t) if is_array(t)? => {
            let n = t.raw_len();
            header(out, n, 0x90, 15, 0xdc, 0xdd);
            for i in 1..=n {
                encode(out, &t.raw_get::<Value>(i)?, level + 1)?;
            }
        }
        Value::Table(t) => {
            // Counted first, then encoded pair by pair: each Lua value held
            // takes a slot of Lua's stack, so a big map is never held whole.
            let mut n = 0;
            for pair in t.pairs::<Value, Value>() {
                pair?;
                n += 1;
            }
            header(out, n, 0x80, 15, 0xde, 0xdf);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                encode(out, &k, level + 1)?;
                encode(out, &v, level + 1)?;
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

/// A reader over a packed string.
struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let b = self
            .s
            .get(self.i..self.i.saturating_add(n))
            .ok_or_else(|| err("Missing bytes in input."))?;
        self.i += n;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let c = self.take(1)?[0];
        let num = |n: f64| Ok(Value::Number(n));
        match c {
            0x00..=0x7f => num(c as f64),
            0x80..=0x8f => self.map(lua, (c & 0x0f) as usize),
            0x90..=0x9f => self.array(lua, (c & 0x0f) as usize),
            0xa0..=0xbf => self.bytes(lua, (c & 0x1f) as usize),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xd9 => {
                let n = self.uint(1)? as usize;
                self.bytes(lua, n)
            }
            0xda => {
                let n = self.uint(2)? as usize;
                self.bytes(lua, n)
            }
            0xdb => {
                let n = self.uint(4)? as usize;
                self.bytes(lua, n)
            }
            0xca => num(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => num(f64::from_bits(self.uint(8)?)),
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(self.uint(1)? as u8 as i8 as f64),
            0xd1 => num(self.uint(2)? as u16 as i16 as f64),
            0xd2 => num(self.uint(4)? as u32 as i32 as f64),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)
            }
            0xe0..=0xff => num(c as i8 as f64),
            _ => Err(err("Bad data format in input.")),
        }
    }

    fn bytes(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let b = self.take(n)?.to_vec();
        Ok(Value::String(lua.create_string(b)?))
    }

    fn array(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for i in 1..=n {
            let v = self.value(lua)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

/// lua-cmsgpack's `mp_unpack_full`: up to `limit` objects from `offset`
/// (every object when both are 0, as `unpack`); otherwise the next offset
/// (-1 at the end) comes first.
fn unpack_full(lua: &Lua, data: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    if offset < 0 || limit < 0 {
        return Err(mlua::Error::runtime(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            data.len()
        )));
    }
    if offset as u64 > data.len() as u64 {
        return Err(mlua::Error::runtime(format!(
            "Start offset {offset} greater than input length {}.",
            data.len()
        )));
    }
    let all = limit == 0 && offset == 0;
    let mut r = Reader {
        s: data,
        i: offset as usize,
    };
    let mut out = MultiValue::new();
    let mut n = 0;
    while r.i < data.len() && (all || n < limit) {
        out.push_back(r.value(lua)?);
        n += 1;
    }
    if !all {
        let next = if r.i >= data.len() { -1 } else { r.i as i64 };
        out.push_front(Value::Integer(next));
    }
    Ok(out)
}

pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(err(
                    "bad argument #0 to 'pack' (MessagePack pack needs input.)",
                ));
            }
            let mut out = Vec::new();
            for a in &args {
                encode(&mut out, a, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: Value| {
            let data = super::string(lua, &s, "unpack", 1)?;
            unpack_full(lua, &data, 0, 0)
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (Value, Option<i64>)| {
            let data = super::string(lua, &s, "unpack_one", 1)?;
            unpack_full(lua, &data, 1, offset.unwrap_or(0))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, offset): (Value, i64, Option<i64>)| {
            let data = super::string(lua, &s, "unpack_limit", 1)?;
            unpack_full(lua, &data, limit, offset.unwrap_or(0))
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(t)
}
