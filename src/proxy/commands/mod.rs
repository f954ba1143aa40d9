//! What the proxy answers itself rather than forwarding as it came:
//! connection and introspection commands, INFO, CONFIG, CLIENT, the Redis
//! Cluster views, transactions, blocking commands, pub/sub and MONITOR.

pub(crate) mod blocked;
pub(crate) mod blocking;
pub(crate) mod blocking_multi;
pub(crate) mod clients;
pub(crate) mod cluster;
pub(crate) mod common;
pub(crate) mod config;
pub(crate) mod info;
pub(crate) mod local;
pub(crate) mod memory;
pub mod monitor;
pub(crate) mod pubsub;
pub(crate) mod transaction;
