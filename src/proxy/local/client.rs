//! CLIENT as the proxy answers it: the subcommands client libraries send
//! during a handshake (SETNAME, GETNAME, ID, SETINFO, INFO, LIST, NO-EVICT,
//! NO-TOUCH, HELP), about this one client connection, in Redis's replies.
//!
//! Called by `local::handle`; it never talks to a node.

use bytes::{Bytes, BytesMut};

use super::{help, is_valid_client_name};
use crate::proxy::session::ClientSession;
use crate::resp::{encode, eq_ignore_case, parse_i64};

pub(super) async fn client(s: &mut ClientSession, args: &[Bytes]) {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let mut out = BytesMut::new();
    match (sub.as_str(), args.len()) {
        ("setname", 3) => {
            if !is_valid_client_name(&args[2]) {
                return s
                    .error(
                        "ERR Client names cannot contain spaces, newlines or special characters.",
                    )
                    .await;
            }
            s.name = if args[2].is_empty() {
                None
            } else {
                Some(args[2].clone())
            };
            encode::simple(&mut out, "OK");
        }
        ("getname", 2) => match &s.name {
            Some(n) => encode::bulk(&mut out, n),
            None => encode::null(&mut out, s.proto),
        },
        ("id", 2) => encode::integer(&mut out, s.id as i64),
        ("setinfo", 4) => {
            let attr = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
            if attr != "lib-name" && attr != "lib-ver" {
                return s
                    .error(&format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(&args[2])
                    ))
                    .await;
            }
            encode::simple(&mut out, "OK");
        }
        ("list", n) if n > 2 => {
            if let Some(e) = client_list_filter_error(&args[2..]) {
                return s.error(&e).await;
            }
            // The filters (TYPE normal, ID of this client) can only select
            // this connection, the one client the proxy lists.
            let own = b"normal".eq_ignore_ascii_case(&args[3])
                || args[3..].iter().any(|a| parse_i64(a) == Some(s.id as i64));
            let line = client_line(s);
            encode::verbatim(&mut out, if own { line.as_bytes() } else { b"" }, s.proto);
        }
        ("help", 2) => help(&mut out, "CLIENT", CLIENT_HELP),
        ("info", 2) | ("list", 2) => {
            let line = client_line(s);
            encode::verbatim(&mut out, line.as_bytes(), s.proto);
        }
        ("no-evict" | "no-touch", 3) => {
            if !eq_ignore_case(&args[2], b"on") && !eq_ignore_case(&args[2], b"off") {
                return s.error("ERR syntax error").await;
            }
            encode::simple(&mut out, "OK")
        }
        (
            "setname" | "getname" | "id" | "setinfo" | "info" | "no-evict" | "no-touch" | "help",
            _,
        ) => {
            return s
                .error(&format!(
                    "ERR wrong number of arguments for 'client|{sub}' command"
                ))
                .await;
        }
        _ => {
            return s
                .error(&format!(
                    "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                    String::from_utf8_lossy(&args[1])
                ))
                .await
        }
    }
    s.reply(out).await;
}

/// This client's line in CLIENT LIST / CLIENT INFO.
fn client_line(s: &ClientSession) -> String {
    format!(
        "id={} addr={} name={} db=0 resp={} lib=shardis-proxy\n",
        s.id,
        s.peer,
        s.name
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default(),
        s.proto
    )
}

/// Redis's error for CLIENT LIST's filters (`TYPE t` or `ID id…`), if any.
fn client_list_filter_error(filters: &[Bytes]) -> Option<String> {
    if filters.len() == 2 && eq_ignore_case(&filters[0], b"type") {
        let t = &filters[1];
        let known = [&b"normal"[..], b"master", b"replica", b"slave", b"pubsub"];
        if known.iter().any(|k| eq_ignore_case(t, k)) {
            return None;
        }
        return Some(format!(
            "ERR Unknown client type '{}'",
            String::from_utf8_lossy(t)
        ));
    }
    if filters.len() >= 2 && eq_ignore_case(&filters[0], b"id") {
        if filters[1..].iter().all(|a| parse_i64(a).is_some()) {
            return None;
        }
        return Some("ERR Invalid client ID".into());
    }
    Some("ERR syntax error".into())
}

const CLIENT_HELP: &[&str] = &[
    "GETNAME",
    "ID",
    "INFO",
    "LIST [TYPE <type>] [ID <id> [<id> ...]]",
    "NO-EVICT (ON|OFF)",
    "NO-TOUCH (ON|OFF)",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "SETNAME <name>",
    "HELP",
];
