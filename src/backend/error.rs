//! Command errors: one small enum, turned into a `-…` reply line in exactly
//! one place ([`CmdError::write`]). Texts are Redis 7's, byte for byte.

use crate::resp::encode;
use bytes::BytesMut;
use std::fmt;

/// Why a command was refused; the connection always stays open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CmdError {
    /// Command not in the table; carries the name and up to 128 bytes of args.
    UnknownCommand(String, String),
    /// Subcommand not known: (as typed, parent command in upper case).
    UnknownSubcommand(String, &'static str),
    /// Wrong argument count; the lowercase full name (`get`, `client|setname`).
    WrongArity(String),
    /// `ERR syntax error`
    Syntax,
    /// `WRONGTYPE Operation against a key holding the wrong kind of value`
    WrongType,
    /// `ERR value is not an integer or out of range`
    NotInteger,
    /// `ERR value is not a valid float`
    NotFloat,
    /// `ERR increment or decrement would overflow`
    Overflow,
    /// `ERR decrement would overflow` (DECRBY of i64::MIN)
    DecrementOverflow,
    /// `ERR increment would produce NaN or Infinity`
    NanOrInfinity,
    /// `ERR invalid expire time in '<cmd>' command`
    InvalidExpire(&'static str),
    /// `ERR string exceeds maximum allowed size (proto-max-bulk-len)`
    StringTooLong,
    /// `ERR offset is out of range`
    OffsetOutOfRange,
    /// `ERR invalid cursor`
    InvalidCursor,
    /// `NOPROTO unsupported protocol version`
    NoProto,
    /// `BUSYKEY Target key name already exists.`
    BusyKey,
    /// `ERR DUMP payload version or checksum are wrong`
    BadPayload,
    /// `OOM command not allowed when used memory > 'maxmemory'.`
    OutOfMemory,
    /// `NOREPLICAS Not enough good replicas to write.`
    NoReplicas,
    /// A write on a read-only replica.
    ReadOnly,
    /// `ERR DB index is out of range`
    DbIndexOutOfRange,
    /// Any other line, verbatim after the `-` (prefix included).
    Other(String),
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CmdError::*;
        match self {
            UnknownCommand(name, args) => {
                write!(
                    f,
                    "ERR unknown command '{name}', with args beginning with: {args}"
                )
            }
            UnknownSubcommand(sub, cmd) => {
                write!(f, "ERR unknown subcommand '{sub}'. Try {cmd} HELP.")
            }
            WrongArity(name) => write!(f, "ERR wrong number of arguments for '{name}' command"),
            Syntax => f.write_str("ERR syntax error"),
            WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            NotInteger => f.write_str("ERR value is not an integer or out of range"),
            NotFloat => f.write_str("ERR value is not a valid float"),
            Overflow => f.write_str("ERR increment or decrement would overflow"),
            DecrementOverflow => f.write_str("ERR decrement would overflow"),
            NanOrInfinity => f.write_str("ERR increment would produce NaN or Infinity"),
            InvalidExpire(cmd) => write!(f, "ERR invalid expire time in '{cmd}' command"),
            StringTooLong => {
                f.write_str("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
            }
            OffsetOutOfRange => f.write_str("ERR offset is out of range"),
            InvalidCursor => f.write_str("ERR invalid cursor"),
            NoProto => f.write_str("NOPROTO unsupported protocol version"),
            BusyKey => f.write_str("BUSYKEY Target key name already exists."),
            BadPayload => f.write_str("ERR DUMP payload version or checksum are wrong"),
            OutOfMemory => f.write_str("OOM command not allowed when used memory > 'maxmemory'."),
            NoReplicas => f.write_str("NOREPLICAS Not enough good replicas to write."),
            ReadOnly => f.write_str("READONLY You can't write against a read only replica."),
            DbIndexOutOfRange => f.write_str("ERR DB index is out of range"),
            Other(s) => f.write_str(s),
        }
    }
}

impl CmdError {
    /// An `ERR …` line of our own.
    pub(crate) fn err(msg: impl fmt::Display) -> CmdError {
        CmdError::Other(format!("ERR {msg}"))
    }

    /// Appends the error reply to `out`; the only place errors become bytes.
    pub(crate) fn write(&self, out: &mut BytesMut) {
        // Redis replaces newlines so an error is always one line.
        let line = self.to_string().replace(['\r', '\n'], " ");
        encode::error(out, &line);
    }

    /// `UnknownCommand` with Redis's rendering of the first arguments.
    pub(crate) fn unknown_command(name: &[u8], args: &[&[u8]]) -> CmdError {
        let mut shown = String::new();
        for a in args {
            if shown.len() >= 128 {
                break;
            }
            let room = 128 - shown.len();
            let a = &a[..a.len().min(room)];
            shown.push_str(&format!("'{}' ", String::from_utf8_lossy(a)));
        }
        let name = String::from_utf8_lossy(&name[..name.len().min(128)]).into_owned();
        CmdError::UnknownCommand(name, shown)
    }
}
