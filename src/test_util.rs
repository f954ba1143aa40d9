//! Shorthands the crate's unit tests share: byte strings from text. Built
//! only for tests.

use bytes::Bytes;

/// `s` as [`Bytes`].
pub(crate) fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// The blank-separated words of `s`, as a handler's arguments.
pub(crate) fn words(s: &str) -> Vec<&[u8]> {
    s.split_whitespace().map(|a| a.as_bytes()).collect()
}
