//! The authentication settings as the config file writes them: `[proxy]
//! requirepass`, `protected_mode`, `auth_timeout_ms`,
//! `auth_failures_per_sec` and the `[[users]]` tables; validated into an
//! [`AuthConfig`] whose every user is known good. Read by `proxy::config`.
//!
//! A password is turned into its SHA-256 here and never kept; `Debug`
//! prints no hash either.

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::perm::Perm;

/// How long a client may stay connected without authenticating.
pub const DEFAULT_AUTH_TIMEOUT_MS: u64 = 10_000;
/// Failed AUTH attempts one client address may make per second (and at
/// once, as a burst) before further attempts are refused unchecked.
pub const DEFAULT_AUTH_FAILURES_PER_SEC: u32 = 10;

/// One `[[users]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserSection {
    pub(crate) name: String,
    pub(crate) password: Option<String>,
    pub(crate) sha256: Option<String>,
    pub(crate) commands: Option<String>,
    pub(crate) keys: Option<Vec<String>>,
    pub(crate) channels: Option<Vec<String>>,
}

/// One user, validated: its password only as a SHA-256 digest.
#[derive(Clone)]
pub(crate) struct UserSpec {
    pub(crate) name: String,
    pub(crate) sha256: [u8; 32],
    pub(crate) perm: Perm,
    /// Key patterns; `None` = every key (`~*`).
    pub(crate) keys: Option<Vec<String>>,
    /// Channel patterns; `None` = every channel (`&*`).
    pub(crate) channels: Option<Vec<String>>,
}

impl std::fmt::Debug for UserSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSpec")
            .field("name", &self.name)
            .field("perm", &self.perm)
            .finish_non_exhaustive()
    }
}

/// The validated authentication settings.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    pub(crate) users: Vec<UserSpec>,
    /// Refuse to start on a non-loopback address without users.
    pub protected_mode: bool,
    pub auth_timeout_ms: u64,
    pub auth_failures_per_sec: u32,
}

impl AuthConfig {
    /// True when clients must authenticate.
    pub fn has_users(&self) -> bool {
        !self.users.is_empty()
    }

    /// Validates `requirepass` (the `default` user, with every permission)
    /// and the `[[users]]` tables; errors name the field.
    pub(crate) fn validate(
        requirepass: Option<String>,
        users: Vec<UserSection>,
        protected_mode: bool,
        auth_timeout_ms: u64,
        auth_failures_per_sec: u32,
    ) -> Result<AuthConfig, String> {
        let mut out = Vec::new();
        if let Some(pass) = requirepass.filter(|p| !p.is_empty()) {
            out.push(UserSpec {
                name: "default".into(),
                sha256: sha256(pass.as_bytes()),
                perm: Perm::Admin,
                keys: None,
                channels: None,
            });
        }
        for (i, u) in users.into_iter().enumerate() {
            let field = |f: &str| format!("users[{i}].{f}");
            if u.name.is_empty() || !u.name.bytes().all(|c| c.is_ascii_graphic()) {
                return Err(format!(
                    "{}: must be non-empty without spaces, got {:?}",
                    field("name"),
                    u.name
                ));
            }
            if out.iter().any(|o: &UserSpec| o.name == u.name) {
                let why = if u.name == "default" {
                    " (proxy.requirepass sets the default user)"
                } else {
                    ""
                };
                return Err(format!(
                    "{}: {:?} is listed twice{why}",
                    field("name"),
                    u.name
                ));
            }
            let hash = match (u.password, u.sha256) {
                (Some(p), None) if !p.is_empty() => sha256(p.as_bytes()),
                (None, Some(h)) => parse_hex(&h).ok_or_else(|| {
                    format!("{}: expected 64 hexadecimal digits", field("sha256"))
                })?,
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "{}: give password or sha256, not both",
                        field("password")
                    ))
                }
                _ => {
                    return Err(format!(
                        "{}: a non-empty password or sha256 is required",
                        field("password")
                    ))
                }
            };
            let perm = match u.commands.as_deref() {
                None => Perm::All,
                Some(c) => c.parse().map_err(|_| {
                    format!(
                        "{}: expected \"all\", \"read\", \"readwrite\" or \"admin\", got {c:?}",
                        field("commands")
                    )
                })?,
            };
            out.push(UserSpec {
                name: u.name,
                sha256: hash,
                perm,
                keys: u.keys.filter(|k| !k.iter().any(|p| p == "*")),
                channels: u.channels.filter(|k| !k.iter().any(|p| p == "*")),
            });
        }
        if auth_timeout_ms == 0 {
            return Err("proxy.auth_timeout_ms: must be greater than 0".into());
        }
        if auth_failures_per_sec == 0 {
            return Err("proxy.auth_failures_per_sec: must be greater than 0".into());
        }
        Ok(AuthConfig {
            users: out,
            protected_mode,
            auth_timeout_ms,
            auth_failures_per_sec,
        })
    }

    /// Adds a user that may only read the proxy's views (`CLUSTER RING`,
    /// `INFO`, …): no key, no channel, no change. `shardis up`'s node
    /// watcher logs in as one, with a secret that lives only in memory.
    pub fn add_viewer(&mut self, name: &str, password: &str) {
        self.users.push(UserSpec {
            name: name.to_string(),
            sha256: sha256(password.as_bytes()),
            perm: Perm::Read,
            keys: Some(Vec::new()),
            channels: Some(Vec::new()),
        });
    }

    /// Protected mode: without users, a listener on an address other than
    /// loopback is refused unless `protected_mode = false`.
    pub fn check_protected(&self, field: &str, listen: &str) -> Result<(), String> {
        if self.has_users() || !self.protected_mode || is_loopback(listen) {
            return Ok(());
        }
        Err(format!(
            "{field}: {listen:?} is not a loopback address and no user is configured \
             (protected mode): set proxy.requirepass or [[users]], or proxy.protected_mode = false"
        ))
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            users: Vec::new(),
            protected_mode: true,
            auth_timeout_ms: DEFAULT_AUTH_TIMEOUT_MS,
            auth_failures_per_sec: DEFAULT_AUTH_FAILURES_PER_SEC,
        }
    }
}

/// True when `host:port` names a loopback host.
pub(crate) fn is_loopback(listen: &str) -> bool {
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

pub(crate) fn sha256(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// Lower-case hex of a digest, as ACL LIST prints it.
pub(crate) fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(s: &str) -> Option<[u8; 32]> {
    let s = s.as_bytes();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.chunks(2).enumerate() {
        let d = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(d, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserSection {
        UserSection {
            name: name.into(),
            password: Some("pw".into()),
            sha256: None,
            commands: None,
            keys: None,
            channels: None,
        }
    }

    #[test]
    fn requirepass_is_the_default_user_with_every_permission() {
        let c = AuthConfig::validate(Some("s".into()), vec![], true, 1, 1).unwrap();
        assert_eq!(c.users[0].name, "default");
        assert_eq!(c.users[0].perm, Perm::Admin);
        assert_eq!(
            hex(&c.users[0].sha256),
            "043a718774c572bd8a25adbeb1bfcd5c0256ae11cecf9f9c3f925d0e52beaf89"
        );
        let none = AuthConfig::validate(Some(String::new()), vec![], true, 1, 1).unwrap();
        assert!(!none.has_users());
    }

    #[test]
    fn bad_users_are_named() {
        let mut both = user("a");
        both.sha256 = Some("00".repeat(32));
        let mut nopass = user("a");
        nopass.password = None;
        let mut badhash = user("a");
        badhash.password = None;
        badhash.sha256 = Some("zz".into());
        let mut badperm = user("a");
        badperm.commands = Some("root".into());
        let cases = [
            (vec![user("a"), user("a")], "users[1].name"),
            (vec![user("a b")], "users[0].name"),
            (vec![both], "users[0].password"),
            (vec![nopass], "users[0].password"),
            (vec![badhash], "users[0].sha256"),
            (vec![badperm], "users[0].commands"),
        ];
        for (users, want) in cases {
            let err = AuthConfig::validate(None, users, true, 1, 1).unwrap_err();
            assert!(err.starts_with(want), "{err}");
        }
        let err = AuthConfig::validate(Some("x".into()), vec![user("default")], true, 1, 1);
        assert!(err.unwrap_err().contains("requirepass"));
    }

    #[test]
    fn protected_mode_refuses_other_than_loopback_without_users() {
        let open = AuthConfig::default();
        for ok in ["127.0.0.1:7000", "localhost:1", "[::1]:7000", "127.1.2.3:9"] {
            assert!(open.check_protected("proxy.listen", ok).is_ok(), "{ok}");
        }
        for bad in [
            "0.0.0.0:7000",
            "10.0.0.1:7000",
            "[::]:7000",
            "example.com:7000",
        ] {
            let err = open.check_protected("proxy.listen", bad).unwrap_err();
            assert!(err.contains("protected mode"), "{err}");
        }
        let off = AuthConfig {
            protected_mode: false,
            ..AuthConfig::default()
        };
        assert!(off.check_protected("proxy.listen", "0.0.0.0:7000").is_ok());
        let users = AuthConfig::validate(None, vec![user("a")], true, 1, 1).unwrap();
        assert!(users
            .check_protected("proxy.listen", "0.0.0.0:7000")
            .is_ok());
    }
}
