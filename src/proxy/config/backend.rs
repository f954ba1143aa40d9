//! How a pool treats failing servers: `auto_eject_hosts`' thresholds.
//! (What it says to them first, `redis_auth` and `redis_db`, is
//! `upstream::credentials`.)

/// `server_failure_limit` and `server_retry_timeout` of an ejecting pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EjectPolicy {
    pub failure_limit: u32,
    pub retry_ms: u64,
}
