//! shardis as a drop-in for twemproxy: the same `nutcracker.yml`, served by
//! real `nutcracker` and by `shardis proxy`, over the same redis-servers,
//! compared by where keys land and what clients read.
//!
//! Skips with a reason when `nutcracker` or `redis-server` is missing;
//! fails instead under SHARDIS_REQUIRE_REDIS=1.

#[path = "twemproxy_dropin/auth.rs"]
mod auth;
#[path = "twemproxy_dropin/cli.rs"]
mod cli;
mod common;
#[path = "twemproxy_dropin/eject.rs"]
mod eject;
#[path = "twemproxy_dropin/example.rs"]
mod example;
#[path = "twemproxy_dropin/grow.rs"]
mod grow;
#[path = "twemproxy_dropin/placement.rs"]
mod placement;
#[path = "twemproxy_dropin/site.rs"]
mod site;
#[path = "twemproxy_dropin/stats.rs"]
mod stats;
