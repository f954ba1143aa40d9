//! One request dispatched with its panics contained (see [`dispatch`]),
//! and the fault injection that proves it. Called by the session loop only.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::error::internal_error;
use crate::proxy::conn::pending::Pending;
use crate::proxy::Proxy;
use crate::resp::Request;

/// Routes one request with its panics contained: a handler that panics
/// (while dispatching, or later while building the reply) costs the client
/// that one reply, answered `-ERR internal error …`, and the session goes on.
/// The panic itself is logged by the process's panic hook.
pub(crate) async fn dispatch(proxy: &Arc<Proxy>, state: &mut ClientState, req: Request) -> Pending {
    // A reference, not a copy: the name is only spelled out after a panic.
    let name = req.args[0].clone();
    let id = state.id;
    let routed = AssertUnwindSafe(async {
        fault_panic(&name);
        crate::proxy::dispatch::dispatch(proxy, state, req).await
    })
    .catch_unwind()
    .await;
    match routed {
        Ok(Pending::Later(f)) => {
            let proxy = proxy.clone();
            Pending::Later(Box::pin(
                AssertUnwindSafe(f)
                    .catch_unwind()
                    .map(move |r| r.unwrap_or_else(|_| internal_error(&proxy, id, &name))),
            ))
        }
        Ok(p) => p,
        Err(_) => Pending::Ready(internal_error(proxy, id, &name)),
    }
}

/// Fault injection for tests: with `SHARDIS_FAULT_PANIC_ON=<command>` the
/// proxy panics while dispatching that command, to prove a panic costs one
/// reply and nothing else. Read once.
fn fault_panic(command: &[u8]) {
    static ON: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let on = ON.get_or_init(|| std::env::var("SHARDIS_FAULT_PANIC_ON").ok());
    if let Some(on) = on {
        if on.as_bytes().eq_ignore_ascii_case(command) {
            panic!("fault injected by SHARDIS_FAULT_PANIC_ON={on}");
        }
    }
}
