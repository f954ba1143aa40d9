//! The command table's former home, kept as a path for the tests and tools
//! that name it: the catalogue now lives in `crate::catalogue`, the proxy's
//! policy in `crate::proxy::policy`. Nothing in the framing layer
//! reads it.

pub use crate::catalogue::KeySpec;
pub use crate::proxy::policy::{
    markdown_table, Aggregate, CommandSpec, Kind, Merge, Pinned, PubSub, TABLE,
};
