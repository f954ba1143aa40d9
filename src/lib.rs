//! shardis: a Redis-protocol sharding proxy.
//!
//! `resp` (framing, command table) and `ring` (placement) are pure and depend on
//! nothing of ours; `backend` (the built-in cache node) uses `resp`; `proxy` uses
//! `resp` and `ring`; `sim` (distribution science for `shardis sim`) uses
//! `ring`; `glob` (Redis patterns, for both the proxy and the node)
//! depends on nothing; `client` (the one RESP client connection, tokio and
//! std) serves the tools and control paths; `check` and `demo` drive whole clusters of child processes, started
//! and killed through `procs`, through the proxy port. Only `main.rs` knows clap
//! (besides `sim::SimArgs`, which derives its flags so `main.rs` can embed
//! them), signals and tracing-subscriber.

pub mod backend;
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
pub mod sim;
