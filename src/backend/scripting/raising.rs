//! The `redis.*` functions that raise errors (`redis.call`,
//! `redis.sha1hex`, `redis.log`, …) as C functions, as Redis has them.
//!
//! A C function keeps its caller's frame even when called in tail
//! position (`return redis.call(...)`), so the error handler still finds
//! the script's line, which Redis reports (`on @user_script:1.`). Each
//! one calls its Lua implementation in the bridge table (`impl_<name>`),
//! which answers `true, value` or `false, {err=…}`, and raises the table
//! in the second case.

use mlua::ffi;
use std::ffi::{c_int, CStr};

/// Where the bridge table lives in the registry.
pub(crate) const BRIDGE_KEY: &str = "shardis.bridge";

/// Calls `bridge[name](...)` with this call's arguments; returns its value
/// or raises its error table.
///
/// # Safety
/// Called by Lua as a C function: `l` is a live state whose registry holds
/// the bridge table. No Rust value with a destructor is alive when
/// `lua_error` unwinds this frame.
unsafe fn trampoline(l: *mut ffi::lua_State, name: &CStr) -> c_int {
    let n = ffi::lua_gettop(l);
    ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, c"shardis.bridge".as_ptr());
    ffi::lua_getfield(l, -1, name.as_ptr());
    ffi::lua_remove(l, -2);
    ffi::lua_insert(l, 1);
    ffi::lua_call(l, n, 2);
    if ffi::lua_toboolean(l, -2) != 0 {
        return 1;
    }
    ffi::lua_error(l)
}

macro_rules! raising {
    ($($f:ident => $name:literal),* $(,)?) => {
        $(
            unsafe extern "C-unwind" fn $f(l: *mut ffi::lua_State) -> c_int {
                trampoline(l, $name)
            }
        )*
        /// Every raising function: its name in `redis`, the C function.
        pub(crate) const ALL: &[(&str, ffi::lua_CFunction)] = &[
            $((stringify!($f), $f as ffi::lua_CFunction)),*
        ];
    };
}

raising! {
    call => c"impl_call",
    sha1hex => c"impl_sha1hex",
    log => c"impl_log",
    setresp => c"impl_setresp",
    set_repl => c"impl_set_repl",
    acl_check_cmd => c"impl_acl_check_cmd",
    register_function => c"impl_register_function",
}
