//! `[failover]`: how a pool's shards survive a member's loss — what happens
//! when a primary goes down, when a write counts as acknowledged, where reads
//! go, and the failure detector's thresholds. Validated into [`HaConfig`];
//! read by `proxy::ha` (the detector and the failover) and by `route` (reads
//! from replicas, writes acknowledged by one).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::choice::one_of;
use crate::ring::NodeSpec;

/// Between two probes of a member that is up.
pub const DEFAULT_PROBE_INTERVAL_MS: u64 = 100;
/// A probe without a reply within this counts as a timeout.
pub const DEFAULT_PROBE_TIMEOUT_MS: u64 = 150;
/// Consecutive probe timeouts that mark a member down (the first marks it
/// suspect). A refused connection marks it down at once.
pub const DEFAULT_DOWN_AFTER_TIMEOUTS: u32 = 3;
/// Longest wait between probes of a member that is down (the wait doubles
/// from `probe_interval_ms`, with ±25 % jitter).
pub const DEFAULT_PROBE_MAX_BACKOFF_MS: u64 = 2_000;
/// Shards failed over at once, at most: a proxy cut off from the network
/// sees every primary down and must not promote them all.
pub const DEFAULT_MAX_CONCURRENT_FAILOVERS: usize = 2;
/// How long `write_ack = "replica"` waits for a replica (`WAIT 1 <ms>`).
pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = 500;
/// A replica more than this many bytes of replication stream behind its
/// primary is not read from.
pub const DEFAULT_MAX_LAG_BYTES: u64 = 1 << 20;

/// What a pool does when a shard's primary is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnPrimaryDown {
    /// Promote the most up-to-date replica and repoint the others.
    Failover,
    /// Answer the shard's keys with an error until the primary returns.
    Fail,
    /// Eject the shard: its keys go to the next ring entry until it returns
    /// (twemproxy's `auto_eject_hosts`; for pure caches).
    Remap,
}

/// When a write is acknowledged to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteAck {
    /// When the primary answered (replication is asynchronous).
    Primary,
    /// When `WAIT 1` confirmed a replica has it too.
    Replica,
}

/// Where reads go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    Primary,
    /// A replica in sync if there is one, else the primary.
    PreferReplica,
    /// A replica in sync, else an error.
    Replica,
}

/// Who decides that a shard's primary changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverMode {
    /// The proxy's own detector and `on_primary_down` policy.
    Proxy,
    /// Redis Sentinel: the proxy follows what a majority of the Sentinels
    /// say, confirmed with `ROLE`, and never promotes or repoints itself.
    Sentinel,
}

/// The validated `[failover]` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HaConfig {
    pub mode: FailoverMode,
    pub on_primary_down: OnPrimaryDown,
    pub write_ack: WriteAck,
    pub read_from: ReadFrom,
    pub max_lag_bytes: u64,
    pub probe_interval_ms: u64,
    pub probe_timeout_ms: u64,
    pub down_after_timeouts: u32,
    pub probe_max_backoff_ms: u64,
    pub max_concurrent_failovers: usize,
    pub wait_timeout_ms: u64,
}

impl Default for HaConfig {
    fn default() -> Self {
        HaConfig::validate(FailoverSection::default()).expect("defaults are valid")
    }
}

/// `[failover]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct FailoverSection {
    mode: String,
    sentinels: Vec<String>,
    on_primary_down: String,
    write_ack: String,
    read_from: String,
    max_lag_bytes: u64,
    probe_interval_ms: u64,
    probe_timeout_ms: u64,
    down_after_timeouts: u32,
    probe_max_backoff_ms: u64,
    max_concurrent_failovers: usize,
    wait_timeout_ms: u64,
}

impl Default for FailoverSection {
    fn default() -> Self {
        FailoverSection {
            mode: "proxy".into(),
            sentinels: Vec::new(),
            on_primary_down: "failover".into(),
            write_ack: "primary".into(),
            read_from: "primary".into(),
            max_lag_bytes: DEFAULT_MAX_LAG_BYTES,
            probe_interval_ms: DEFAULT_PROBE_INTERVAL_MS,
            probe_timeout_ms: DEFAULT_PROBE_TIMEOUT_MS,
            down_after_timeouts: DEFAULT_DOWN_AFTER_TIMEOUTS,
            probe_max_backoff_ms: DEFAULT_PROBE_MAX_BACKOFF_MS,
            max_concurrent_failovers: DEFAULT_MAX_CONCURRENT_FAILOVERS,
            wait_timeout_ms: DEFAULT_WAIT_TIMEOUT_MS,
        }
    }
}

impl HaConfig {
    /// Checks every field; the error names it (`failover.write_ack: …`).
    pub(super) fn validate(f: FailoverSection) -> Result<HaConfig, String> {
        let mode = one_of(
            "failover.mode",
            &f.mode,
            &[
                ("proxy", FailoverMode::Proxy),
                ("sentinel", FailoverMode::Sentinel),
            ],
        )?;
        let on_primary_down = one_of(
            "failover.on_primary_down",
            &f.on_primary_down,
            &[
                ("failover", OnPrimaryDown::Failover),
                ("fail", OnPrimaryDown::Fail),
                ("remap", OnPrimaryDown::Remap),
            ],
        )?;
        let write_ack = one_of(
            "failover.write_ack",
            &f.write_ack,
            &[
                ("primary", WriteAck::Primary),
                ("replica", WriteAck::Replica),
            ],
        )?;
        let read_from = one_of(
            "failover.read_from",
            &f.read_from,
            &[
                ("primary", ReadFrom::Primary),
                ("prefer-replica", ReadFrom::PreferReplica),
                ("replica", ReadFrom::Replica),
            ],
        )?;
        for (field, v) in [
            ("failover.probe_interval_ms", f.probe_interval_ms),
            ("failover.probe_timeout_ms", f.probe_timeout_ms),
            (
                "failover.down_after_timeouts",
                u64::from(f.down_after_timeouts),
            ),
            ("failover.probe_max_backoff_ms", f.probe_max_backoff_ms),
            (
                "failover.max_concurrent_failovers",
                f.max_concurrent_failovers as u64,
            ),
            ("failover.wait_timeout_ms", f.wait_timeout_ms),
        ] {
            if v == 0 {
                return Err(format!("{field}: must be greater than 0"));
            }
        }
        Ok(HaConfig {
            mode,
            on_primary_down,
            write_ack,
            read_from,
            max_lag_bytes: f.max_lag_bytes,
            probe_interval_ms: f.probe_interval_ms,
            probe_timeout_ms: f.probe_timeout_ms,
            down_after_timeouts: f.down_after_timeouts,
            probe_max_backoff_ms: f.probe_max_backoff_ms.max(f.probe_interval_ms),
            max_concurrent_failovers: f.max_concurrent_failovers,
            wait_timeout_ms: f.wait_timeout_ms,
        })
    }
}

impl FailoverSection {
    /// `sentinels`, taken out before the rest is validated.
    pub(super) fn take_sentinels(&mut self) -> Vec<String> {
        std::mem::take(&mut self.sentinels)
    }
}

/// `[failover] mode = "sentinel"`: the Sentinels to ask, and each shard's
/// name there (`[[nodes]] master_name`), by the shard's name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SentinelConfig {
    pub addrs: Vec<String>,
    pub masters: BTreeMap<String, String>,
}

impl SentinelConfig {
    /// Sentinel mode needs at least one Sentinel and every shard's
    /// `master_name`; the proxy's own mode takes neither.
    pub(super) fn validate(
        mode: FailoverMode,
        addrs: Vec<String>,
        masters: BTreeMap<String, String>,
        nodes: &[NodeSpec],
    ) -> Result<SentinelConfig, String> {
        if mode == FailoverMode::Proxy {
            if !addrs.is_empty() {
                return Err("failover.sentinels: only with failover.mode = \"sentinel\"".into());
            }
            if !masters.is_empty() {
                return Err("nodes[].master_name: only with failover.mode = \"sentinel\"".into());
            }
            return Ok(SentinelConfig::default());
        }
        if addrs.is_empty() {
            return Err("failover.sentinels: sentinel mode needs at least one Sentinel".into());
        }
        for (i, a) in addrs.iter().enumerate() {
            super::check_host_port(&format!("failover.sentinels[{i}]"), a)?;
        }
        for (i, n) in nodes.iter().enumerate() {
            if !masters.contains_key(&n.name) {
                return Err(format!(
                    "nodes[{i}].master_name: sentinel mode needs each shard's name at the Sentinels"
                ));
            }
        }
        Ok(SentinelConfig { addrs, masters })
    }
}

/// The replicas listed by `nodes[i]` (shard `name`, primary `addr`),
/// checked — each `host:port`, none a member of another shard (`seen`
/// collects them) — and put into `into` under the shard's name.
pub(super) fn add_replicas(
    i: usize,
    (name, addr): (&str, &str),
    replicas: Vec<String>,
    seen: &mut std::collections::HashSet<String>,
    into: &mut std::collections::BTreeMap<String, Vec<NodeSpec>>,
) -> Result<(), String> {
    seen.insert(addr.to_string());
    let mut copies = Vec::with_capacity(replicas.len().min(8));
    for (j, r) in replicas.into_iter().enumerate() {
        super::check_host_port(&format!("nodes[{i}].replicas[{j}]"), &r)?;
        if r == addr || !seen.insert(r.clone()) {
            return Err(format!(
                "nodes[{i}].replicas[{j}]: {r} is already a member of a shard"
            ));
        }
        copies.push(NodeSpec {
            name: r.clone(),
            addr: r,
            weight: 1,
        });
    }
    if !copies.is_empty() {
        into.insert(name.to_string(), copies);
    }
    Ok(())
}

impl FailoverMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailoverMode::Proxy => "proxy",
            FailoverMode::Sentinel => "sentinel",
        }
    }
}

impl OnPrimaryDown {
    /// The word the config and `CLUSTER RINGINFO` use.
    pub fn as_str(self) -> &'static str {
        match self {
            OnPrimaryDown::Failover => "failover",
            OnPrimaryDown::Fail => "fail",
            OnPrimaryDown::Remap => "remap",
        }
    }
}

impl WriteAck {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteAck::Primary => "primary",
            WriteAck::Replica => "replica",
        }
    }
}

impl ReadFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            ReadFrom::Primary => "primary",
            ReadFrom::PreferReplica => "prefer-replica",
            ReadFrom::Replica => "replica",
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::proxy::config::ha::*;
    use crate::proxy::Config;

    #[test]
    fn replicas_and_policies_parse_and_default() {
        let c = Config::parse(
            "[[nodes]]\naddr = \"127.0.0.1:7001\"\nname = \"a\"\nreplicas = [\"127.0.0.1:7011\"]\n\
             [[nodes]]\naddr = \"127.0.0.1:7002\"\n\
             [failover]\non_primary_down = \"remap\"\nwrite_ack = \"replica\"\nread_from = \"prefer-replica\"\n",
        )
        .unwrap();
        assert_eq!(c.replicas["a"][0].addr, "127.0.0.1:7011");
        assert_eq!(c.replicas.len(), 1);
        assert_eq!(c.ha.on_primary_down, OnPrimaryDown::Remap);
        assert_eq!(c.ha.write_ack, WriteAck::Replica);
        assert_eq!(c.ha.read_from, ReadFrom::PreferReplica);
        let d = Config::parse("").unwrap().ha;
        assert_eq!(d.on_primary_down, OnPrimaryDown::Failover);
        assert_eq!(d.write_ack, WriteAck::Primary);
        assert_eq!(d.read_from, ReadFrom::Primary);
        assert_eq!(d.mode, FailoverMode::Proxy);
        let s = Config::parse(
            "[failover]\nmode = \"sentinel\"\nsentinels = [\"127.0.0.1:26379\"]\n\
             [[nodes]]\naddr = \"127.0.0.1:7001\"\nname = \"a\"\nmaster_name = \"m1\"\n",
        )
        .unwrap();
        assert_eq!(s.ha.mode, FailoverMode::Sentinel);
        assert_eq!(s.sentinel.masters["a"], "m1");
        // Sub-second on a LAN: a refused connect is seen within one
        // interval, a silent node within down_after_timeouts probes.
        let worst = d.probe_interval_ms + u64::from(d.down_after_timeouts) * d.probe_timeout_ms;
        assert!(worst < 1_000, "{worst} ms");
    }

    #[test]
    fn bad_failover_fields_are_named() {
        let cases = [
            (
                "[failover]\non_primary_down = \"panic\"\n",
                "failover.on_primary_down",
            ),
            ("[failover]\nwrite_ack = \"all\"\n", "failover.write_ack"),
            ("[failover]\nread_from = \"any\"\n", "failover.read_from"),
            (
                "[failover]\nprobe_interval_ms = 0\n",
                "failover.probe_interval_ms",
            ),
            ("[failover]\nbogus = 1\n", "bogus"),
            ("[failover]\nmode = \"raft\"\n", "failover.mode"),
            (
                "[failover]\nmode = \"sentinel\"\n",
                "failover.sentinels: sentinel mode needs",
            ),
            (
                "[failover]\nmode = \"sentinel\"\nsentinels = [\"127.0.0.1:26379\"]\n[[nodes]]\naddr = \"127.0.0.1:1\"\n",
                "nodes[0].master_name",
            ),
            (
                "[failover]\nsentinels = [\"127.0.0.1:26379\"]\n",
                "only with failover.mode",
            ),
            (
                "[failover]\nmode = \"sentinel\"\nsentinels = [\"s\"]\n",
                "failover.sentinels[0]",
            ),
            (
                "[[nodes]]\naddr = \"127.0.0.1:1\"\nreplicas = [\"x\"]\n",
                "nodes[0].replicas[0]",
            ),
            (
                "[[nodes]]\naddr = \"127.0.0.1:1\"\nreplicas = [\"127.0.0.1:1\"]\n",
                "already a member",
            ),
        ];
        for (text, field) in cases {
            let err = Config::parse(text).unwrap_err();
            assert!(err.contains(field), "{text:?} -> {err}");
        }
    }
}
