//! The authentication step: every request a session decodes passes it
//! before dispatch. Today the proxy has no users, so [`Auth::Open`] admits
//! everyone (AUTH itself is answered by the proxy as Redis answers it
//! without a password); a step that checks credentials answers a refused
//! request here, and the router never sees it.

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::resp::Request;

/// How a proxy admits requests.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Auth {
    /// No credentials: every request is admitted.
    #[default]
    Open,
}

impl Auth {
    /// `Ok` when `client` may send `req`; else the reply it gets instead.
    #[inline]
    pub(crate) fn admit(&self, _client: &ClientState, _req: &Request) -> Result<(), Pending> {
        match self {
            Auth::Open => Ok(()),
        }
    }
}
