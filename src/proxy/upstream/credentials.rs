//! What the proxy says to a node before anything else when the node wants
//! a password: `[backend_auth] username, password` for every node, or
//! `[[nodes]] username, password` for one. Sent on every upstream
//! connection (pooled, pinned, pub/sub) as `AUTH` (RESP2) or inside
//! `HELLO 3 AUTH` (RESP3), by the mover's own connections, and as
//! MIGRATE's `AUTH2` so one node can hand keys to another.
//!
//! `Debug` never prints a password; nothing here logs.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::BytesMut;

use crate::resp::encode;

/// One node's username (default `default`) and password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub(crate) username: Option<String>,
    pub(crate) password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <redacted>)", self.user())
    }
}

impl Credentials {
    pub(crate) fn new(username: Option<String>, password: String) -> Credentials {
        Credentials {
            username: username.filter(|u| !u.is_empty()),
            password,
        }
    }

    pub(crate) fn user(&self) -> &str {
        self.username.as_deref().unwrap_or("default")
    }

    /// The first request on a new connection: `AUTH user pass` for RESP2,
    /// `HELLO 3 AUTH user pass` for RESP3.
    pub(crate) fn handshake(&self, proto: u8) -> BytesMut {
        let mut out = BytesMut::new();
        let (u, p) = (self.user().as_bytes(), self.password.as_bytes());
        if proto >= 3 {
            encode::command(&mut out, &[b"HELLO", b"3", b"AUTH", u, p]);
        } else {
            encode::command(&mut out, &[b"AUTH", u, p]);
        }
        out
    }
}

/// The credentials of every node: per name, else the default.
#[derive(Clone, Debug, Default)]
pub struct NodeCredentials {
    pub(crate) default: Option<Arc<Credentials>>,
    pub(crate) by_name: HashMap<String, Arc<Credentials>>,
}

impl NodeCredentials {
    /// What to send to the node named `name` (also a node added later by
    /// CLUSTER ADDNODE, which gets the default).
    pub(crate) fn for_node(&self, name: &str) -> Option<Arc<Credentials>> {
        self.by_name.get(name).or(self.default.as_ref()).cloned()
    }
}

/// `args` on a new connection to `addr`, after AUTH when `creds` are
/// given (a refused AUTH is the answer then), all within `timeout`.
pub(crate) async fn probe(
    addr: &str,
    creds: Option<&Credentials>,
    args: &[&[u8]],
    timeout: std::time::Duration,
) -> Result<bytes::Bytes, crate::client::ClientError> {
    let call = async {
        let mut c = crate::client::Conn::connect(addr, timeout).await?;
        if let Some(cr) = creds {
            let auth: [&[u8]; 3] = [b"AUTH", cr.user().as_bytes(), cr.password.as_bytes()];
            let r = c.call(&auth).await?;
            if r.starts_with(b"-") {
                return Ok(r);
            }
        }
        c.call(args).await
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| crate::client::ClientError::ReadTimeout)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handshake_names_the_user_and_debug_hides_the_password() {
        let c = Credentials::new(None, "pw".into());
        assert_eq!(
            &c.handshake(2)[..],
            b"*3\r\n$4\r\nAUTH\r\n$7\r\ndefault\r\n$2\r\npw\r\n"
        );
        assert!(c
            .handshake(3)
            .starts_with(b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n"));
        assert!(!format!("{c:?}").contains("pw"));
        let mut n = NodeCredentials::default();
        assert!(n.for_node("a").is_none());
        n.default = Some(Arc::new(c));
        n.by_name.insert(
            "b".into(),
            Arc::new(Credentials::new(Some("u".into()), "x".into())),
        );
        assert_eq!(n.for_node("a").unwrap().user(), "default");
        assert_eq!(n.for_node("b").unwrap().user(), "u");
    }
}
