//! twemproxy's `redis_auth` (`nc_redis.c`, `redis_handle_auth_req`): its
//! checks and its reply texts, where they differ from Redis's.

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::resp::{eq_ignore_case, Request};

/// With `password`, nothing but AUTH before the right one; AUTH answered
/// as twemproxy answers it either way.
pub(super) fn admit(
    password: Option<&str>,
    client: &mut ClientState,
    req: &Request,
) -> Result<(), Pending> {
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
        client.authenticated = given.as_ref() == password.as_bytes();
        return Err(if client.authenticated {
            Pending::Ready(bytes::Bytes::from_static(b"+OK\r\n"))
        } else {
            Pending::error("ERR invalid password")
        });
    }
    if password.is_some() && !client.authenticated {
        return Err(Pending::error("NOAUTH Authentication required"));
    }
    Ok(())
}
