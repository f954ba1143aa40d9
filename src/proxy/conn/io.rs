//! A session's buffers and read state between the events of its loop
//! (`proxy::session`): plain data, never shared.

use bytes::BytesMut;

/// The loop's buffers and read state between events.
pub(crate) struct Io {
    /// Bytes read and not yet decoded.
    pub(crate) buf: BytesMut,
    /// Replies gathered and not yet written.
    pub(crate) out: BytesMut,
    /// The client sent EOF (or its socket failed), or the proxy drains:
    /// answer what is owed, then close.
    pub(crate) eof: bool,
    /// `buf` holds no complete request until more bytes arrive.
    pub(crate) need_bytes: bool,
}

impl Io {
    /// Room for the next read: a fresh buffer when the last was drained,
    /// else more capacity behind what is buffered.
    pub(crate) fn make_room(&mut self) {
        if self.need_bytes && self.buf.capacity() - self.buf.len() < 4096 {
            if self.buf.is_empty() {
                self.buf = BytesMut::with_capacity(16 * 1024);
            } else {
                self.buf.reserve(16 * 1024);
            }
        }
    }
}
