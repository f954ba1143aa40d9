//! TLS towards clients (rustls, no OpenSSL): the `[tls]` settings, the
//! certificate and key read from PEM files, the acceptor the TLS listener
//! hands every new connection to, and the re-read of those files on
//! `SIGHUP` (`main.rs` catches the signal and calls [`request_reload`]).
//!
//! A reload swaps the acceptor for new connections only: connections
//! already open keep the session they negotiated, so no client is dropped.
//! A reload that fails (a missing or bad file) keeps the previous
//! certificate and says why in the log. Used by `proxy::run_with` (the TLS
//! accept loop). The PEM helpers are `client::tls`'s, shared with the
//! nodes' side.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

use crate::client::tls::{provider, read_certs, read_key, read_roots};

pub use crate::proxy::config::TlsConfig;

/// How long a client may take over its TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

/// The server side as configured: files read now.
fn server_config(c: &TlsConfig) -> Result<rustls::ServerConfig, String> {
    let certs = read_certs("tls.cert", &c.cert)?;
    let key = read_key("tls.key", &c.key)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls: {e}"))?;
    let builder = match &c.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let roots = read_roots("tls.client_ca", ca)?;
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots.into(),
                provider(),
            )
            .build()
            .map_err(|e| format!("tls.client_ca: {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls.key: {}: {e}", c.key.display()))
}

/// The acceptor for new TLS connections, swapped whole on reload. An
/// `ArcSwap`: read on every accept without a lock.
pub(crate) struct ServerTls {
    config: TlsConfig,
    acceptor: ArcSwap<TlsAcceptor>,
}

impl ServerTls {
    /// Reads the files; the error names the field and the file.
    pub(crate) fn load(config: &TlsConfig) -> Result<Arc<ServerTls>, String> {
        let acceptor = TlsAcceptor::from(Arc::new(server_config(config)?));
        Ok(Arc::new(ServerTls {
            config: config.clone(),
            acceptor: ArcSwap::from_pointee(acceptor),
        }))
    }

    pub(crate) fn acceptor(&self) -> Arc<TlsAcceptor> {
        self.acceptor.load_full()
    }

    /// Re-reads the files; on an error the previous acceptor stays.
    pub(crate) fn reload(&self) -> Result<(), String> {
        let fresh = TlsAcceptor::from(Arc::new(server_config(&self.config)?));
        self.acceptor.store(Arc::new(fresh));
        Ok(())
    }

    /// Reloads whenever [`request_reload`] is called, until `self` is the
    /// only owner left (the proxy is gone).
    pub(crate) fn follow_reloads(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                RELOAD.notified().await;
                let Some(tls) = weak.upgrade() else { return };
                match tls.reload() {
                    Ok(()) => {
                        tracing::info!(cert = %tls.config.cert.display(), "TLS certificate re-read")
                    }
                    Err(e) => {
                        tracing::warn!("TLS certificate not re-read, the previous one stays: {e}")
                    }
                }
            }
        });
    }
}

/// Wakes every TLS listener's reload (notify_waiters: a reload asked for
/// while none waits is not kept, and none is needed then).
static RELOAD: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Re-read every TLS certificate and key now (`SIGHUP`): the listeners'
/// (on their own tasks) and those towards the nodes (here).
pub fn request_reload() {
    RELOAD.notify_waiters();
    let (done, errors) = crate::client::tls::reload_all();
    if done > 0 {
        tracing::info!(settings = done, "TLS files towards the nodes re-read");
    }
    for e in errors {
        tracing::warn!("TLS files towards a node not re-read, the previous ones stay: {e}");
    }
}

/// The TLS accept loop: each connection takes a client slot, then does
/// its handshake (within [`TLS_HANDSHAKE_TIMEOUT_MS`]) on its own task
/// and is served as a plaintext one is. Ends when `stop` resolves; once
/// the proxy drains, new connections are closed at once.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    proxy: Arc<crate::proxy::Proxy>,
    tls: Arc<ServerTls>,
    stop: impl std::future::Future<Output = ()>,
) {
    use std::sync::atomic::Ordering;
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => a,
        };
        let sock = match accepted {
            Ok((sock, _)) => sock,
            Err(e) => {
                tracing::warn!(error = %e, "TLS accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        if proxy.draining.load(Ordering::SeqCst) {
            continue;
        }
        proxy.stats.connections.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = crate::proxy::ClientSlot::take(&proxy) else {
            // No room: closed before the handshake (an error line would
            // need a TLS session to carry it).
            proxy.stats.rejected.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let _ = sock.set_nodelay(true);
        let (p, acceptor) = (proxy.clone(), tls.acceptor());
        tokio::spawn(async move {
            let _slot = slot;
            let within = std::time::Duration::from_millis(TLS_HANDSHAKE_TIMEOUT_MS);
            let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
            match tokio::time::timeout(within, acceptor.accept(sock)).await {
                Ok(Ok(stream)) => crate::proxy::session::ClientSession::run_tls(p, stream).await,
                Ok(Err(e)) => tracing::info!(%peer, error = %e, "TLS handshake refused"),
                Err(_) => tracing::info!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// Starts the TLS listener when `[tls]` is set; dropping what it returns
/// stops it.
pub(crate) async fn start(
    proxy: &Arc<crate::proxy::Proxy>,
) -> Result<Option<tokio::sync::oneshot::Sender<()>>, String> {
    let Some(t) = &proxy.config().tls else {
        return Ok(None);
    };
    let tls = ServerTls::load(t)?;
    tls.follow_reloads();
    let l = crate::listen::listen(&t.listen)
        .await
        .map_err(|e| format!("cannot listen on {} (tls.listen): {e}", t.listen))?;
    tracing::info!(listen = %t.listen, mutual = t.client_ca.is_some(), "TLS listener ready");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let stopped = async move {
        let _ = stopped.await;
    };
    tokio::spawn(serve(l, proxy.clone(), tls, stopped));
    Ok(Some(stop))
}
