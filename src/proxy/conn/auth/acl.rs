//! ACL WHOAMI, LIST, USERS and CAT, answered by the proxy from its own
//! users (without users, Redis's passwordless `default` user). Users are
//! set in the config file, so the subcommands that change them are refused.
//! Called by `commands::local`.

use bytes::{Bytes, BytesMut};

use super::Auth;
use crate::catalogue::{BLOCKING, FAST, READONLY, TABLE, WRITE};
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::resp::encode;

/// Redis 7.0's categories, in the order ACL CAT prints them.
const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// What the `default` user looks like without users (Redis 7.0's default).
const OPEN_DEFAULT: &str = "user default on nopass ~* &* +@all";

pub(crate) fn handle(auth: &Auth, s: &ClientState, args: &[Bytes]) -> Pending {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let mut out = BytesMut::new();
    match (sub.as_str(), args.len()) {
        ("whoami", 2) => {
            let name = s.user.as_ref().map_or("default", |u| u.name.as_str());
            encode::bulk(&mut out, name.as_bytes());
        }
        ("users", 2) => {
            let names: Vec<String> = match auth.users() {
                Some(u) => u.all().iter().map(|u| u.name.clone()).collect(),
                None => vec!["default".into()],
            };
            encode::array_len(&mut out, names.len());
            for n in names {
                encode::bulk(&mut out, n.as_bytes());
            }
        }
        ("list", 2) => {
            let lines: Vec<String> = match auth.users() {
                Some(u) => u.all().iter().map(|u| u.acl_line()).collect(),
                None => vec![OPEN_DEFAULT.into()],
            };
            encode::array_len(&mut out, lines.len());
            for l in lines {
                encode::bulk(&mut out, l.as_bytes());
            }
        }
        ("cat", 2) => {
            encode::array_len(&mut out, CATEGORIES.len());
            for c in CATEGORIES {
                encode::bulk(&mut out, c.as_bytes());
            }
        }
        ("cat", 3) => {
            let cat = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
            if !CATEGORIES.contains(&cat.as_str()) {
                return Pending::error(&format!(
                    "ERR Unknown category '{}'",
                    String::from_utf8_lossy(&args[2])
                ));
            }
            // The categories the catalogue's flags can tell; others are empty.
            let flag = match cat.as_str() {
                "read" => READONLY,
                "write" => WRITE,
                "fast" => FAST,
                "blocking" => BLOCKING,
                _ => 0,
            };
            let names: Vec<&str> = TABLE
                .iter()
                .filter(|c| flag != 0 && c.flags & flag != 0)
                .map(|c| c.name)
                .collect();
            encode::array_len(&mut out, names.len());
            for n in names {
                encode::bulk(&mut out, n.as_bytes());
            }
        }
        ("whoami" | "users" | "list", _) => {
            return Pending::error(&format!(
                "ERR wrong number of arguments for 'acl|{sub}' command"
            ));
        }
        _ => {
            return Pending::error(&format!(
                "ERR ACL {} is not supported by shardis: users are set in the config file ([[users]], proxy.requirepass)",
                sub.to_ascii_uppercase()
            ));
        }
    }
    Pending::ready(out)
}
