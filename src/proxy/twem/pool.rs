//! A `nutcracker.yml` pool as a proxy [`Pool`]: each twemproxy directive
//! mapped to the proxy setting that does its job, placement kept exactly
//! twemproxy's (`Ring::twemproxy`).

use std::path::Path;

use crate::nutcracker::{self, Listen, ServerAddr};
use crate::proxy::config::EjectPolicy;
use crate::proxy::conn::auth::Auth;
use crate::proxy::upstream::credentials::Credentials;
use crate::proxy::upstream::shard::ShardSpec;
use crate::proxy::{Config, Pool};

/// The most upstream connections per server (the proxy's own cap).
const MAX_SERVER_CONNECTIONS: u32 = 64;

/// The proxy pool serving `p`; `state_dir` holds its state file when given.
/// Settings shardis cannot honour as twemproxy does add a line to `warnings`.
pub(crate) fn pool_of(
    file: &str,
    p: &nutcracker::Pool,
    state_dir: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Result<Pool, String> {
    let at = |field: &str, m: String| format!("{file}: pool '{}': {field}: {m}", p.name);
    if let Some(s) = p
        .servers
        .iter()
        .find(|s| matches!(s.addr, ServerAddr::Unix { .. }))
    {
        return Err(at(
            "servers",
            format!(
                "{} is a unix socket; shardis reaches servers over TCP only",
                s.address()
            ),
        ));
    }
    let mut config = Config {
        listen: match &p.listen {
            Listen::Tcp { host, port } => format!("{host}:{port}"),
            // Served by a bridge onto a loopback listener of its own.
            Listen::Unix { .. } => "127.0.0.1:0".to_string(),
        },
        nodes: p.node_specs(),
        ..Config::default()
    };
    if let Some(t) = p.timeout_ms.filter(|t| *t > 0) {
        config.connect_timeout_ms = t;
        config.request_timeout_ms = t;
    }
    config.backlog = p.backlog.max(1);
    config.preconnect = p.preconnect;
    // Said to every server as nutcracker says it: `AUTH password`, `SELECT db`.
    config.node_auth.default = p
        .redis_auth
        .clone()
        .map(|pw| std::sync::Arc::new(Credentials::password_only(pw)));
    config.node_auth.db = p.redis_db;
    if p.server_connections > MAX_SERVER_CONNECTIONS {
        warnings.push(at(
            "server_connections",
            format!(
                "{} is more than shardis opens; using {MAX_SERVER_CONNECTIONS}",
                p.server_connections
            ),
        ));
    }
    config.connections_per_node = p.server_connections.clamp(1, MAX_SERVER_CONNECTIONS) as usize;
    if p.auto_eject_hosts {
        config.eject = Some(EjectPolicy {
            failure_limit: p.server_failure_limit.max(1),
            retry_ms: p.server_retry_timeout_ms,
        });
    }
    if let Some(dir) = state_dir {
        config.state_file = Some(
            dir.join(state_file_name(&p.name))
                .to_string_lossy()
                .into_owned(),
        );
        config.check_state_dir().map_err(|e| at("state", e))?;
    }
    let shards = config
        .nodes
        .iter()
        .cloned()
        .map(ShardSpec::single)
        .collect();
    Ok(Pool {
        config,
        shards,
        twemproxy: Some(p.placement),
        auth: Auth::Twemproxy(p.redis_auth.as_deref().map(Into::into)),
        config_path: None,
    })
}

/// `{pool}.state`, the pool's name kept to characters safe in a file name.
fn state_file_name(pool: &str) -> String {
    let safe: String = pool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.state")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(yaml: &str) -> Result<Pool, String> {
        let c = nutcracker::parse("n.yml", yaml).map_err(|e| e.to_string())?;
        pool_of("n.yml", &c.pools[0], None, &mut Vec::new())
    }

    #[test]
    fn directives_map_to_the_proxy_settings() {
        let p = one("a:\n  listen: 127.0.0.1:22121\n  redis: true\n  timeout: 400\n  backlog: 77\n  preconnect: true\n  redis_db: 3\n  redis_auth: pw\n  server_connections: 2\n  servers:\n   - 127.0.0.1:6379:1 one\n").unwrap();
        let c = &p.config;
        assert_eq!(c.listen, "127.0.0.1:22121");
        assert_eq!((c.connect_timeout_ms, c.request_timeout_ms), (400, 400));
        assert_eq!(
            (c.backlog, c.preconnect, c.connections_per_node),
            (77, true, 2)
        );
        let creds = c.node_auth.for_node("one").unwrap();
        assert_eq!(creds.auth_args(), [&b"AUTH"[..], b"pw"]);
        assert_eq!(creds.migrate_args(), [&b"AUTH"[..], b"pw"]);
        assert_eq!(c.node_auth.db, 3);
        assert_eq!(
            c.node_auth.select().as_deref(),
            Some(&b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"[..])
        );
        assert_eq!(c.nodes[0].name, "one");
        assert!(p.twemproxy.is_some());
    }

    #[test]
    fn a_unix_socket_server_is_refused_by_name() {
        let e =
            one("a:\n  listen: 127.0.0.1:22121\n  redis: true\n  servers:\n   - /tmp/r.sock:1\n")
                .err()
                .unwrap();
        assert!(
            e.contains("pool 'a': servers: /tmp/r.sock is a unix socket"),
            "{e}"
        );
    }

    #[test]
    fn yaml_is_told_from_toml_by_extension_or_content() {
        use crate::proxy::twem::is_yaml;
        let p = |s: &str| std::path::PathBuf::from(s);
        assert!(is_yaml(&p("a.yml"), "[proxy]"));
        assert!(!is_yaml(&p("a.toml"), "alpha:\n"));
        assert!(is_yaml(&p("conf"), "# pools\nalpha:\n  listen: 1:2\n"));
        assert!(is_yaml(&p("conf"), "---\nalpha:\n"));
        assert!(!is_yaml(&p("conf"), "[proxy]\nlisten = \"a:1\"\n"));
        assert!(!is_yaml(&p("conf"), "state_file = \"a:b\"\n"));
    }

    #[test]
    fn state_file_names_are_safe() {
        assert_eq!(state_file_name("a/b c"), "a_b_c.state");
    }
}
