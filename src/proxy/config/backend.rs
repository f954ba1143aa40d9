//! What a pool says to its servers and how it treats failing ones: the
//! commands every new upstream connection sends first (twemproxy's
//! `redis_auth` and `redis_db`) and `auto_eject_hosts`' thresholds.

/// `server_failure_limit` and `server_retry_timeout` of an ejecting pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EjectPolicy {
    pub failure_limit: u32,
    pub retry_ms: u64,
}

/// The commands a new upstream connection sends before any request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendSetup {
    pub password: Option<String>,
    pub db: u32,
}

impl BackendSetup {
    /// `AUTH password` and `SELECT db`, each encoded, as far as configured.
    pub(crate) fn commands(&self) -> std::sync::Arc<[bytes::Bytes]> {
        let mut out = Vec::new();
        if let Some(pw) = &self.password {
            let mut b = bytes::BytesMut::new();
            crate::resp::encode::command(&mut b, &[b"AUTH", pw.as_bytes()]);
            out.push(b.freeze());
        }
        if self.db != 0 {
            let mut b = bytes::BytesMut::new();
            let db = self.db.to_string();
            crate::resp::encode::command(&mut b, &[b"SELECT", db.as_bytes()]);
            out.push(b.freeze());
        }
        out.into()
    }
}
