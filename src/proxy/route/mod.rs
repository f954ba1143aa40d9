//! Forwarding a request to the nodes that hold its keys: to its key's owner
//! ([`keyed`]), split across owners and merged back ([`split`], [`merge`]),
//! to every node ([`fan_out`]), or as a cursor over all nodes ([`scan`]).
//!
//! Called by `dispatch` for every request the catalogue classifies as
//! forwarded; the proxy's own handlers (`commands`, `admin`) are never
//! called from here. While a migration runs, a write to a moving key is
//! tracked (see `upstream::dirty`) so the change re-syncs it before the
//! cutover.

pub(crate) mod cursor;
pub(crate) mod fan_out;
pub(crate) mod hot_cache;
pub(crate) mod keyed;
pub mod merge;
pub(crate) mod scan;
pub(crate) mod script_keys;
pub(crate) mod scripts;
pub(crate) mod send;
pub(crate) mod split;
pub(crate) mod wake;
