//! The proxy's users: who they are, how a password is checked against
//! one, and what each may touch. Built once from the config; a client's
//! session holds an `Arc` of the user it authenticated as.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::config::{hex, sha256, AuthConfig};
use super::guard::Guard;
use super::perm::Perm;

/// One user as sessions see it.
pub(crate) struct User {
    pub(crate) name: String,
    sha256: [u8; 32],
    pub(crate) perm: Perm,
    keys: Option<Vec<Vec<u8>>>,
    channels: Option<Vec<Vec<u8>>>,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "User({})", self.name)
    }
}

impl User {
    /// True when the user may touch only some keys.
    pub(crate) fn has_key_patterns(&self) -> bool {
        self.keys.is_some()
    }

    /// True when `key` matches one of the user's key patterns.
    pub(crate) fn may_touch_key(&self, key: &[u8]) -> bool {
        match &self.keys {
            None => true,
            Some(pats) => pats.iter().any(|p| crate::glob::matches(p, key)),
        }
    }

    /// True when `channel` matches one of the user's channel patterns.
    pub(crate) fn may_use_channel(&self, channel: &[u8]) -> bool {
        match &self.channels {
            None => true,
            Some(pats) => pats.iter().any(|p| crate::glob::matches(p, channel)),
        }
    }

    /// The user as ACL LIST prints it: the password only as its SHA-256.
    pub(crate) fn acl_line(&self) -> String {
        let keys = match &self.keys {
            None => "~*".to_string(),
            Some(k) => join(k, "~"),
        };
        let channels = match &self.channels {
            None => "&*".to_string(),
            Some(c) => format!("resetchannels {}", join(c, "&")),
        };
        format!(
            "user {} on #{} {keys} {channels} {}",
            self.name,
            hex(&self.sha256),
            self.perm.acl_rules()
        )
        .replace("  ", " ")
    }
}

fn join(pats: &[Vec<u8>], sigil: &str) -> String {
    pats.iter()
        .map(|p| format!("{sigil}{}", String::from_utf8_lossy(p)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every user, the brute-force guard, and how long a client may stay
/// unauthenticated.
#[derive(Debug)]
pub(crate) struct Users {
    /// Sorted by name (ACL USERS and ACL LIST print them so).
    users: Vec<Arc<User>>,
    pub(crate) guard: Guard,
    pub(crate) timeout: Duration,
}

impl Users {
    /// `None` when the config names no user: the proxy is open.
    pub(crate) fn from_config(c: &AuthConfig) -> Option<Users> {
        if !c.has_users() {
            return None;
        }
        let mut users: Vec<Arc<User>> = c
            .users
            .iter()
            .map(|u| {
                let bytes = |v: &Option<Vec<String>>| {
                    v.as_ref()
                        .map(|v| v.iter().map(|p| p.as_bytes().to_vec()).collect())
                };
                Arc::new(User {
                    name: u.name.clone(),
                    sha256: u.sha256,
                    perm: u.perm,
                    keys: bytes(&u.keys),
                    channels: bytes(&u.channels),
                })
            })
            .collect();
        users.sort_by(|a, b| a.name.cmp(&b.name));
        Some(Users {
            users,
            guard: Guard::new(c.auth_failures_per_sec),
            timeout: Duration::from_millis(c.auth_timeout_ms),
        })
    }

    /// The user `name` when `password` is its password. Every attempt
    /// costs one digest and a comparison that does not stop at the first
    /// differing byte, whether or not the user exists.
    pub(crate) fn verify(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let digest = sha256(password);
        let user = self.users.iter().find(|u| u.name.as_bytes() == name);
        let want = user.map_or([0u8; 32], |u| u.sha256);
        let diff = digest
            .iter()
            .zip(want.iter())
            .fold(0u8, |d, (a, b)| d | (a ^ b));
        match user {
            Some(u) if diff == 0 => Some(u.clone()),
            _ => None,
        }
    }

    pub(crate) fn all(&self) -> &[Arc<User>] {
        &self.users
    }
}

/// A name as it may appear in a log line: printable, at most 64 bytes.
pub(crate) fn loggable(name: &Bytes) -> String {
    let n = &name[..name.len().min(64)];
    String::from_utf8_lossy(n)
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::config::UserSection;
    use super::*;

    fn users() -> Users {
        let alice = UserSection {
            name: "alice".into(),
            password: Some("apw".into()),
            sha256: None,
            commands: Some("read".into()),
            keys: Some(vec!["foo:*".into()]),
            channels: Some(vec!["chan:*".into()]),
        };
        let c = AuthConfig::validate(Some("secret".into()), vec![alice], true, 1, 1).unwrap();
        Users::from_config(&c).unwrap()
    }

    #[test]
    fn a_password_opens_only_its_own_user() {
        let u = users();
        assert_eq!(u.verify(b"default", b"secret").unwrap().name, "default");
        assert_eq!(u.verify(b"alice", b"apw").unwrap().name, "alice");
        assert!(u.verify(b"alice", b"secret").is_none());
        assert!(u.verify(b"bob", b"apw").is_none());
        assert!(u.verify(b"default", b"").is_none());
    }

    #[test]
    fn acl_lines_print_hashes_and_patterns_as_redis_does() {
        let u = users();
        let lines: Vec<String> = u.all().iter().map(|u| u.acl_line()).collect();
        // The default user byte for byte as redis-server 7.0 prints it.
        assert_eq!(lines[0], "user alice on #e528e908837a6f2c169a132a07f95107a5cc523f61d09d028c2fa799aeef4257 ~foo:* resetchannels &chan:* -@all +@read +@connection +@transaction");
        assert_eq!(lines[1], "user default on #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~* &* +@all");
        let alice = &u.all()[0];
        assert!(alice.may_touch_key(b"foo:1") && !alice.may_touch_key(b"bar"));
        assert!(alice.may_use_channel(b"chan:x") && !alice.may_use_channel(b"x"));
    }
}
