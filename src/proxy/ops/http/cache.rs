//! The REST cache API: `GET`, `PUT` (`?ttl=` seconds) and `DELETE` on
//! `/cache/<key>`, routed through the same ring, epoch gate, migration
//! tracking and upstream connections as RESP requests.
//!
//! The key is the rest of the path, percent-decoded to bytes; the value is
//! the raw body (binary-safe). Status codes: 200 value or stored, 204
//! deleted, 404 no such key, 400 bad key or ttl, 409 wrong type, 413 value
//! over `proxy.max_bulk_len`, 502 the node failed.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes as Body;
use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};

use crate::proxy::policy::lookup;
use crate::proxy::upstream::dirty::track_write;
use crate::proxy::upstream::topology;
use crate::proxy::Proxy;
use crate::resp::encode;
use crate::resp::reply::{integer, is_error};

/// Largest `?ttl=` accepted: Redis's limit for EX in seconds.
const MAX_TTL_S: i64 = i64::MAX / 1000;

pub(crate) async fn get(State(p): State<Arc<Proxy>>, uri: Uri) -> Response {
    let key = match key_of(&uri) {
        Ok(k) => k,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let r = call(&p, "get", &[b"GET", &key]).await;
    if r.starts_with(b"$-1") || r.starts_with(b"_") {
        return text(StatusCode::NOT_FOUND, "no such key\n");
    }
    if is_error(&r) {
        return node_error(&r);
    }
    match bulk_payload(&r) {
        Some(v) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            Bytes::copy_from_slice(v),
        )
            .into_response(),
        None => node_error(&r),
    }
}

pub(crate) async fn put(State(p): State<Arc<Proxy>>, uri: Uri, body: Body) -> Response {
    let key = match key_of(&uri) {
        Ok(k) => k,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    if body.len() > p.config().limits.max_bulk_len {
        return text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "value of {} bytes is over the limit of {} (proxy.max_bulk_len)\n",
                body.len(),
                p.config().limits.max_bulk_len
            ),
        );
    }
    let ttl = match ttl_of(&uri) {
        Ok(t) => t,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e),
    };
    let r = match ttl {
        Some(t) => {
            let t = t.to_string();
            call(&p, "set", &[b"SET", &key, &body, b"EX", t.as_bytes()]).await
        }
        None => call(&p, "set", &[b"SET", &key, &body]).await,
    };
    if r.starts_with(b"+OK") {
        text(StatusCode::OK, "OK\n")
    } else {
        node_error(&r)
    }
}

pub(crate) async fn delete(State(p): State<Arc<Proxy>>, uri: Uri) -> Response {
    let key = match key_of(&uri) {
        Ok(k) => k,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let r = call(&p, "del", &[b"DEL", &key]).await;
    match integer(&r) {
        Some(0) => text(StatusCode::NOT_FOUND, "no such key\n"),
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => node_error(&r),
    }
}

fn text(status: StatusCode, body: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.to_string(),
    )
        .into_response()
}

fn node_error(r: &[u8]) -> Response {
    let msg = String::from_utf8_lossy(r);
    let msg = msg.trim_start_matches('-').trim_end();
    let status = if msg.starts_with("WRONGTYPE") {
        StatusCode::CONFLICT
    } else {
        StatusCode::BAD_GATEWAY
    };
    text(status, &format!("{msg}\n"))
}

/// The key: the path after `/cache/`, percent-decoded.
fn key_of(uri: &Uri) -> Result<Vec<u8>, &'static str> {
    let raw = uri.path().strip_prefix("/cache/").unwrap_or("");
    let key = percent_decode(raw.as_bytes()).ok_or("malformed %-escape in the key\n")?;
    if key.is_empty() {
        return Err("missing key: use /cache/<key>\n");
    }
    Ok(key)
}

/// `?ttl=` as whole seconds, 1 or more; `None` without it.
fn ttl_of(uri: &Uri) -> Result<Option<i64>, String> {
    let Some(q) = uri.query() else {
        return Ok(None);
    };
    let Some(v) = q.split('&').find_map(|kv| kv.strip_prefix("ttl=")) else {
        return Ok(None);
    };
    match v.parse::<i64>() {
        Ok(t) if (1..=MAX_TTL_S).contains(&t) => Ok(Some(t)),
        _ => Err(format!(
            "invalid ttl {v:?}: expected whole seconds from 1 to {MAX_TTL_S}\n"
        )),
    }
}

fn percent_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hex = std::str::from_utf8(s.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The payload of a `$n\r\n…\r\n` reply.
fn bulk_payload(r: &[u8]) -> Option<&[u8]> {
    let nl = r.iter().position(|&b| b == b'\n')?;
    let n = usize::try_from(crate::resp::parse_i64(r.get(1..nl.checked_sub(1)?)?)?).ok()?;
    r.get(nl + 1..nl + 1 + n)
}

/// Sends one single-key command to its key's owner (args[1] is the key) and
/// waits for the reply, as a RESP request goes: through the one routing
/// primitive (`topology::enter`: waits out a cutover on a moving key, holds
/// the epoch gate while it is sent), marking a moving key dirty when a write
/// is answered.
async fn call(p: &Arc<Proxy>, name: &str, args: &[&[u8]]) -> Bytes {
    let started = Instant::now();
    if !crate::proxy::admin::store::is_serving(p.store.as_deref()) {
        let e = crate::proxy::conn::error::NOT_SERVING;
        return Bytes::from(format!("-{e}\r\n"));
    }
    let spec = lookup(name.as_bytes()).expect("GET, SET and DEL are in the command table");
    let key = args[1];
    p.ops.hot_keys.sample(key);
    let mut raw = BytesMut::new();
    encode::command(&mut raw, args);
    let client = p.next_client_id.fetch_add(1, Ordering::Relaxed);
    let key_bytes = Bytes::copy_from_slice(key);
    let rx = {
        let routing = topology::enter(&p.routing, || std::iter::once(&key_bytes)).await;
        let rx = routing
            .owner(key)
            .upstream(2, client)
            .send(raw.freeze())
            .await;
        match &routing.migration {
            Some(m) if spec.is_write() && routing.is_moving(key) => {
                track_write(&m.dirty, vec![key_bytes.clone()], rx)
            }
            _ => rx,
        }
    };
    let r = rx.await.unwrap_or_else(|_| {
        Bytes::from_static(b"-ERR upstream connection lost before the reply arrived\r\n")
    });
    let m = &p.ops.metrics;
    m.engaged(spec, 1);
    m.record(
        crate::proxy::ops::metrics::command_index(spec),
        started.elapsed().as_nanos() as u64,
        is_error(&r),
        false,
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_ttls_are_read_from_the_uri() {
        let uri: Uri = "/cache/a%20b%00c?ttl=5".parse().unwrap();
        assert_eq!(key_of(&uri).unwrap(), b"a b\0c");
        assert_eq!(ttl_of(&uri), Ok(Some(5)));
        for bad in ["0", "-1", "x", "1.5", ""] {
            let uri: Uri = format!("/cache/k?ttl={bad}").parse().unwrap();
            assert!(ttl_of(&uri).is_err(), "{bad}");
        }
        assert!(key_of(&"/cache/".parse().unwrap()).is_err());
        assert!(key_of(&"/cache/%zz".parse().unwrap()).is_err());
    }
}
