//! `bit`: LuaBitOp's operations on 32-bit integers, results as signed
//! numbers.

use super::number;
use mlua::{Lua, MultiValue, Table, Value};

/// LuaBitOp's `barg`: the low 32 bits of the number rounded as the FPU
/// rounds (adding 2^52 + 2^51 keeps them in the mantissa).
fn tobit(lua: &Lua, v: &Value, fname: &str, pos: usize) -> mlua::Result<u32> {
    let n = number(lua, v, fname, pos)?;
    Ok((n + 6755399441055744.0).to_bits() as u32)
}

fn ret(b: u32) -> f64 {
    b as i32 as f64
}

fn arg(args: &MultiValue, i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Nil)
}

pub(super) fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let unary = |name: &'static str, f: fn(u32) -> u32| {
        lua.create_function(move |lua, args: MultiValue| {
            Ok(ret(f(tobit(lua, &arg(&args, 0), name, 1)?)))
        })
    };
    t.set("tobit", unary("tobit", |b| b)?)?;
    t.set("bnot", unary("bnot", |b| !b)?)?;
    t.set("bswap", unary("bswap", u32::swap_bytes)?)?;
    let fold = |name: &'static str, f: fn(u32, u32) -> u32| {
        lua.create_function(move |lua, args: MultiValue| {
            let mut b = tobit(lua, &arg(&args, 0), name, 1)?;
            for (i, v) in args.iter().enumerate().skip(1) {
                b = f(b, tobit(lua, v, name, i + 1)?);
            }
            Ok(ret(b))
        })
    };
    t.set("band", fold("band", |a, b| a & b)?)?;
    t.set("bor", fold("bor", |a, b| a | b)?)?;
    t.set("bxor", fold("bxor", |a, b| a ^ b)?)?;
    let shift = |name: &'static str, f: fn(u32, u32) -> u32| {
        lua.create_function(move |lua, args: MultiValue| {
            let b = tobit(lua, &arg(&args, 0), name, 1)?;
            let n = tobit(lua, &arg(&args, 1), name, 2)? & 31;
            Ok(ret(f(b, n)))
        })
    };
    t.set("lshift", shift("lshift", |b, n| b << n)?)?;
    t.set("rshift", shift("rshift", |b, n| b >> n)?)?;
    t.set(
        "arshift",
        shift("arshift", |b, n| ((b as i32) >> n) as u32)?,
    )?;
    t.set("rol", shift("rol", u32::rotate_left)?)?;
    t.set("ror", shift("ror", u32::rotate_right)?)?;
    t.set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let b = tobit(lua, &arg(&args, 0), "tohex", 1)?;
            let mut n = match arg(&args, 1) {
                Value::Nil => 8,
                v => tobit(lua, &v, "tohex", 2)? as i32,
            };
            let upper = n < 0;
            if upper {
                n = n.wrapping_neg();
            }
            let n = n.clamp(0, 8) as usize;
            let s = if upper {
                format!("{b:08X}")
            } else {
                format!("{b:08x}")
            };
            Ok(s[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}
