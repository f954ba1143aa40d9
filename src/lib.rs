//! shardis: a Redis-protocol sharding proxy.
//!
//! `resp` (framing), `catalogue` (the one command catalogue: names, arity,
//! keys, flags by command id) and `ring` (placement) are pure; `backend`
//! (the built-in cache node) uses `resp` and `catalogue`; `proxy` uses all
//! three; `sim` (distribution science for `shardis sim`) uses `ring`; `glob`
//! (Redis patterns, for both the proxy and the node) depends on nothing;
//! `client` (the one RESP client connection, tokio and std) serves the tools
//! and control paths; `check` and `demo` drive whole clusters of child
//! processes, started and killed through `procs`, through the proxy port.
//! Clap is known to the binary (`main.rs`, `up.rs`) and to the argument
//! structs it embeds (`sim::SimArgs`, `check::CheckArgs`, `demo::DemoArgs`);
//! signals and tracing-subscriber to the binary only.

pub mod backend;
pub mod catalogue;
pub mod check;
pub mod client;
pub mod demo;
pub(crate) mod glob;
pub mod listen;
pub mod nutcracker;
pub mod procs;
pub mod proxy;
pub mod resp;
pub mod ring;
pub(crate) mod sha1;
pub mod sim;
#[cfg(test)]
mod test_util;
