//! `struct`: Roberto Ierusalimschy's binary packing library as Redis
//! bundles it (`struct.pack`, `struct.unpack`, `struct.size`), on a
//! 64-bit little-endian machine.

use super::{bad_argument, number, string};
use mlua::{Lua, MultiValue, Table, Value};

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

/// Byte order and alignment, changed by `<`, `>`, `!`.
struct Header {
    little: bool,
    align: usize,
}

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

/// A decimal size after an option, or `default`.
fn getnum(fmt: &[u8], i: &mut usize, default: usize) -> mlua::Result<usize> {
    if !fmt.get(*i).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut a: usize = 0;
    while let Some(d) = fmt.get(*i).filter(|c| c.is_ascii_digit()) {
        a = a
            .checked_mul(10)
            .and_then(|a| a.checked_add((d - b'0') as usize))
            .filter(|&a| a <= i32::MAX as usize)
            .ok_or_else(|| err("integral size overflow"))?;
        *i += 1;
    }
    Ok(a)
}

fn optsize(opt: u8, fmt: &[u8], i: &mut usize) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => getnum(fmt, i, 1)?,
        b'i' | b'I' => {
            let sz = getnum(fmt, i, 4)?;
            if sz > MAXINTSIZE {
                return Err(err(format!(
                    "integral size {sz} is larger than limit of {MAXINTSIZE}"
                )));
            }
            sz
        }
        _ => 0,
    })
}

fn toalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn control(opt: u8, fmt: &[u8], i: &mut usize, h: &mut Header, fname: &str) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => h.little = false,
        b'<' | b'=' => h.little = true,
        b'!' => {
            let a = getnum(fmt, i, MAXALIGN)?;
            if !a.is_power_of_two() {
                return Err(err(format!("alignment {a} is not a power of 2")));
            }
            h.align = a;
        }
        c => {
            return Err(err(format!(
                "bad argument #1 to '{fname}' (invalid format option '{}')",
                c as char
            )))
        }
    }
    Ok(())
}

fn put_int(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let mut v: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
    let mut bytes = vec![0u8; size];
    for b in bytes.iter_mut() {
        *b = v as u8;
        v = v.checked_shr(8).unwrap_or(0);
    }
    if !little {
        bytes.reverse();
    }
    out.extend_from_slice(&bytes);
}

fn get_int(data: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = data.len();
    for k in 0..size {
        let b = if little { data[size - 1 - k] } else { data[k] };
        l = (l << 8) | b as u64;
    }
    if signed && size > 0 && size <= 8 {
        let mask = u64::MAX << (size * 8 - 1);
        if l & mask != 0 {
            l |= mask;
        }
        return l as i64 as f64;
    }
    l as f64
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let args: Vec<Value> = args.into_iter().collect();
    let fmt = match args.first() {
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        v => return Err(bad_argument("pack", 1, "string", v.unwrap_or(&Value::Nil))),
    };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let (mut out, mut i, mut arg) = (Vec::new(), 0, 1);
    let next = |arg: &mut usize| {
        *arg += 1;
        args.get(*arg - 1).cloned().unwrap_or(Value::Nil)
    };
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        let pad = toalign(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = next(&mut arg);
                put_int(&mut out, number(lua, &v, "pack", arg)?, h.little, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = number(lua, &next(&mut arg), "pack", arg)? as f32;
                let b = if h.little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'd' => {
                let v = number(lua, &next(&mut arg), "pack", arg)?;
                let b = if h.little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'c' | b's' => {
                let v = next(&mut arg);
                let s = string(lua, &v, "pack", arg)?;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(err(format!(
                        "bad argument #{arg} to 'pack' (string too short)"
                    )));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(opt, &fmt, &mut i, &mut h, "pack")?,
        }
    }
    lua.create_string(&out)
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let args: Vec<Value> = args.into_iter().collect();
    let text = |k: usize, name: &str| -> mlua::Result<Vec<u8>> {
        string(lua, args.get(k).unwrap_or(&Value::Nil), name, k + 1)
    };
    let (fmt, data) = (text(0, "unpack")?, text(1, "unpack")?);
    let mut pos = match args.get(2) {
        None | Some(Value::Nil) => 0,
        Some(v) => (number(lua, v, "unpack", 3)? as i64 - 1).max(0) as usize,
    };
    let short = || err("bad argument #2 to 'unpack' (data string too short)");
    if pos > data.len() {
        return Err(err(
            "bad argument #3 to 'unpack' (offset must be 1 <= offset <= len(string))",
        ));
    }
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        pos += toalign(pos, &h, opt, size);
        if pos + size > data.len() {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = get_int(&data[pos..pos + size], h.little, opt.is_ascii_lowercase());
                out.push(Value::Number(n));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().map_err(|_| short())?;
                let v = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(v as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().map_err(|_| short())?;
                let v = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let prev = match out.pop() {
                        Some(Value::Number(n)) => n,
                        Some(Value::Integer(n)) => n as f64,
                        _ => return Err(err("format 'c0' needs a previous size")),
                    };
                    size = prev.max(0.0) as usize;
                    if size > data.len() || pos > data.len() - size {
                        return Err(short());
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = memchr::memchr(0, &data[pos..]) else {
                    return Err(err("unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + e])?));
                size = e + 1;
            }
            _ => control(opt, &fmt, &mut i, &mut h, "unpack")?,
        }
        pos += size;
    }
    out.push(Value::Number((pos + 1) as f64));
    Ok(out.into_iter().collect())
}

fn size(_: &Lua, fmt: mlua::LuaString) -> mlua::Result<f64> {
    let fmt = fmt.as_bytes().to_vec();
    let mut h = Header {
        little: true,
        align: 1,
    };
    let (mut total, mut i) = (0usize, 0);
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = optsize(opt, &fmt, &mut i)?;
        total += toalign(total, &h, opt, size);
        if opt == b's' {
            return Err(err(
                "bad argument #1 to 'size' (option 's' has no fixed size)",
            ));
        }
        if opt == b'c' && size == 0 {
            return Err(err(
                "bad argument #1 to 'size' (option 'c0' has no fixed size)",
            ));
        }
        if size == 0 {
            control(opt, &fmt, &mut i, &mut h, "size")?;
        }
        total += size;
    }
    Ok(total as f64)
}

pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set("unpack", lua.create_function(unpack)?)?;
    t.set("size", lua.create_function(size)?)?;
    Ok(t)
}
