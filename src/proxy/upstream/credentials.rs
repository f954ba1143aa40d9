//! What the proxy says to a node before anything else: its password
//! (`[backend_auth] username, password` for every node, `[[nodes]]
//! username, password` for one, or a twemproxy pool's `redis_auth`) and
//! the database to work in (a twemproxy pool's `redis_db`). Said on every
//! upstream connection (pooled, pinned, pub/sub) as `AUTH` (RESP2) or
//! inside `HELLO 3 AUTH` (RESP3) and then `SELECT`, by the mover's own
//! connections and ADDNODE's probe the same way, and given to MIGRATE as
//! its target database and `AUTH`/`AUTH2`, so one node can hand keys to
//! another. Also how a node is reached: over TLS or not (`[backend_tls]`,
//! `[[nodes]] tls`), which every one of those connections follows too.
//!
//! `Debug` never prints a password; nothing here logs.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::client::{ClientError, Conn, TlsTo};
use crate::resp::encode;

/// One node's username (default `default`) and password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub(crate) username: Option<String>,
    pub(crate) password: String,
    /// Said as `AUTH password`, without a user, as nutcracker says a
    /// pool's `redis_auth`: a server older than Redis 6 knows no users.
    pub(crate) password_only: bool,
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
            password_only: false,
        }
    }

    /// A twemproxy pool's `redis_auth`: `AUTH password`, MIGRATE's `AUTH password`.
    pub(crate) fn password_only(password: String) -> Credentials {
        Credentials {
            password_only: true,
            ..Credentials::new(None, password)
        }
    }

    pub(crate) fn user(&self) -> &str {
        self.username.as_deref().unwrap_or("default")
    }

    /// `AUTH [user] password`.
    pub(crate) fn auth_args(&self) -> Vec<&[u8]> {
        if self.password_only {
            vec![b"AUTH", self.password.as_bytes()]
        } else {
            vec![b"AUTH", self.user().as_bytes(), self.password.as_bytes()]
        }
    }

    /// MIGRATE's way of logging in to its target: `AUTH password` or
    /// `AUTH2 user password`.
    pub(crate) fn migrate_args(&self) -> Vec<&[u8]> {
        if self.password_only {
            vec![b"AUTH", self.password.as_bytes()]
        } else {
            vec![b"AUTH2", self.user().as_bytes(), self.password.as_bytes()]
        }
    }

    /// The first request on a new connection: [`Credentials::auth_args`]
    /// for RESP2, `HELLO 3 AUTH user pass` for RESP3.
    pub(crate) fn handshake(&self, proto: u8) -> BytesMut {
        let mut out = BytesMut::new();
        let (u, p) = (self.user().as_bytes(), self.password.as_bytes());
        if proto >= 3 {
            encode::command(&mut out, &[b"HELLO", b"3", b"AUTH", u, p]);
        } else {
            encode::command(&mut out, &self.auth_args());
        }
        out
    }
}

/// The credentials of every node (per name, else the default) and the
/// database every connection selects.
#[derive(Clone, Debug, Default)]
pub struct NodeCredentials {
    pub(crate) default: Option<Arc<Credentials>>,
    pub(crate) by_name: HashMap<String, Arc<Credentials>>,
    /// `SELECT`ed after the login when not 0 (twemproxy's `redis_db`; 0 from TOML).
    pub(crate) db: u32,
    /// TLS towards the nodes, when configured.
    pub(crate) tls: NodeTls,
}

/// Which nodes are reached over TLS and how: per name (`None`: plaintext
/// although a default exists), else the default (also for a node added
/// later by CLUSTER ADDNODE).
#[derive(Clone, Debug, Default)]
pub struct NodeTls {
    pub(crate) default: Option<Arc<TlsTo>>,
    pub(crate) by_name: HashMap<String, Option<Arc<TlsTo>>>,
}

impl NodeTls {
    pub(crate) fn for_node(&self, name: &str) -> Option<Arc<TlsTo>> {
        match self.by_name.get(name) {
            Some(t) => t.clone(),
            None => self.default.clone(),
        }
    }
}

impl NodeCredentials {
    /// The password every node without one of its own is sent, if any
    /// (`shardis up` starts its nodes with it).
    pub fn default_password(&self) -> Option<&str> {
        self.default.as_ref().map(|c| c.password.as_str())
    }

    /// Whether the default login names a user other than `default`.
    pub fn default_has_user(&self) -> bool {
        self.default.as_ref().is_some_and(|c| c.user() != "default")
    }

    /// Sends `password` (user `default`) to every node without one of its own.
    pub fn set_default_password(&mut self, password: String) {
        self.default = Some(Arc::new(Credentials::new(None, password)));
    }

    /// What to send to the node named `name` (also a node added later by
    /// CLUSTER ADDNODE, which gets the default).
    pub(crate) fn for_node(&self, name: &str) -> Option<Arc<Credentials>> {
        self.by_name.get(name).or(self.default.as_ref()).cloned()
    }

    /// `SELECT db`, encoded, when the database is not 0.
    pub(crate) fn select(&self) -> Option<Bytes> {
        (self.db != 0).then(|| {
            let mut out = BytesMut::new();
            let db = self.db.to_string();
            encode::command(&mut out, &[b"SELECT", db.as_bytes()]);
            out.freeze()
        })
    }

    /// A new connection to `addr`, the node (or a member of the shard)
    /// named `name`: over TLS when that node is reached so, not logged in.
    pub(crate) async fn connect(
        &self,
        addr: &str,
        name: &str,
        timeout: std::time::Duration,
    ) -> Result<Conn, ClientError> {
        Conn::connect_over(addr, self.tls.for_node(name).as_deref(), timeout).await
    }

    /// Logs `conn` in to the node named `name` and selects the database;
    /// `Ok(Some(reply))` is the node's refusal of one of them.
    pub(crate) async fn open(
        &self,
        name: &str,
        conn: &mut Conn,
    ) -> Result<Option<Bytes>, ClientError> {
        let db = self.db.to_string();
        let creds = self.for_node(name);
        let auth = creds.as_ref().map(|c| c.auth_args());
        let select: Option<Vec<&[u8]>> =
            (self.db != 0).then(|| vec![b"SELECT" as &[u8], db.as_bytes()]);
        for args in auth.iter().chain(select.iter()) {
            let r = conn.call(args).await?;
            if crate::resp::reply::is_error(&r) {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }
}

/// `args` on a new connection to `addr`, after what the node named `name`
/// is told first (a refused AUTH or SELECT is the answer then), all within
/// `timeout`.
pub(crate) async fn probe(
    addr: &str,
    name: &str,
    login: &NodeCredentials,
    args: &[&[u8]],
    timeout: std::time::Duration,
) -> Result<Bytes, ClientError> {
    let call = async {
        let mut c = login.connect(addr, name, timeout).await?;
        if let Some(refused) = login.open(name, &mut c).await? {
            return Ok(refused);
        }
        c.call(args).await
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| ClientError::ReadTimeout)?
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

    #[test]
    fn a_twemproxy_password_is_said_without_a_user_and_the_db_is_selected() {
        let c = Credentials::password_only("pw".into());
        assert_eq!(&c.handshake(2)[..], b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n");
        assert_eq!(c.migrate_args(), [&b"AUTH"[..], b"pw"]);
        assert!(c
            .handshake(3)
            .starts_with(b"*5\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$4\r\nAUTH\r\n$7\r\ndefault"));
        let users = Credentials::new(Some("u".into()), "x".into());
        assert_eq!(users.migrate_args(), [&b"AUTH2"[..], b"u", b"x"]);
        let mut n = NodeCredentials::default();
        assert!(n.select().is_none());
        n.db = 12;
        assert_eq!(
            n.select().as_deref(),
            Some(&b"*2\r\n$6\r\nSELECT\r\n$2\r\n12\r\n"[..])
        );
    }
}
