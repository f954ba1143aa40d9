//! The authentication step: every request a session decodes passes it
//! before dispatch. [`Auth::Open`] admits everyone (AUTH itself is answered
//! by the proxy as Redis answers it without a password); a step that checks
//! credentials answers a refused request here, and the router never sees it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::resp::{eq_ignore_case, Request};

/// How a proxy admits requests.
#[derive(Clone, Debug, Default)]
pub(crate) enum Auth {
    /// No credentials: every request is admitted.
    #[default]
    Open,
    /// A pool from `nutcracker.yml`: twemproxy's `redis_auth`, with its
    /// replies. With a password, nothing but AUTH is admitted before the
    /// right one; without, AUTH is answered as twemproxy answers it.
    Twemproxy(Option<Arc<str>>),
}

impl Auth {
    /// `Ok` when `client` may send `req`; else the reply it gets instead.
    #[inline]
    pub(crate) fn admit(&self, client: &ClientState, req: &Request) -> Result<(), Pending> {
        match self {
            Auth::Open => Ok(()),
            Auth::Twemproxy(password) => twemproxy(password.as_deref(), client, req),
        }
    }
}

/// twemproxy's `redis_auth` (`nc_redis.c`, `redis_handle_auth_req`).
fn twemproxy(password: Option<&str>, client: &ClientState, req: &Request) -> Result<(), Pending> {
    let args = &req.args;
    if eq_ignore_case(&args[0], b"AUTH") {
        // AUTH pw, or Redis 6's AUTH default pw (twemproxy closes on it).
        let given = match args.len() {
            2 => &args[1],
            3 if eq_ignore_case(&args[1], b"default") => &args[2],
            _ => {
                return Err(Pending::error(
                    "ERR wrong number of arguments for 'auth' command",
                ))
            }
        };
        let Some(password) = password else {
            return Err(Pending::error(
                "ERR Client sent AUTH, but no password is set",
            ));
        };
        let ok = given.as_ref() == password.as_bytes();
        client.authenticated.store(ok, Ordering::Relaxed);
        return Err(if ok {
            Pending::Ready(bytes::Bytes::from_static(b"+OK\r\n"))
        } else {
            Pending::error("ERR invalid password")
        });
    }
    if password.is_some() && !client.authenticated.load(Ordering::Relaxed) {
        return Err(Pending::error("NOAUTH Authentication required"));
    }
    Ok(())
}
