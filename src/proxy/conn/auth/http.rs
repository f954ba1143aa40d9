//! The admin HTTP listener's credentials: once users exist, the REST cache
//! API (`/cache/<key>`: it reveals values and changes them) takes the same
//! users as the RESP port, as HTTP basic auth (`user:password`) or a bearer
//! token (the `default` user's password). Reading needs the `read` class,
//! PUT and DELETE `readwrite`; a user with key patterns is refused there
//! (the API names keys in its path, and is meant for operators). Failed
//! attempts count against the client address as on the RESP port.
//!
//! Pure but for the guard's counters: called by `ops::http` per request.

use std::net::IpAddr;
use std::time::Instant;

use base64::Engine;

use super::perm::Perm;
use super::Auth;

/// Why a request was refused: its status code and a one-line body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// 401: no credentials, or wrong ones.
    Unauthorized(&'static str),
    /// 403: the user may not do this.
    Forbidden(&'static str),
    /// 429: too many failed attempts from this address.
    TooMany,
}

/// True when a request to `path` needs credentials.
pub(crate) fn is_guarded(path: &str) -> bool {
    path == "/cache" || path.starts_with("/cache/")
}

/// Checks the `Authorization` header of a request to the cache API.
pub(crate) fn check(
    auth: &Auth,
    authorization: Option<&[u8]>,
    writes: bool,
    peer: Option<IpAddr>,
) -> Result<(), Refused> {
    let Some(users) = auth.users() else {
        return Ok(());
    };
    let Some(h) = authorization else {
        return Err(Refused::Unauthorized("credentials required\n"));
    };
    let (name, pass): (Vec<u8>, Vec<u8>) = if let Some(b) = strip(h, b"Basic ") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b.trim_ascii())
            .map_err(|_| Refused::Unauthorized("malformed basic credentials\n"))?;
        match decoded.iter().position(|&c| c == b':') {
            Some(i) => (decoded[..i].to_vec(), decoded[i + 1..].to_vec()),
            None => return Err(Refused::Unauthorized("malformed basic credentials\n")),
        }
    } else if let Some(t) = strip(h, b"Bearer ") {
        (b"default".to_vec(), t.trim_ascii().to_vec())
    } else {
        return Err(Refused::Unauthorized(
            "expected basic or bearer credentials\n",
        ));
    };
    let now = Instant::now();
    if !users.guard.may_try(peer, now) {
        return Err(Refused::TooMany);
    }
    let Some(user) = users.verify(&name, &pass) else {
        users.guard.failed(peer, now);
        tracing::info!(peer = ?peer, user = %super::users::loggable(&name.into()), "admin HTTP authentication failed");
        return Err(Refused::Unauthorized("invalid username-password pair\n"));
    };
    let need = if writes { Perm::ReadWrite } else { Perm::Read };
    if user.perm < need {
        return Err(Refused::Forbidden("this user may not do that\n"));
    }
    if user.has_key_patterns() {
        return Err(Refused::Forbidden(
            "a user with key patterns cannot use the cache API\n",
        ));
    }
    Ok(())
}

fn strip<'a>(h: &'a [u8], scheme: &[u8]) -> Option<&'a [u8]> {
    (h.len() >= scheme.len() && h[..scheme.len()].eq_ignore_ascii_case(scheme))
        .then(|| &h[scheme.len()..])
}

#[cfg(test)]
mod tests {
    use super::super::config::{AuthConfig, UserSection};
    use super::*;
    use std::sync::Arc;

    fn auth() -> Auth {
        let reader = UserSection {
            name: "reader".into(),
            password: Some("rpw".into()),
            sha256: None,
            commands: Some("read".into()),
            keys: None,
            channels: None,
        };
        let c = AuthConfig::validate(Some("secret".into()), vec![reader], true, 1, 100).unwrap();
        Auth::Users(Arc::new(super::super::Users::from_config(&c).unwrap()))
    }

    #[test]
    fn the_cache_api_takes_basic_or_bearer_credentials_and_checks_the_class() {
        let a = auth();
        let basic = |s: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(s)
            )
        };
        let ok = |h: &str, w: bool| check(&a, Some(h.as_bytes()), w, None);
        assert!(ok(&basic("reader:rpw"), false).is_ok());
        assert_eq!(
            ok(&basic("reader:rpw"), true),
            Err(Refused::Forbidden("this user may not do that\n"))
        );
        assert!(ok(&basic("default:secret"), true).is_ok());
        assert!(ok("Bearer secret", true).is_ok());
        assert!(ok("bearer secret", false).is_ok());
        assert!(matches!(
            ok("Bearer nope", false),
            Err(Refused::Unauthorized(_))
        ));
        assert!(matches!(
            ok(&basic("reader"), false),
            Err(Refused::Unauthorized(_))
        ));
        assert!(matches!(
            ok("Digest x", false),
            Err(Refused::Unauthorized(_))
        ));
        assert!(matches!(
            check(&a, None, false, None),
            Err(Refused::Unauthorized(_))
        ));
        assert!(check(&Auth::Open, None, true, None).is_ok());
        assert!(is_guarded("/cache/k") && is_guarded("/cache/") && !is_guarded("/metrics"));
    }
}
