//! What the proxy knows of one shard member: its liveness, from the failure
//! detector's probes, and its replication role, offset and link, from the
//! `INFO replication` each probe reads. Pure apart from atomics: the probe
//! task (`monitor.rs`) writes, routing and the admin views read.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::proxy::config::ha::HaConfig;

/// A member's replication role, as `INFO replication` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Unknown,
    Master,
    Replica,
}

/// What one `INFO replication` reply says (Redis's field names, which the
/// built-in node uses too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReplInfo {
    pub(crate) role: Role,
    /// `master_repl_offset` on a master, `slave_repl_offset` on a replica.
    pub(crate) offset: u64,
    /// `master_host:master_port` on a replica.
    pub(crate) master: Option<String>,
    /// `master_link_status:up` on a replica.
    pub(crate) link_up: bool,
    /// `master_sync_in_progress:1`: a full sync is loading.
    pub(crate) syncing: bool,
}

/// Reads the fields of `INFO replication` the proxy uses; absent fields are
/// zero or unknown.
pub(crate) fn parse_info(text: &str) -> ReplInfo {
    let mut info = ReplInfo {
        role: Role::Unknown,
        offset: 0,
        master: None,
        link_up: false,
        syncing: false,
    };
    let (mut host, mut port, mut master_off, mut slave_off) = (None, None, None, None);
    for line in text.lines() {
        let Some((k, v)) = line.trim_end().split_once(':') else {
            continue;
        };
        match k {
            "role" if v == "master" => info.role = Role::Master,
            "role" if v == "slave" || v == "replica" => info.role = Role::Replica,
            "master_host" => host = Some(v.to_string()),
            "master_port" => port = Some(v.to_string()),
            "master_link_status" => info.link_up = v == "up",
            "master_sync_in_progress" => info.syncing = v == "1",
            "master_repl_offset" => master_off = v.parse().ok(),
            "slave_repl_offset" => slave_off = v.parse().ok(),
            _ => {}
        }
    }
    info.offset = match info.role {
        Role::Replica => slave_off.or(master_off).unwrap_or(0),
        _ => master_off.unwrap_or(0),
    };
    if let (Some(h), Some(p)) = (host, port) {
        info.master = Some(format!("{h}:{p}"));
    }
    info
}

/// True when a `ROLE` reply names a master (`*3\r\n$6\r\nmaster\r\n…`).
pub(crate) fn role_is_master(reply: &[u8]) -> bool {
    reply.starts_with(b"*") && {
        let after = reply
            .iter()
            .position(|&b| b == b'\n')
            .map_or(&[][..], |i| &reply[i + 1..]);
        after.starts_with(b"$6\r\nmaster\r\n")
    }
}

/// The failure detector's verdict on a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Not probed yet.
    Unknown,
    Up,
    /// At least one probe timed out; not yet down.
    Suspect,
    Down,
}

impl Liveness {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Liveness::Unknown => "unknown",
            Liveness::Up => "up",
            Liveness::Suspect => "suspect",
            Liveness::Down => "down",
        }
    }
}

/// The detector for one member: consecutive timeouts make it suspect, then
/// down; a refused connection makes it down at once; any answer makes it up.
#[derive(Debug)]
pub(crate) struct Detector {
    pub(crate) state: Liveness,
    timeouts: u32,
    /// Probes since it went down (the backoff's exponent).
    down_probes: u32,
    /// xorshift state for the jitter.
    seed: u64,
}

/// What one probe came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    Answered,
    TimedOut,
    Refused,
    /// No answer yet, and `down_after_timeouts` of the clients' requests to
    /// the member (a primary) failed meanwhile.
    RequestsFailed,
}

impl Detector {
    pub(crate) fn new(seed: u64) -> Detector {
        Detector {
            state: Liveness::Unknown,
            timeouts: 0,
            down_probes: 0,
            seed: seed | 1,
        }
    }

    /// Takes a probe's outcome; returns the new verdict.
    pub(crate) fn observe(&mut self, probe: Probe, config: &HaConfig) -> Liveness {
        match probe {
            Probe::Answered => {
                self.timeouts = 0;
                self.down_probes = 0;
                self.state = Liveness::Up;
            }
            Probe::Refused | Probe::RequestsFailed => self.state = Liveness::Down,
            Probe::TimedOut => {
                self.timeouts = self.timeouts.saturating_add(1);
                let down = self.timeouts >= config.down_after_timeouts;
                self.state = if down || self.state == Liveness::Down {
                    Liveness::Down
                } else {
                    Liveness::Suspect
                };
            }
        }
        if self.state == Liveness::Down {
            self.down_probes = self.down_probes.saturating_add(1);
        }
        self.state
    }

    /// How long until the next probe: the interval while up or suspect;
    /// while down, doubling from it up to the cap, ±25 % jitter so many
    /// proxies do not probe a returning node in step.
    pub(crate) fn next_delay(&mut self, config: &HaConfig) -> Duration {
        let base = config.probe_interval_ms;
        if self.state != Liveness::Down {
            return Duration::from_millis(base);
        }
        let exp = self.down_probes.saturating_sub(1).min(16);
        let ms = base
            .saturating_mul(1 << exp)
            .min(config.probe_max_backoff_ms);
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let spread = ms / 2;
        let jitter = if spread == 0 {
            0
        } else {
            self.seed % (spread + 1)
        };
        Duration::from_millis((ms - ms / 4 + jitter).max(1))
    }
}

/// The latest probe results of one member, shared (atomics: written by its
/// probe task, read on the routing path without a lock).
#[derive(Default)]
pub(crate) struct MemberStatus {
    liveness: AtomicU8,
    role: AtomicU8,
    offset: AtomicU64,
    link_up: AtomicBool,
    syncing: AtomicBool,
    /// The replica's master (`host:port`); a std mutex held to copy a string.
    master: Mutex<Option<String>>,
}

impl MemberStatus {
    pub(crate) fn set_liveness(&self, l: Liveness) {
        let v = match l {
            Liveness::Unknown => 0,
            Liveness::Up => 1,
            Liveness::Suspect => 2,
            Liveness::Down => 3,
        };
        self.liveness.store(v, Ordering::Relaxed);
    }

    pub(crate) fn liveness(&self) -> Liveness {
        match self.liveness.load(Ordering::Relaxed) {
            1 => Liveness::Up,
            2 => Liveness::Suspect,
            3 => Liveness::Down,
            _ => Liveness::Unknown,
        }
    }

    pub(crate) fn record(&self, info: &ReplInfo) {
        let role = match info.role {
            Role::Unknown => 0,
            Role::Master => 1,
            Role::Replica => 2,
        };
        self.role.store(role, Ordering::Relaxed);
        self.offset.store(info.offset, Ordering::Relaxed);
        self.link_up.store(info.link_up, Ordering::Relaxed);
        self.syncing.store(info.syncing, Ordering::Relaxed);
        if let Ok(mut m) = self.master.lock() {
            m.clone_from(&info.master);
        }
    }

    pub(crate) fn role(&self) -> Role {
        match self.role.load(Ordering::Relaxed) {
            1 => Role::Master,
            2 => Role::Replica,
            _ => Role::Unknown,
        }
    }

    pub(crate) fn role_str(&self) -> &'static str {
        match self.role() {
            Role::Master => "master",
            Role::Replica => "replica",
            Role::Unknown => "unknown",
        }
    }

    pub(crate) fn offset(&self) -> u64 {
        self.offset.load(Ordering::Relaxed)
    }

    pub(crate) fn is_link_up(&self) -> bool {
        self.link_up.load(Ordering::Relaxed)
    }

    pub(crate) fn master(&self) -> Option<String> {
        self.master.lock().ok().and_then(|m| m.clone())
    }

    /// A replica fit to serve reads: up, replicating from `primary` with
    /// its link up and no full sync loading, within `max_lag` bytes of
    /// `primary_offset`.
    pub(crate) fn is_in_sync(&self, primary: &str, primary_offset: u64, max_lag: u64) -> bool {
        self.liveness() == Liveness::Up
            && self.role() == Role::Replica
            && self.is_link_up()
            && !self.syncing.load(Ordering::Relaxed)
            && self.master().as_deref() == Some(primary)
            && primary_offset.saturating_sub(self.offset()) <= max_lag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_replication_is_read_with_redis_field_names() {
        let master = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=7011,state=online,offset=42,lag=0\r\nmaster_repl_offset:42\r\n";
        let m = parse_info(master);
        assert_eq!((m.role, m.offset, m.master), (Role::Master, 42, None));
        let replica = "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7001\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\nslave_repl_offset:40\r\nmaster_repl_offset:40\r\n";
        let r = parse_info(replica);
        assert_eq!(r.role, Role::Replica);
        assert_eq!(r.offset, 40);
        assert_eq!(r.master.as_deref(), Some("127.0.0.1:7001"));
        assert!(r.link_up && !r.syncing);
        assert_eq!(parse_info("").role, Role::Unknown);
    }

    #[test]
    fn role_replies_are_told_apart() {
        assert!(role_is_master(b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"));
        assert!(!role_is_master(
            b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:1\r\n$9\r\nconnected\r\n:0\r\n"
        ));
        assert!(!role_is_master(b"-ERR unknown command 'ROLE'\r\n"));
    }

    #[test]
    fn timeouts_make_suspect_then_down_and_a_refusal_down_at_once() {
        let c = HaConfig::default();
        let mut d = Detector::new(7);
        assert_eq!(d.observe(Probe::Answered, &c), Liveness::Up);
        assert_eq!(d.observe(Probe::TimedOut, &c), Liveness::Suspect);
        assert_eq!(d.observe(Probe::TimedOut, &c), Liveness::Suspect);
        assert_eq!(d.observe(Probe::TimedOut, &c), Liveness::Down);
        assert_eq!(d.observe(Probe::Answered, &c), Liveness::Up);
        assert_eq!(d.observe(Probe::Refused, &c), Liveness::Down);
        assert_eq!(d.observe(Probe::Answered, &c), Liveness::Up);
        assert_eq!(d.observe(Probe::RequestsFailed, &c), Liveness::Down);
    }

    #[test]
    fn a_down_member_is_probed_with_capped_jittered_backoff() {
        let c = HaConfig::default();
        let mut d = Detector::new(99);
        assert_eq!(d.next_delay(&c), Duration::from_millis(c.probe_interval_ms));
        let mut last = Duration::ZERO;
        for _ in 0..20 {
            d.observe(Probe::Refused, &c);
            last = d.next_delay(&c);
            let cap = c.probe_max_backoff_ms as f64 * 1.25;
            assert!(last.as_millis() as f64 <= cap, "{last:?}");
        }
        assert!(last.as_millis() as u64 >= c.probe_max_backoff_ms * 3 / 4);
        let delays: std::collections::HashSet<_> = (0..10).map(|_| d.next_delay(&c)).collect();
        assert!(delays.len() > 1, "jittered: {delays:?}");
    }
}
