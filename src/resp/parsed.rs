//! What the request decoder's parsers return: how much of the buffer a
//! request took, or why it could not be decoded. Shared by the multibulk
//! parser (`request.rs`) and the inline one (`inline.rs`); types only.

use std::fmt;

/// Why a request could not be decoded. The session replies
/// `-ERR Protocol error: …` (this type's `Display`) and closes that client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    TooBigMultibulkCount,
    InvalidMultibulkLength,
    TooBigBulkCount,
    ExpectedDollar(u8),
    InvalidBulkLength,
    BulkNotTerminated,
    TooBigInline,
    UnbalancedQuotes,
    QueryBufferFull,
    UnauthenticatedMultibulkLength,
    UnauthenticatedBulkLength,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ProtocolError::*;
        match self {
            TooBigMultibulkCount => write!(f, "Protocol error: too big mbulk count string"),
            InvalidMultibulkLength => write!(f, "Protocol error: invalid multibulk length"),
            TooBigBulkCount => write!(f, "Protocol error: too big bulk count string"),
            ExpectedDollar(c) => write!(f, "Protocol error: expected '$', got '{}'", *c as char),
            InvalidBulkLength => write!(f, "Protocol error: invalid bulk length"),
            BulkNotTerminated => write!(f, "Protocol error: bulk string not terminated by CRLF"),
            TooBigInline => write!(f, "Protocol error: too big inline request"),
            UnbalancedQuotes => write!(f, "Protocol error: unbalanced quotes in request"),
            QueryBufferFull => write!(f, "Protocol error: query buffer limit reached"),
            UnauthenticatedMultibulkLength => {
                write!(f, "Protocol error: unauthenticated multibulk length")
            }
            UnauthenticatedBulkLength => write!(f, "Protocol error: unauthenticated bulk length"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// What one parse of the front of a buffer found.
pub(crate) enum Parsed {
    Incomplete,
    /// Consume this many bytes, nothing to execute.
    Skip(usize),
    /// A complete multibulk of `len` bytes; its spans are in the caller's [`Spans`].
    Multibulk {
        len: usize,
    },
    Inline {
        len: usize,
        args: Vec<Vec<u8>>,
    },
}
