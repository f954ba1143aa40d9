//! `[tls]`: the client-side TLS listener's settings (conn/tls.rs serves them).

use std::path::PathBuf;

/// `[tls]`, validated: where the TLS listener binds and what it presents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    pub listen: String,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Clients must present a certificate this CA signed (mutual TLS).
    pub client_ca: Option<PathBuf>,
    /// Also serve plaintext on `proxy.listen` (false: TLS only).
    pub plaintext: bool,
}
