//! `up` keeps its nodes running: a node process that exits while `up` runs
//! (kill -9, a crash) is started again on its port — as a replica of its
//! shard's current primary once the proxy no longer routes to it as a
//! primary. So after a failover the old primary comes back as a replica
//! (empty, then fully synced), and under `--replicas 1` with `write_ack =
//! "replica"` the promoted primary soon has a replica to acknowledge its
//! writes again. A node the proxy still routes to as a primary after
//! [`RESTART_WAIT_MS`] (`on_primary_down = "fail"`, or no replica) comes
//! back as an empty primary, as a restarted cache node does. A node no
//! longer in `CLUSTER RING` (removed) is not restarted.
//!
//! Started by `up::run` beside the proxy; asks the proxy over its own port,
//! logged in as [`USER`] (a view-only user with an in-memory secret) when
//! the proxy has users.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::NodeSpawner;

/// The user the watcher logs in as when the proxy requires a password.
pub(super) const USER: &str = "shardis-up-watch";

/// Between two looks for exited node processes.
const WATCH_MS: u64 = 200;
/// How long a restart waits for the proxy to fail the node's shard over.
const RESTART_WAIT_MS: u64 = 10_000;

/// Watches `spawner`'s children until it stops; `proxy` is the proxy's address.
/// `login` is [`USER`]'s secret when the proxy has users.
pub(super) async fn watch(spawner: Arc<NodeSpawner>, proxy: String, login: Option<String>) {
    while !spawner.is_stopping() {
        tokio::time::sleep(Duration::from_millis(WATCH_MS)).await;
        for addr in spawner.take_exited() {
            tracing::warn!(node = %addr, "the node process exited; starting it again");
            tokio::spawn(restart(spawner.clone(), proxy.clone(), login.clone(), addr));
        }
    }
}

/// What `CLUSTER RING` says of `addr`.
enum Seen {
    /// The routed primary of a shard: wait for its failover.
    Primary,
    /// A replica of a shard whose primary is this address.
    ReplicaOf(String),
    /// Not a member (removed): leave it stopped.
    Gone,
}

fn seen(ring: &str, addr: &str) -> Seen {
    let mut shard = None;
    for l in ring.lines() {
        let mut parts = l.split_whitespace();
        let (Some(a), Some(b)) = (parts.next(), parts.next()) else {
            continue;
        };
        if b == addr && a != addr {
            return Seen::Primary;
        }
        if a == addr {
            shard = parts.find_map(|p| p.strip_prefix("replica_of=").map(str::to_string));
        }
    }
    let Some(shard) = shard else {
        return Seen::Gone;
    };
    ring.lines()
        .find_map(|l| {
            let mut parts = l.split_whitespace();
            (parts.next() == Some(shard.as_str()))
                .then(|| parts.next().map(str::to_string))
                .flatten()
        })
        .map_or(Seen::Gone, Seen::ReplicaOf)
}

/// `CLUSTER RING` from the proxy, after AUTH when `login` is set; empty on
/// any failure, an error text when the proxy refuses.
async fn ring(proxy: &str, login: Option<&str>) -> String {
    let timeout = Duration::from_secs(2);
    let call = async {
        let mut conn = shardis::client::Conn::connect(proxy, timeout).await?;
        if let Some(secret) = login {
            let ok = conn.call_str(&["AUTH", USER, secret]).await?;
            if ok.starts_with(b"-") {
                return Ok(ok);
            }
        }
        conn.call_str(&["CLUSTER", "RING"]).await
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(r)) => String::from_utf8_lossy(&r).into_owned(),
        _ => String::new(),
    }
}

async fn restart(spawner: Arc<NodeSpawner>, proxy: String, login: Option<String>, addr: String) {
    let Some(port) = addr
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
    else {
        return;
    };
    let deadline = Instant::now() + Duration::from_millis(RESTART_WAIT_MS);
    let mut refused = false;
    let replicaof = loop {
        if spawner.is_stopping() {
            return;
        }
        let ring = ring(&proxy, login.as_deref()).await;
        if ring.starts_with('-') && !refused {
            refused = true;
            tracing::warn!(node = %addr, reply = %ring.trim_end(), "the proxy refused CLUSTER RING");
        }
        match seen(&ring, &addr) {
            Seen::ReplicaOf(primary) => break Some(primary),
            Seen::Gone if !ring.is_empty() && !ring.starts_with('-') => return,
            _ if Instant::now() > deadline => break None,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    match spawner.start(port, replicaof.as_deref()).await {
        Ok(_) => tracing::warn!(node = %addr, replica_of = ?replicaof, "node started again"),
        Err(e) => tracing::warn!(node = %addr, "the node could not be started again: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_restarted_as_a_replica_of_its_shards_primary_once_failed_over() {
        let ring = "node1 127.0.0.1:7011 weight=1 repl=master offset=5\n\
                    127.0.0.1:7001 127.0.0.1:7001 replica_of=node1 state=down role=replica\n\
                    node2 127.0.0.1:7002 weight=1\n";
        assert!(
            matches!(seen(ring, "127.0.0.1:7001"), Seen::ReplicaOf(p) if p == "127.0.0.1:7011")
        );
        assert!(matches!(seen(ring, "127.0.0.1:7002"), Seen::Primary));
        assert!(matches!(seen(ring, "127.0.0.1:7003"), Seen::Gone));
    }
}
