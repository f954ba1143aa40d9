//! `[tls]`: the client-side TLS listener's settings (conn/tls.rs serves them);
//! `[backend_tls]` and `[[nodes]] tls`, `tls_*`: TLS towards the nodes, read
//! into the client configs every connection to a node uses.

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

use std::sync::Arc;

use super::file::{BackendTlsSection, NodeSection};
use crate::client::tls::{TlsFiles, TlsTo};

/// One value and the config field it came from.
type Sourced = Option<(String, String)>;

/// The TLS every node gets unless its entry says otherwise: `[backend_tls]`
/// with `enabled` (the default when the section is there), files read now.
pub(super) fn backend_default(
    section: Option<&BackendTlsSection>,
) -> Result<Option<Arc<TlsTo>>, String> {
    match section {
        Some(s) if s.enabled => load("backend_tls", &pick(None, s, "backend_tls")).map(Some),
        _ => Ok(None),
    }
}

/// What `[[nodes]]` entry `i` records: `None` when it is reached as the
/// default says, `Some(tls)` when it differs (its own `tls`, `tls_*`).
pub(super) fn node(
    i: usize,
    n: &NodeSection,
    section: Option<&BackendTlsSection>,
    default: &Option<Arc<TlsTo>>,
) -> Result<Option<Option<Arc<TlsTo>>>, String> {
    let field = format!("nodes[{i}]");
    let own = [&n.tls_ca, &n.tls_cert, &n.tls_key, &n.tls_server_name];
    let on = n.tls.unwrap_or(default.is_some());
    if !on {
        if own.iter().any(|f| f.is_some()) {
            return Err(format!(
                "{field}.tls: the entry's tls_* settings are used only with tls = true"
            ));
        }
        return Ok(default.is_some().then_some(None));
    }
    if own.iter().all(|f| f.is_none()) && default.is_some() {
        return Ok(None);
    }
    let empty = BackendTlsSection {
        enabled: false,
        ca: None,
        cert: None,
        key: None,
        server_name: None,
    };
    let files = pick(Some((n, &field)), section.unwrap_or(&empty), "backend_tls");
    load(&field, &files).map(|t| Some(Some(t)))
}

/// Each setting from the entry when it has it, else from the section,
/// with the field it came from.
struct Picked {
    ca: Sourced,
    cert: Sourced,
    key: Sourced,
    server_name: Sourced,
}

fn pick(entry: Option<(&NodeSection, &str)>, s: &BackendTlsSection, sec: &str) -> Picked {
    let one = |own: Option<&Option<String>>, name: &str, dflt: &Option<String>, dname: &str| match (
        own.and_then(|o| o.clone()),
        entry,
    ) {
        (Some(v), Some((_, f))) => Some((v, format!("{f}.tls_{name}"))),
        _ => dflt.clone().map(|v| (v, format!("{sec}.{dname}"))),
    };
    let n = entry.map(|(n, _)| n);
    Picked {
        ca: one(n.map(|n| &n.tls_ca), "ca", &s.ca, "ca"),
        cert: one(n.map(|n| &n.tls_cert), "cert", &s.cert, "cert"),
        key: one(n.map(|n| &n.tls_key), "key", &s.key, "key"),
        server_name: one(
            n.map(|n| &n.tls_server_name),
            "server_name",
            &s.server_name,
            "server_name",
        ),
    }
}

/// Reads the picked files into a client config; `field` names what needs a CA.
fn load(field: &str, p: &Picked) -> Result<Arc<TlsTo>, String> {
    let Some((ca, ca_field)) = p.ca.clone() else {
        let which = if field == "backend_tls" {
            "backend_tls.ca".to_string()
        } else {
            format!("{field}.tls_ca (or backend_tls.ca)")
        };
        return Err(format!(
            "{which}: TLS towards a node needs the CA that signed its certificate"
        ));
    };
    let cert_key = match (p.cert.clone(), p.key.clone()) {
        (None, None) => None,
        (Some((c, cf)), Some((k, kf))) => Some(((PathBuf::from(c), cf), (PathBuf::from(k), kf))),
        (Some((_, cf)), None) => return Err(format!("{cf}: a client certificate needs its key")),
        (None, Some((_, kf))) => return Err(format!("{kf}: a client key needs its certificate")),
    };
    let files = TlsFiles {
        ca: (PathBuf::from(ca), ca_field),
        cert_key,
        server_name: p.server_name.clone(),
    };
    TlsTo::shared_from_files(&files)
}
