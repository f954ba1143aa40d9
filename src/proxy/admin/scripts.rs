//! A node that joins the ring gets what every node has for scripts before
//! it serves a key: the libraries (`FUNCTION DUMP` of a node already in
//! the ring, `FUNCTION RESTORE … REPLACE` on the new one) and the script
//! bodies the proxy keeps (`route::scripts`, each sent as `SCRIPT LOAD`).
//! So `FCALL` and `EVALSHA` of keys that move to it keep working.
//!
//! Called by `admin::add_node` after its checks, before the change begins;
//! a refused login or `FUNCTION RESTORE` fails the ADDNODE with the ring
//! unchanged (a script body the node cannot compile is only logged: it
//! failed on the others too).

use std::time::Duration;

use crate::proxy::admin::error::AdminError;
use crate::proxy::route::scripts::load_request;
use crate::proxy::upstream::credentials::NodeCredentials;
use crate::proxy::upstream::topology::{all_nodes, Routing};
use crate::proxy::Proxy;
use crate::resp::reply::is_error;

/// Script loads written before their replies are read.
const LOAD_BATCH: usize = 256;

/// `FUNCTION LIST` with no library: nothing to restore.
const NO_LIBRARIES: &[u8] = b"*0\r\n";

/// Loads the ring's libraries and the kept script bodies on `addr`.
pub(crate) async fn carry(
    proxy: &Proxy,
    routing: &Routing,
    addr: &str,
    name: &str,
    login: &NodeCredentials,
    timeout: Duration,
) -> Result<(), AdminError> {
    let refused = |why: String| AdminError::ScriptsRefused {
        addr: addr.to_string(),
        why,
    };
    let dump = libraries(routing).await;
    let bodies = proxy.scripts.bodies();
    if dump.is_none() && bodies.is_empty() {
        return Ok(());
    }
    let unreachable = |e: crate::client::ClientError| AdminError::Unreachable {
        addr: addr.to_string(),
        why: e.terse(),
    };
    let mut conn = login
        .connect(addr, name, timeout)
        .await
        .map_err(unreachable)?;
    conn.set_timeout(timeout);
    if let Some(r) = login.open(name, &mut conn).await.map_err(unreachable)? {
        return Err(refused(text(&r)));
    }
    if let Some(payload) = dump {
        let r = conn
            .call(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"])
            .await
            .map_err(unreachable)?;
        if is_error(&r) {
            return Err(refused(format!("FUNCTION RESTORE: {}", text(&r))));
        }
    }
    // Pipelined, a batch at a time.
    for batch in bodies.chunks(LOAD_BATCH) {
        for body in batch {
            conn.queue_raw(&load_request(body));
        }
        let replies = conn.round_trip().await.map_err(unreachable)?;
        // A body no node could compile (an EVAL of a broken script is
        // kept before its reply is seen) fails here as it failed there.
        let failed = replies.iter().filter(|r| is_error(r)).count();
        if failed > 0 {
            tracing::warn!(
                node = name,
                failed,
                "a joining node refused scripts the proxy kept"
            );
        }
    }
    Ok(())
}

/// The payload of `FUNCTION DUMP` from the first primary that has a
/// library; `None` when none has (or none runs Redis 7's functions).
async fn libraries(routing: &Routing) -> Option<bytes::Bytes> {
    let node = all_nodes(routing).into_iter().next()?;
    let up = node.upstream(2, 0);
    let ask = |raw: &'static [u8]| async move {
        up.send(bytes::Bytes::from_static(raw)).await.await.ok()
    };
    let list = ask(b"*2\r\n$8\r\nFUNCTION\r\n$4\r\nLIST\r\n").await?;
    if &list[..] == NO_LIBRARIES || is_error(&list) {
        return None;
    }
    let dump = ask(b"*2\r\n$8\r\nFUNCTION\r\n$4\r\nDUMP\r\n").await?;
    bulk(&dump).map(bytes::Bytes::copy_from_slice)
}

/// The payload of a bulk string reply.
fn bulk(reply: &[u8]) -> Option<&[u8]> {
    let rest = reply.strip_prefix(b"$")?;
    let nl = rest.iter().position(|&c| c == b'\n')?;
    let len: usize = std::str::from_utf8(&rest[..nl])
        .ok()?
        .trim_end()
        .parse()
        .ok()?;
    rest.get(nl + 1..nl + 1 + len)
}

fn text(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply)
        .trim_start_matches(['-', '!'])
        .trim_end()
        .to_string()
}
