//! The checks [`super::Auth::Users`] makes on each request, in Redis's
//! order: an unknown command or a wrong argument count is left to dispatch
//! to answer (as Redis answers those before authentication); then a client
//! that has not authenticated may only AUTH, HELLO … AUTH, QUIT or RESET;
//! then the user's command class, key patterns and channel patterns.
//!
//! The reply texts are Redis 7.2's.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::perm::{channels, needs, refused_name};
use super::users::{loggable, Users};
use crate::catalogue::{lookup, Id};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::resp::{encode, eq_ignore_case, Request};

pub(crate) const NOAUTH: &str = "NOAUTH Authentication required.";
pub(crate) const NOAUTH_HELLO: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";
pub(crate) const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub(crate) const NOPERM_KEY: &str = "NOPERM No permissions to access a key";
pub(crate) const NOPERM_CHANNEL: &str = "NOPERM No permissions to access a channel";
/// Our own: the client's address has used up its failed attempts for now.
pub(crate) const RATE_LIMITED: &str =
    "ERR too many failed authentication attempts from this address; retry later";

/// See the module documentation.
pub(super) fn admit(users: &Users, client: &mut ClientState, req: &Request) -> Result<(), Pending> {
    let args = &req.args;
    let Some(cmd) = lookup(req.name()) else {
        return Ok(());
    };
    if !cmd.is_arity_ok(args.len()) {
        return Ok(());
    }
    match cmd.id {
        // Inside MULTI, AUTH goes on to the transaction, which refuses to
        // queue it: a transaction runs on a node, and the node has no users.
        Id::Auth if !client.tx.is_queueing() => {
            let (name, pass): (&[u8], &Bytes) = match args.len() {
                2 => (b"default", &args[1]),
                3 => (&args[1], &args[2]),
                _ => return Err(Pending::error("ERR syntax error")),
            };
            try_password(users, client, name, pass)?;
            let mut out = BytesMut::new();
            encode::simple(&mut out, "OK");
            return Err(Pending::ready(out));
        }
        Id::Hello => {
            // A bad protocol version is HELLO's own error, before any AUTH.
            if args.len() > 1 && !matches!(&args[1][..], b"2" | b"3") {
                return Ok(());
            }
            match hello_auth(args) {
                Some((name, pass)) => {
                    let (name, pass) = (name.clone(), pass.clone());
                    return try_password(users, client, &name, &pass);
                }
                None if client.user.is_none() => return Err(Pending::error(NOAUTH_HELLO)),
                None => return Ok(()),
            }
        }
        Id::Quit => return Ok(()),
        // RESET authenticates as the default user, which has a password
        // here: the client must authenticate again.
        Id::Reset => {
            client.user = None;
            return Ok(());
        }
        _ => {}
    }
    let Some(user) = client.user.clone() else {
        return Err(Pending::error(NOAUTH));
    };
    let refuse = |client: &mut ClientState, msg: &str| {
        // A refused command inside MULTI discards the transaction at EXEC.
        client.tx.flag_error();
        Err(Pending::error(msg))
    };
    if needs(cmd, args) > user.perm {
        users.guard.denied_cmd.fetch_add(1, Ordering::Relaxed);
        let msg = format!(
            "NOPERM User {} has no permissions to run the '{}' command",
            user.name,
            refused_name(cmd, args)
        );
        return refuse(client, &msg);
    }
    if let Some(chans) = channels(cmd, args) {
        if !chans.iter().all(|c| user.may_use_channel(c)) {
            users.guard.denied_channel.fetch_add(1, Ordering::Relaxed);
            return refuse(client, NOPERM_CHANNEL);
        }
    } else if !matches!(cmd.id, Id::Sunsubscribe) {
        if let Ok(pos) = cmd.key_positions(args) {
            if !pos.iter().all(|&p| user.may_touch_key(&args[p])) {
                users.guard.denied_key.fetch_add(1, Ordering::Relaxed);
                return refuse(client, NOPERM_KEY);
            }
        }
    }
    Ok(())
}

/// The user and password of HELLO's AUTH option, if it has one.
pub(super) fn hello_auth(args: &[Bytes]) -> Option<(&Bytes, &Bytes)> {
    let mut i = 2;
    while i < args.len() {
        if eq_ignore_case(&args[i], b"AUTH") && i + 2 < args.len() {
            return Some((&args[i + 1], &args[i + 2]));
        }
        i += if eq_ignore_case(&args[i], b"SETNAME") {
            2
        } else {
            1
        };
    }
    None
}

/// Authenticates `client` as `name` when `pass` is its password; a
/// failure leaves the client's user as it was, counts against its address
/// and is logged with the user's name, never the password.
fn try_password(
    users: &Users,
    client: &mut ClientState,
    name: &[u8],
    pass: &Bytes,
) -> Result<(), Pending> {
    let ip = client.peer.parse::<SocketAddr>().ok().map(|a| a.ip());
    let now = Instant::now();
    if !users.guard.may_try(ip, now) {
        tracing::debug!(peer = %client.peer, "authentication attempt refused: too many failures from this address");
        return Err(Pending::error(RATE_LIMITED));
    }
    match users.verify(name, pass) {
        Some(u) => {
            client.user = Some(u);
            Ok(())
        }
        None => {
            users.guard.failed(ip, now);
            tracing::info!(
                client = client.id,
                peer = %client.peer,
                user = %loggable(&Bytes::copy_from_slice(name)),
                "authentication failed"
            );
            Err(Pending::error(WRONGPASS))
        }
    }
}
