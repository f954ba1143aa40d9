//! The libraries Redis gives scripts beyond Lua's own: `cjson`, `bit`,
//! `struct` and `cmsgpack`, written in Rust as Lua functions with the
//! behaviour of the C libraries Redis bundles for the values scripts use.

mod bit;
mod cjson;
mod cmsgpack;
mod structlib;

use mlua::{Lua, Value};

/// Installs every library as a global table.
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    g.set("bit", bit::library(lua)?)?;
    g.set("struct", structlib::library(lua)?)?;
    g.set("cjson", cjson::library(lua)?)?;
    g.set("cmsgpack", cmsgpack::library(lua)?)?;
    Ok(())
}

/// A Lua number argument, as `luaL_checknumber` reads it (numeric strings
/// too).
pub(crate) fn number(lua: &Lua, v: &Value, fname: &str, pos: usize) -> mlua::Result<f64> {
    match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Number(n) => Ok(*n),
        Value::String(_) => lua
            .coerce_number(v.clone())?
            .ok_or_else(|| bad_argument(fname, pos, "number", v)),
        v => Err(bad_argument(fname, pos, "number", v)),
    }
}

/// A Lua string argument, as `luaL_checklstring` reads it (numbers too).
pub(crate) fn string(lua: &Lua, v: &Value, fname: &str, pos: usize) -> mlua::Result<Vec<u8>> {
    match lua.coerce_string(v.clone())? {
        Some(s) => Ok(s.as_bytes().to_vec()),
        None => Err(bad_argument(fname, pos, "string", v)),
    }
}

/// Lua's `bad argument #n to 'f' (t expected, got u)`.
pub(crate) fn bad_argument(fname: &str, pos: usize, want: &str, got: &Value) -> mlua::Error {
    let got = match got {
        Value::Nil => "no value",
        v => v.type_name(),
    };
    mlua::Error::runtime(format!(
        "bad argument #{pos} to '{fname}' ({want} expected, got {got})"
    ))
}
