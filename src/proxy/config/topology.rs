//! `[topology]`: where the proxy keeps its ring. `store = "file"` (the
//! default) is `proxy.state_file`, for one proxy; `store = "etcd"` shares the
//! ring, the change in progress and the proxies' registrations through etcd
//! (see `proxy::admin::etcd`). Validated here, read by `admin::store::open`.

use super::check_host_port;
use super::choice::one_of;
use super::file::TopologySection;

/// Where `store = "etcd"` connects unless told otherwise.
pub const DEFAULT_ETCD_ENDPOINT: &str = "127.0.0.1:2379";
/// The key prefix every shardis key in etcd starts with.
pub const DEFAULT_ETCD_PREFIX: &str = "/shardis";
/// A proxy's lease: past this without renewing it, its registration and any
/// leadership it held are gone, and the proxy stops serving writes.
pub const DEFAULT_LEASE_TTL_S: u64 = 5;
/// etcd grants no lease shorter than this (its election timeout rounds up).
const MIN_LEASE_TTL_S: u64 = 2;

/// The validated `[topology]` section.
#[derive(Clone, Debug, Default)]
pub enum TopologyConfig {
    /// `proxy.state_file` (or nowhere, without one).
    #[default]
    File,
    Etcd(EtcdConfig),
}

#[derive(Clone, Debug)]
pub struct EtcdConfig {
    pub endpoints: Vec<String>,
    pub prefix: String,
    /// User and password, when etcd has authentication on.
    pub credentials: Option<(String, String)>,
    pub lease_ttl_s: u64,
    /// How this proxy names itself in the fleet; its listen address by default.
    pub proxy_id: Option<String>,
}

impl TopologyConfig {
    pub(super) fn validate(
        t: TopologySection,
        state_file: Option<&str>,
    ) -> Result<TopologyConfig, String> {
        let etcd = one_of(
            "topology.store",
            &t.store,
            &[("file", false), ("etcd", true)],
        )?;
        if !etcd {
            return Ok(TopologyConfig::File);
        }
        if state_file.is_some_and(|s| !s.is_empty()) {
            return Err("topology.store: \"etcd\" keeps the topology in etcd; remove proxy.state_file (it would not be read)".into());
        }
        if t.endpoints.is_empty() {
            return Err("topology.endpoints: at least one host:port is required".into());
        }
        for (i, e) in t.endpoints.iter().enumerate() {
            check_host_port(&format!("topology.endpoints[{i}]"), e)?;
        }
        if t.prefix.is_empty() || t.prefix.contains(char::is_whitespace) {
            return Err(format!(
                "topology.prefix: must be non-empty without spaces, got {:?}",
                t.prefix
            ));
        }
        if t.lease_ttl_s < MIN_LEASE_TTL_S {
            return Err(format!(
                "topology.lease_ttl_s: at least {MIN_LEASE_TTL_S} (etcd's shortest lease), got {}",
                t.lease_ttl_s
            ));
        }
        let credentials = match (t.user, t.password) {
            (None, None) => None,
            (Some(u), Some(p)) => Some((u, p)),
            _ => return Err("topology.user and topology.password: give both or neither".into()),
        };
        if let Some(id) = &t.proxy_id {
            if id.is_empty() || id.contains(|c: char| c.is_whitespace() || c == '/') {
                return Err(format!(
                    "topology.proxy_id: must be non-empty without spaces or '/', got {id:?}"
                ));
            }
        }
        Ok(TopologyConfig::Etcd(EtcdConfig {
            endpoints: t.endpoints,
            prefix: t.prefix.trim_end_matches('/').to_string(),
            credentials,
            lease_ttl_s: t.lease_ttl_s,
            proxy_id: t.proxy_id,
        }))
    }

    /// The etcd settings, when the topology is shared.
    pub fn etcd(&self) -> Option<&EtcdConfig> {
        match self {
            TopologyConfig::Etcd(e) => Some(e),
            TopologyConfig::File => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::proxy::Config;

    #[test]
    fn an_etcd_topology_is_read_with_its_defaults() {
        let c = Config::parse("[topology]\nstore = \"etcd\"\n").unwrap();
        let e = c.topology.etcd().unwrap();
        assert_eq!(e.endpoints, ["127.0.0.1:2379"]);
        assert_eq!(e.prefix, "/shardis");
        assert_eq!(e.lease_ttl_s, 5);
        assert!(e.credentials.is_none());
        assert!(Config::parse("").unwrap().topology.etcd().is_none());
    }

    #[test]
    fn bad_topology_sections_name_their_field() {
        for (text, field) in [
            ("[topology]\nstore = \"zk\"\n", "topology.store"),
            (
                "[topology]\nstore = \"etcd\"\nendpoints = []\n",
                "topology.endpoints",
            ),
            (
                "[topology]\nstore = \"etcd\"\nendpoints = [\"nohost\"]\n",
                "topology.endpoints[0]",
            ),
            (
                "[topology]\nstore = \"etcd\"\nlease_ttl_s = 1\n",
                "topology.lease_ttl_s",
            ),
            (
                "[topology]\nstore = \"etcd\"\nuser = \"u\"\n",
                "topology.user",
            ),
            (
                "[topology]\nstore = \"etcd\"\nprefix = \"\"\n",
                "topology.prefix",
            ),
            (
                "[proxy]\nstate_file = \"s.toml\"\n[topology]\nstore = \"etcd\"\n",
                "proxy.state_file",
            ),
        ] {
            let err = Config::parse(text).unwrap_err();
            assert!(err.contains(field), "{text}: {err}");
        }
    }
}
