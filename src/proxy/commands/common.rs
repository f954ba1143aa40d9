//! Shared by the proxy's own commands: the Redis version it answers as, and
//! the layout of a HELP reply.

use bytes::BytesMut;

use crate::resp::encode;

/// The Redis version the proxy reports; clients gate features on it.
pub(crate) const REDIS_COMPAT_VERSION: &str = "7.0.0";

/// A HELP reply in Redis's shape: a title line, then one line per subcommand.
pub(crate) fn help(out: &mut BytesMut, command: &str, lines: &[&str]) {
    encode::array_len(out, lines.len() + 1);
    encode::simple(
        out,
        &format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
    );
    for l in lines {
        encode::simple(out, l);
    }
}
