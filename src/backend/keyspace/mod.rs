//! The node's keyspace: keys and their values in 64 locked shards, lazy
//! and active expiry, memory accounting and eviction by
//! `maxmemory-policy`, SCAN cursors, WATCH's records, DUMP's format and
//! the keys made ready for blocked clients.
//!
//! Uses only `value/` and `error` of the node; knows nothing of commands,
//! connections or the node's settings (eviction is told its policy).

pub(crate) mod clock;
pub(crate) mod dump;
pub(crate) mod entry;
pub(crate) mod evict;
pub(crate) mod lfu;
pub(crate) mod notices;
pub(crate) mod policy;
pub(crate) mod rdb;
pub(crate) mod ready;
pub(crate) mod replicated;
pub(crate) mod scan;
pub(crate) mod store;
pub(crate) mod typed;
pub(crate) mod watch;
pub(crate) mod watched;
