//! TLS towards a node, as a client (rustls on ring, no OpenSSL): the
//! certificates and keys read from PEM files, and [`TlsTo`], what
//! `stream::connect` needs to open a TLS connection. The PEM helpers are
//! also the client-side listener's (`proxy::conn::tls`).
//!
//! A [`TlsTo`] read from files ([`TlsTo::shared_from_files`]) re-reads them
//! on [`reload_all`] (`SIGHUP`): new connections to its nodes use the new
//! CA and client certificate, connections already open keep their session,
//! and a reload that fails keeps the previous files' config.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use arc_swap::ArcSwap;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig};
use tokio_rustls::TlsConnector;

/// The crypto every TLS config here uses (ring).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in a PEM file (a chain: leaf first).
pub fn read_certs(field: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{field}: {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{field}: {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

/// The private key in a PEM file.
pub fn read_key(field: &str, path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{field}: {}: {e}", path.display()))
}

/// A root store of the CA certificates in a PEM file.
pub fn read_roots(field: &str, path: &Path) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certs(field, path)? {
        roots
            .add(c)
            .map_err(|e| format!("{field}: {}: {e}", path.display()))?;
    }
    Ok(roots)
}

/// One TLS setting towards a node, each part with the config field it
/// came from (errors name the field and the file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: (PathBuf, String),
    /// The proxy's certificate and key (mutual TLS).
    pub cert_key: Option<((PathBuf, String), (PathBuf, String))>,
    pub server_name: Option<(String, String)>,
}

/// How to speak TLS to a node: the client config (its CA, and the proxy's
/// certificate for mutual TLS) and the name its certificate must carry
/// (`None`: the host of the address connected to).
pub struct TlsTo {
    connector: ArcSwap<TlsConnector>,
    server_name: Option<ServerName<'static>>,
    /// Where the config came from, for [`reload_all`] (`None`: built in code).
    files: Option<TlsFiles>,
}

impl std::fmt::Debug for TlsTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.server_name {
            Some(n) => write!(f, "TlsTo({})", n.to_str()),
            None => write!(f, "TlsTo(the host of the address)"),
        }
    }
}

impl TlsTo {
    pub fn new(config: Arc<ClientConfig>, server_name: Option<ServerName<'static>>) -> TlsTo {
        TlsTo {
            connector: ArcSwap::from_pointee(TlsConnector::from(config)),
            server_name,
            files: None,
        }
    }

    /// Reads the CA (and the client certificate and key, for mutual TLS)
    /// now.
    pub fn from_files(files: &TlsFiles) -> Result<TlsTo, String> {
        let (config, server_name) = read_files(files)?;
        Ok(TlsTo {
            files: Some(files.clone()),
            ..TlsTo::new(config, server_name)
        })
    }

    /// As [`TlsTo::from_files`], and re-read on every [`reload_all`] for as
    /// long as it is in use.
    pub fn shared_from_files(files: &TlsFiles) -> Result<Arc<TlsTo>, String> {
        let tls = Arc::new(TlsTo::from_files(files)?);
        let mut all = lock(&RELOADABLE);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&tls));
        Ok(tls)
    }

    /// Reads its files again; on an error the previous config stays. The
    /// server name is part of the node's setting, not of a file: it stays.
    pub fn reload(&self) -> Result<(), String> {
        let Some(files) = &self.files else {
            return Ok(());
        };
        let (config, _) = read_files(files)?;
        self.connector.store(Arc::new(TlsConnector::from(config)));
        Ok(())
    }

    pub(super) fn connector(&self) -> Arc<TlsConnector> {
        self.connector.load_full()
    }

    /// The name `addr`'s certificate must carry: the configured one, else
    /// its host (brackets of an IPv6 address taken off).
    pub(super) fn name_for(&self, addr: &str) -> Result<ServerName<'static>, String> {
        if let Some(n) = &self.server_name {
            return Ok(n.clone());
        }
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(host.to_string())
            .map_err(|e| format!("{host:?} is not a server name for TLS: {e}"))
    }
}

/// The client config and server name `files` give, read now.
fn read_files(
    files: &TlsFiles,
) -> Result<(Arc<ClientConfig>, Option<ServerName<'static>>), String> {
    let (ca, ca_field) = &files.ca;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("{ca_field}: {e}"))?
        .with_root_certificates(read_roots(ca_field, ca)?);
    let config = match &files.cert_key {
        None => builder.with_no_client_auth(),
        Some(((cert, cert_field), (key, key_field))) => builder
            .with_client_auth_cert(read_certs(cert_field, cert)?, read_key(key_field, key)?)
            .map_err(|e| format!("{key_field}: {}: {e}", key.display()))?,
    };
    let server_name = match &files.server_name {
        None => None,
        Some((n, field)) => Some(
            ServerName::try_from(n.clone())
                .map_err(|e| format!("{field}: {n:?} is not a server name: {e}"))?,
        ),
    };
    Ok((Arc::new(config), server_name))
}

/// Every [`TlsTo`] read from files and still in use.
static RELOADABLE: Mutex<Vec<Weak<TlsTo>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Re-reads the files of every [`TlsTo`] in use (`SIGHUP`). Returns how many
/// were re-read and the errors of those that kept their previous config.
pub fn reload_all() -> (usize, Vec<String>) {
    let live: Vec<Arc<TlsTo>> = {
        let mut all = lock(&RELOADABLE);
        all.retain(|w| w.strong_count() > 0);
        all.iter().filter_map(Weak::upgrade).collect()
    };
    let mut errors = Vec::new();
    let mut done = 0;
    for t in &live {
        match t.reload() {
            Ok(()) => done += 1,
            Err(e) => errors.push(e),
        }
    }
    (done, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_is_the_host_of_the_address_unless_configured() {
        let config = ClientConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(tokio_rustls::rustls::RootCertStore::empty())
        .with_no_client_auth();
        let config = Arc::new(config);
        let t = TlsTo::new(config.clone(), None);
        assert_eq!(t.name_for("127.0.0.1:6380").unwrap().to_str(), "127.0.0.1");
        assert_eq!(t.name_for("[::1]:6380").unwrap().to_str(), "::1");
        assert_eq!(
            t.name_for("redis.internal:1").unwrap().to_str(),
            "redis.internal"
        );
        assert!(t.name_for("bad name:1").is_err());
        let named = TlsTo::new(config, Some(ServerName::try_from("n1.example").unwrap()));
        assert_eq!(named.name_for("10.0.0.1:1").unwrap().to_str(), "n1.example");
        assert!(format!("{named:?}").contains("n1.example"));
    }
}
