//! The parts of one client's connection that the session loop
//! (`proxy::session`) owns and lends out: the client's state as handlers
//! see it, the replies it is owed, what it and all clients together may
//! make the proxy hold, the script lanes it holds, the
//! authentication step, TLS, what follows each dispatch, and the errors a
//! session answers itself.

pub(crate) mod after;
pub(crate) mod auth;
pub(crate) mod budget;
pub(crate) mod client;
pub(crate) mod error;
pub(crate) mod io;
pub(crate) mod lane;
pub(crate) mod owed;
pub(crate) mod pending;
pub(crate) mod tls;
