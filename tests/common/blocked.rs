//! Which kinds of node this machine runs, and how many clients the nodes
//! count as blocked (INFO `blocked_clients`), for the blocking tests.

use std::time::{Duration, Instant};

use super::*;

/// Built-in nodes always; redis-server nodes when it is installed (a
/// failure under SHARDIS_REQUIRE_REDIS=1 when it is not).
pub fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::Builtin];
    if Backend::Redis.is_available() {
        all.push(Backend::Redis);
    }
    all
}

/// Clients blocked right now, summed over the nodes (INFO on each).
pub fn blocked_on_nodes(nodes: &[Proc]) -> u64 {
    nodes
        .iter()
        .map(|n| Raw::connect(n.port).info_field("clients", "blocked_clients"))
        .sum()
}

/// Waits until the nodes count `n` blocked clients.
pub fn wait_blocked_on_nodes(nodes: &[Proc], n: u64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let now = blocked_on_nodes(nodes);
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "{now} clients blocked, not {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
