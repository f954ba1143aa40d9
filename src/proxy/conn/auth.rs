//! The authentication step: every request a session decodes passes it
//! before dispatch. Without users, [`Auth::Open`] admits everyone (AUTH
//! itself is answered by the proxy as Redis answers it without a password).
//! With users ([`Auth::Users`]: `[proxy] requirepass`, `[[users]]`) a
//! client must authenticate first, and each request is checked against its
//! user's permissions; a refused request is answered here, and the router
//! never sees it. AUTH, and HELLO's AUTH option, are answered here too.
//!
//! Called by the session (`proxy::session`) only. Must never log or echo a
//! password, nor hold a lock across an await (it has none to await).

pub(crate) mod acl;
pub(crate) mod config;
mod gate;
pub(crate) mod guard;
pub(crate) mod http;
pub(crate) mod perm;
pub(crate) mod users;

use std::sync::Arc;

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::resp::Request;

pub(crate) use users::Users;

/// How a proxy admits requests. A new way to authenticate is a new variant
/// with its own arm in [`Auth::admit`].
#[derive(Clone, Debug, Default)]
pub(crate) enum Auth {
    /// No credentials: every request is admitted.
    #[default]
    Open,
    /// Redis's users: authenticate first, then each request is checked
    /// against the user's command class and key and channel patterns.
    Users(Arc<Users>),
}

impl Auth {
    /// The step the validated config asks for.
    pub(crate) fn from_config(c: &config::AuthConfig) -> Auth {
        match Users::from_config(c) {
            Some(u) => Auth::Users(Arc::new(u)),
            None => Auth::Open,
        }
    }

    /// `Ok` when `client` may send `req` on to dispatch; else the reply it
    /// gets instead (the answer to an AUTH, or a refusal). May change the
    /// client's user (AUTH, HELLO … AUTH, RESET).
    #[inline]
    pub(crate) fn admit(&self, client: &mut ClientState, req: &Request) -> Result<(), Pending> {
        match self {
            Auth::Open => Ok(()),
            Auth::Users(users) => gate::admit(users, client, req),
        }
    }

    /// True when `client` has not authenticated and must before anything else.
    pub(crate) fn is_pending(&self, client: &ClientState) -> bool {
        match self {
            Auth::Open => false,
            Auth::Users(_) => client.user.is_none(),
        }
    }

    /// The users, when there are any.
    pub(crate) fn users(&self) -> Option<&Users> {
        match self {
            Auth::Open => None,
            Auth::Users(u) => Some(u),
        }
    }
}

/// INFO stats' authentication lines (Redis's `acl_access_denied_*`, and
/// the attempts the brute-force guard refused unchecked).
pub(crate) fn info_fields(auth: &Auth) -> [(&'static str, u64); 5] {
    use std::sync::atomic::Ordering::Relaxed;
    let g = auth.users().map(|u| &u.guard);
    let n =
        |f: fn(&guard::Guard) -> &std::sync::atomic::AtomicU64| g.map_or(0, |g| f(g).load(Relaxed));
    [
        ("acl_access_denied_auth", n(|g| &g.failures)),
        ("acl_access_denied_cmd", n(|g| &g.denied_cmd)),
        ("acl_access_denied_key", n(|g| &g.denied_key)),
        ("acl_access_denied_channel", n(|g| &g.denied_channel)),
        ("shardis_auth_attempts_rate_limited", n(|g| &g.limited)),
    ]
}
