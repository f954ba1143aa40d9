//! The timeout argument of the blocking commands as the node's handlers
//! take it: `resp::timeout`'s parse with its refusal as a [`CmdError`].

use crate::backend::error::CmdError;
use crate::resp::timeout::{self, TimeoutError};

fn refused(e: TimeoutError) -> CmdError {
    CmdError::err(e.0)
}

/// A blocking pop's timeout in seconds: milliseconds to wait, 0 = forever.
pub(crate) fn parse_secs(b: &[u8]) -> Result<u64, CmdError> {
    timeout::parse_secs(b).map_err(refused)
}

/// WAIT's timeout: integer milliseconds, 0 = forever.
pub(crate) fn parse_ms(b: &[u8]) -> Result<u64, CmdError> {
    timeout::parse_ms(b).map_err(refused)
}
