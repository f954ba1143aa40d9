//! What the proxy answers itself rather than forwarding as it came:
//! connection and introspection commands, INFO, CONFIG, CLIENT, the Redis
//! Cluster views, transactions, blocking commands, pub/sub and MONITOR.

pub mod blocking;
pub mod clients;
pub mod cluster;
pub mod common;
pub mod config;
pub mod info;
pub mod local;
pub mod monitor;
pub mod pubsub;
pub mod transaction;
