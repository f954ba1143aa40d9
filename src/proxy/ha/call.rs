//! The control path's calls to a shard member (probes, promotion, the
//! repointing of replicas, the planned failover's checks): each on its own
//! connection, after `AUTH` with the shard's credentials when the nodes
//! want a password (`[backend_auth]`, or the shard's `[[nodes]]` entry —
//! a shard's members share it, as a replica must authenticate to whichever
//! member is its primary).
//!
//! Called by `monitor.rs`, `failover.rs` and `admin.rs`; never on the
//! request path.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::client::{ClientError, Conn, TlsTo};
use crate::proxy::upstream::credentials::{self, Credentials};
use crate::proxy::Proxy;
use crate::resp::reply::is_error;

/// What the members of `shard` are sent before anything else, if anything.
pub(crate) fn creds(proxy: &Proxy, shard: &str) -> Option<Arc<Credentials>> {
    proxy.config().node_auth.for_node(shard)
}

/// `args` on a new connection to `addr`, a member of `shard`, within
/// `timeout`; a refused AUTH is the reply.
pub(crate) async fn call(
    proxy: &Proxy,
    shard: &str,
    addr: &str,
    args: &[&[u8]],
    timeout: Duration,
) -> Result<Bytes, ClientError> {
    credentials::probe(addr, shard, &proxy.config().node_auth, args, timeout).await
}

/// How the members of `shard` are reached: over TLS or not.
pub(crate) fn tls(proxy: &Proxy, shard: &str) -> Option<Arc<TlsTo>> {
    proxy.config().node_auth.tls.for_node(shard)
}

/// A connection to `addr` for repeated probes (over `tls` when set),
/// authenticated with `creds`. A refused AUTH still leaves a connection:
/// the member is alive, and its replies (errors) say why it cannot be used.
pub(crate) async fn connect(
    addr: &str,
    tls: Option<&TlsTo>,
    creds: Option<&Credentials>,
    timeout: Duration,
) -> Result<Conn, ClientError> {
    let mut c = Conn::connect_over(addr, tls, timeout).await?;
    if let Some(cr) = creds {
        let r = c.call(&cr.auth_args()).await?;
        if is_error(&r) {
            tracing::warn!(member = %addr, user = %cr.user(), "the member refused the proxy's AUTH");
        }
    }
    Ok(c)
}

/// Makes `addr`, a member of `shard`, replicate from `primary`: first its
/// `masteruser`/`masterauth` are set to the shard's credentials (when the
/// nodes want a password), so its link can authenticate to the primary,
/// then `REPLICAOF host port`. One connection; the reply is REPLICAOF's, or
/// the first error.
pub(crate) async fn repoint(
    proxy: &Proxy,
    shard: &str,
    addr: &str,
    primary: &str,
    timeout: Duration,
) -> Result<Bytes, ClientError> {
    let (host, port) = primary.rsplit_once(':').unwrap_or((primary, "0"));
    let (creds, tls) = (creds(proxy, shard), tls(proxy, shard));
    let work = async {
        let mut c = connect(addr, tls.as_deref(), creds.as_deref(), timeout).await?;
        if let Some(cr) = &creds {
            let user = cr.username.as_deref().unwrap_or("");
            let set: [&[u8]; 6] = [
                b"CONFIG",
                b"SET",
                b"masteruser",
                user.as_bytes(),
                b"masterauth",
                cr.password.as_bytes(),
            ];
            let r = c.call(&set).await?;
            if is_error(&r) {
                return Ok(r);
            }
        }
        c.call(&[b"REPLICAOF", host.as_bytes(), port.as_bytes()])
            .await
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| ClientError::ReadTimeout)?
}
