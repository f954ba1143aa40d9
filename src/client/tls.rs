//! TLS towards a node, as a client (rustls on ring, no OpenSSL): the
//! certificates and keys read from PEM files, and [`TlsTo`], what
//! `stream::connect` needs to open a TLS connection. The PEM helpers are
//! also the client-side listener's (`proxy::conn::tls`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

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
#[derive(Clone)]
pub struct TlsTo {
    connector: TlsConnector,
    server_name: Option<ServerName<'static>>,
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
            connector: TlsConnector::from(config),
            server_name,
        }
    }

    /// Reads the CA (and the client certificate and key, for mutual TLS)
    /// now.
    pub fn from_files(files: &TlsFiles) -> Result<TlsTo, String> {
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
        Ok(TlsTo::new(Arc::new(config), server_name))
    }

    pub(super) fn connector(&self) -> &TlsConnector {
        &self.connector
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
