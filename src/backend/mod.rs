//! The built-in cache node (placeholder until the node lands).

use std::future::Future;

/// Settings of one built-in node.
#[derive(Clone, Debug, Default)]
pub struct NodeConfig {
    /// Bytes of keys and values before eviction; 0 = unlimited.
    pub maxmemory: u64,
}

/// Serves RESP clients until `shutdown` completes.
pub async fn run(
    _listener: tokio::net::TcpListener,
    _config: NodeConfig,
    _shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    Err(std::io::Error::other("built-in node not available"))
}
