//! The text of a MONITOR line: redis-server 7's format (`replicationFeedMonitors`
//! with `sdscatrepr`), its redactions and the commands it never shows, plus
//! the node that served the command. Pure: called by `monitor` only.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::resp::eq_ignore_case;

/// Commands Redis never shows to monitors (its `admin` and `skip_monitor`
/// flags) among those the proxy runs.
pub(super) fn is_hidden(args: &[Bytes]) -> bool {
    let name = &args[0];
    let hidden = [
        &b"monitor"[..],
        b"config",
        b"slowlog",
        b"cluster",
        b"debug",
        b"shutdown",
    ];
    if hidden.iter().any(|h| eq_ignore_case(name, h)) {
        return true;
    }
    if eq_ignore_case(name, b"client") && args.len() > 1 {
        let admin = [&b"list"[..], b"kill", b"no-evict", b"pause", b"unpause"];
        return admin.iter().any(|a| eq_ignore_case(&args[1], a));
    }
    false
}

/// One monitor line, `+…\r\n`: time, `[db addr]`, each argument quoted and
/// escaped as Redis's `sdscatrepr` does (AUTH's secrets redacted), then
/// ` -> ` and who served it.
pub(crate) fn line(at: SystemTime, peer: &str, args: &[Bytes], served_by: &str) -> Vec<u8> {
    let t = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut out = format!("+{}.{:06} [0 {peer}]", t.as_secs(), t.subsec_micros()).into_bytes();
    let redacted = redacted(args);
    for (i, a) in args.iter().enumerate() {
        out.push(b' ');
        if redacted.contains(&i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            repr(&mut out, a);
        }
    }
    out.extend_from_slice(b" -> ");
    // A node's name is the operator's; keep the line one line.
    out.extend(served_by.bytes().filter(|&c| c != b'\r' && c != b'\n'));
    out.extend_from_slice(b"\r\n");
    out
}

/// The positions Redis redacts: AUTH's arguments, HELLO's AUTH pair.
fn redacted(args: &[Bytes]) -> Vec<usize> {
    if eq_ignore_case(&args[0], b"auth") {
        return (1..args.len()).collect();
    }
    if eq_ignore_case(&args[0], b"hello") {
        let mut out = Vec::new();
        let mut i = 2;
        while i < args.len() {
            if eq_ignore_case(&args[i], b"auth") && i + 2 < args.len() {
                out.extend([i + 1, i + 2]);
                i += 3;
            } else if eq_ignore_case(&args[i], b"setname") {
                i += 2;
            } else {
                i += 1;
            }
        }
        return out;
    }
    Vec::new()
}

/// Redis's `sdscatrepr`: quoted, `\\ \" \n \r \t \a \b` escaped, other
/// bytes outside printable ASCII as `\xhh`.
fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn args(v: &[&[u8]]) -> Vec<Bytes> {
        v.iter().map(|a| Bytes::copy_from_slice(a)).collect()
    }

    #[test]
    fn lines_quote_and_escape_as_redis_does() {
        let at = UNIX_EPOCH + Duration::from_micros(1_796_138_977_565_190);
        let l = line(
            at,
            "127.0.0.1:51132",
            &args(&[b"SET", b"k", b"a\x00b\n\"c"]),
            "n1",
        );
        assert_eq!(
            l,
            b"+1796138977.565190 [0 127.0.0.1:51132] \"SET\" \"k\" \"a\\x00b\\n\\\"c\" -> n1\r\n"
        );
        let l = line(
            at,
            "p:1",
            &args(&[b"GET", "é".as_bytes(), b"\\\t\r\x07\x08\x7f"]),
            "proxy",
        );
        assert!(l.ends_with(b"\"GET\" \"\\xc3\\xa9\" \"\\\\\\t\\r\\a\\b\\x7f\" -> proxy\r\n"));
    }

    #[test]
    fn auth_and_hello_secrets_are_redacted() {
        let at = UNIX_EPOCH;
        let l = line(at, "p:1", &args(&[b"AUTH", b"u", b"pw"]), "proxy");
        assert!(l.ends_with(b"\"AUTH\" \"(redacted)\" \"(redacted)\" -> proxy\r\n"));
        let l = line(
            at,
            "p:1",
            &args(&[b"HELLO", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"x"]),
            "proxy",
        );
        assert!(l.ends_with(
            b"\"HELLO\" \"3\" \"AUTH\" \"(redacted)\" \"(redacted)\" \"SETNAME\" \"x\" -> proxy\r\n"
        ));
    }

    #[test]
    fn admin_commands_are_not_shown() {
        assert!(is_hidden(&args(&[b"CONFIG", b"GET", b"x"])));
        assert!(is_hidden(&args(&[b"client", b"LIST"])));
        assert!(!is_hidden(&args(&[b"CLIENT", b"INFO"])));
        assert!(!is_hidden(&args(&[b"GET", b"k"])));
    }
}
