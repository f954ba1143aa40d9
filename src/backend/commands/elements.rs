//! The commands every collection family answers alike, written once for
//! any type: the element count (HLEN, LLEN, SCARD, ZCARD, XLEN) and removal
//! by name (HDEL, SREM, ZREM). The handler table names them per type.

use super::{CmdResult, Ctx};
use crate::backend::value::{ByName, Typed};

/// HLEN, LLEN, SCARD, ZCARD, XLEN key
pub(crate) fn len<T: Typed>(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ctx.reply_read_count::<T>(args[1], |c| c.len())
}

/// HDEL key field [field ...], SREM and ZREM key member [member ...]: the
/// reply counts the names that were there.
pub(crate) fn remove<T: ByName>(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ctx.reply_write_count::<T>(args[1], false, |c, _| {
        args[2..].iter().filter(|n| c.remove_name(n)).count()
    })
}
