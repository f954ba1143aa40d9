//! One client's connection: the socket loop ([`session`]), what a session
//! may make the proxy hold ([`budget`]) and the errors it answers itself.

pub mod after;
pub mod budget;
pub mod client;
pub mod error;
pub mod pending;
pub mod session;
