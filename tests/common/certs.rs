//! Test certificates, made by rcgen at test time into a test's temp dir
//! (never committed), and the check that redis-cli speaks TLS.

use std::path::{Path, PathBuf};
use std::process::Command;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

use super::{have_tool, output, skip};

/// A CA that signs certificates into the test's temp dir.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    pub pem: PathBuf,
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        let pem = dir.join(format!("{name}.crt"));
        std::fs::write(&pem, cert.pem()).unwrap();
        Ca { cert, key, pem }
    }

    /// A leaf for `name` (and 127.0.0.1), written as `{file}.crt` and
    /// `{file}.key`; `expired`: its validity ended yesterday.
    pub fn issue(&self, dir: &Path, file: &str, name: &str, expired: bool) -> (PathBuf, PathBuf) {
        let mut p = CertificateParams::new(vec![name.to_string(), "127.0.0.1".into()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        let (c, k) = (
            dir.join(format!("{file}.crt")),
            dir.join(format!("{file}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }
}

/// Whether redis-cli is here and speaks TLS; a recorded skip otherwise.
pub fn tls_cli() -> bool {
    if !have_tool("redis-cli") {
        return false;
    }
    let help = output(Command::new("redis-cli").arg("--help"));
    let all = [help.stdout, help.stderr].concat();
    if !String::from_utf8_lossy(&all).contains("--tls") {
        skip(
            "this redis-cli was built without TLS",
            "install Debian's redis-tools (built with TLS)",
        );
        return false;
    }
    true
}
