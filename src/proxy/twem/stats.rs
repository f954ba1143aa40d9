//! twemproxy's stats port: each connection gets one JSON object, in
//! nutcracker's shape, and is closed — the service, per pool, per server
//! (`nc_stats.c`). What an exporter or dashboard reads of nutcracker reads
//! the same here. Counts are read live when asked (nutcracker aggregates
//! every `-i` ms); `--describe-stats` prints the same list nutcracker does.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::stats_table::{POOL, SERVER};
use crate::proxy::Proxy;

/// What `nutcracker --describe-stats` prints after its banner.
pub fn describe() -> String {
    let mut out = String::from("pool stats:\n");
    for (name, what) in POOL {
        out += &format!("  {name:<20}\"{what}\"\n");
    }
    out += "\nserver stats:\n";
    for (name, what) in SERVER {
        out += &format!("  {name:<20}\"{what}\"\n");
    }
    out
}

/// The pools a stats port reports on.
pub(crate) struct Board {
    pub(crate) started: Instant,
    pub(crate) pools: Vec<(String, Arc<Proxy>)>,
}

/// Answers every connection on `listener` with the stats, then closes it.
pub(crate) async fn serve(listener: TcpListener, board: Arc<Board>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let text = json(&board);
        tokio::spawn(async move {
            let _ = sock.write_all(text.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The stats object, its keys in nutcracker's order.
pub(crate) fn json(board: &Board) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (mut total, mut curr) = (0u64, 0u64);
    let mut pools = String::new();
    for (name, proxy) in &board.pools {
        let stats = &proxy.stats;
        let clients = stats.clients.load(Ordering::Relaxed) as u64;
        // A listener is a connection to nutcracker, as are clients and servers.
        total += 1 + stats.connections.load(Ordering::Relaxed);
        curr += 1 + clients;
        let nodes = proxy.known_nodes();
        let forward_error: u64 = nodes
            .iter()
            .map(|n| n.health.wire.forward_errors.load(Ordering::Relaxed))
            .sum();
        let pool_values = [
            stats.client_eof.load(Ordering::Relaxed),
            stats.client_err.load(Ordering::Relaxed),
            clients,
            proxy.ejected.total.load(Ordering::Relaxed),
            forward_error,
            stats.fragments.load(Ordering::Relaxed),
        ];
        let _ = write!(pools, ", {}: {{", quote(name));
        for (i, ((key, _), v)) in POOL.iter().zip(pool_values).enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(pools, "{sep}\"{key}\":{v}");
        }
        for node in &nodes {
            let w = &node.health.wire;
            let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            total += get(&w.opened);
            curr += get(&w.connections);
            let out_queue = node.health.metrics.in_flight.load(Ordering::Relaxed);
            let values = [
                get(&w.eof),
                get(&w.err),
                get(&w.timedout),
                get(&w.connections),
                proxy.ejected.at(&node.spec.name).unwrap_or(0),
                get(&w.requests),
                get(&w.request_bytes),
                get(&w.responses),
                get(&w.response_bytes),
                0,
                0,
                out_queue,
                0,
            ];
            let _ = write!(pools, ", {}: {{", quote(&node.spec.name));
            for (i, ((key, _), v)) in SERVER.iter().zip(values).enumerate() {
                let sep = if i == 0 { "" } else { ", " };
                let _ = write!(pools, "{sep}\"{key}\":{v}");
            }
            pools.push('}');
        }
        pools.push('}');
    }
    format!(
        "{{\"service\":\"nutcracker\", \"source\":{}, \"version\":{}, \"uptime\":{}, \"timestamp\":{now}, \"total_connections\":{total}, \"curr_connections\":{curr}{pools}}}\n",
        quote(&hostname()),
        quote(env!("CARGO_PKG_VERSION")),
        board.started.elapsed().as_secs(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_description_is_laid_out_as_nutcracker_prints_it() {
        let d = super::describe();
        assert!(
            d.starts_with("pool stats:\n  client_eof          \"# eof on client connections\"\n")
        );
        assert!(d.contains(
            "\n\nserver stats:\n  server_eof          \"# eof on server connections\"\n"
        ));
        assert!(d.ends_with("  out_queue_bytes     \"current request bytes in outgoing queue\"\n"));
    }
}
