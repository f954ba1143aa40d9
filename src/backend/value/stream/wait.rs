//! What a client blocked in XREAD or XREADGROUP waits for: kept here, with
//! the stream, so the node's blocking registry can hold it without knowing
//! the stream commands (`commands/streams_read.rs` makes and serves it).

use super::StreamId;
use crate::backend::value::Elem;

/// A blocked XREAD / XREADGROUP.
pub(crate) struct XReadOp {
    /// Per key, the ID entries must be greater than (`$` resolved; `>` is
    /// the largest ID, read as "the group's last delivered").
    pub(crate) ids: Vec<(Box<[u8]>, StreamId)>,
    /// COUNT, or 1000 when blocking without one, as Redis.
    pub(crate) count: usize,
    /// XREADGROUP's group, consumer and NOACK.
    pub(crate) group: Option<(Elem, Elem, bool)>,
}

impl XReadOp {
    /// Whether it is XREADGROUP's.
    pub(crate) fn in_group(&self) -> bool {
        self.group.is_some()
    }
}
