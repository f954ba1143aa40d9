//! twemproxy's `redis_auth` (`nc_redis.c`, `redis_handle_auth_req`): its
//! checks and its reply texts, where they differ from Redis's. HELLO,
//! which nutcracker closes the connection on, is answered as Redis 7
//! answers it with the pool's password as the `default` user's.

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
    if eq_ignore_case(&args[0], b"HELLO") {
        // A bad protocol version is HELLO's own error, before any AUTH.
        if args.len() > 1 && !matches!(&args[1][..], b"2" | b"3") {
            return Ok(());
        }
        return match super::gate::hello_auth(args) {
            Some((user, given)) => {
                let right = password.is_none_or(|p| given.as_ref() == p.as_bytes());
                if !(eq_ignore_case(user, b"default") && right) {
                    return Err(Pending::error(
                        "WRONGPASS invalid username-password pair or user is disabled.",
                    ));
                }
                client.authenticated = true;
                Ok(())
            }
            None if password.is_some() && !client.authenticated => {
                Err(Pending::error(super::gate::NOAUTH_HELLO))
            }
            None => Ok(()),
        };
    }
    if password.is_some() && !client.authenticated {
        return Err(Pending::error("NOAUTH Authentication required"));
    }
    Ok(())
}
