//! nutcracker.yml tests: several pools, every directive, defaults, twemproxy's
//! server entry forms and names, warnings, refusals that name file, pool and
//! field, and garbage that must only ever produce an error.

use super::*;
use crate::ring::{Distribution, KeyHash};
use proptest::prelude::*;

const TWO_POOLS: &str = "\
alpha:
  listen: 127.0.0.1:22121
  hash: fnv1a_64
  hash_tag: \"{}\"
  distribution: ketama
  auto_eject_hosts: true
  redis: true
  redis_auth: s3cret
  redis_db: 3
  timeout: 400
  backlog: 1024
  preconnect: true
  server_connections: 2
  server_retry_timeout: 2000
  server_failure_limit: 1
  servers:
   - 127.0.0.1:6379:1 cache-1
   - 127.0.0.1:6380:2
   - 10.0.0.3:11211:1

beta:
  listen: /tmp/beta.sock 0600
  redis: true
  hash: murmur
  distribution: modula
  servers:
   - /var/run/redis.sock:1
   - 127.0.0.1:6381:1 b
";

fn pools(text: &str) -> Vec<Pool> {
    parse("nutcracker.yml", text).expect("valid").pools
}

fn error(text: &str) -> String {
    parse("nutcracker.yml", text)
        .expect_err("refused")
        .to_string()
}

#[test]
fn two_pools_read_with_every_directive() {
    let cfg = parse("nutcracker.yml", TWO_POOLS).unwrap();
    // Only that nutcracker itself stays on database 0 beside redis_auth.
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(cfg.warnings[0].contains("redis_db: beside redis_auth"));
    let [a, b] = &cfg.pools[..] else {
        panic!("two pools");
    };
    assert_eq!(a.name, "alpha");
    assert_eq!(
        a.listen,
        Listen::Tcp {
            host: "127.0.0.1".into(),
            port: 22121
        }
    );
    assert_eq!(a.placement.hash, KeyHash::Fnv1a64);
    assert_eq!(a.placement.hash_tag, Some(*b"{}"));
    assert_eq!(a.placement.distribution, Distribution::Ketama);
    assert!(a.auto_eject_hosts && a.preconnect);
    assert_eq!(a.redis_auth.as_deref(), Some("s3cret"));
    assert_eq!(
        (a.redis_db, a.timeout_ms, a.backlog, a.server_connections),
        (3, Some(400), 1024, 2)
    );
    assert_eq!(
        (a.server_retry_timeout_ms, a.server_failure_limit),
        (2000, 1)
    );
    let names: Vec<String> = a.servers.iter().map(Server::ring_name).collect();
    assert_eq!(names, ["cache-1", "127.0.0.1:6380", "10.0.0.3"]);
    assert_eq!(a.servers[1].weight, 2);
    assert_eq!(a.node_specs()[2].addr, "10.0.0.3:11211");

    assert_eq!(
        b.listen,
        Listen::Unix {
            path: "/tmp/beta.sock".into(),
            perm: Some(0o600)
        }
    );
    assert_eq!(b.placement.hash, KeyHash::Murmur);
    assert_eq!(b.placement.distribution, Distribution::Modula);
    assert_eq!(b.placement.hash_tag, None);
    assert_eq!(b.servers[0].ring_name(), "/var/run/redis.sock:");
    assert!(a.ring(1).is_ok() && b.ring(1).is_ok());
}

#[test]
fn unset_directives_take_twemproxys_defaults() {
    let p = &pools("p:\n  listen: 0.0.0.0:1\n  redis: true\n  servers:\n   - h:2:1\n")[0];
    assert_eq!(p.placement, crate::ring::Placement::default());
    assert_eq!(p.timeout_ms, None);
    assert_eq!(p.backlog, DEFAULT_BACKLOG);
    assert!(!p.preconnect && !p.auto_eject_hosts);
    assert_eq!((p.redis_db, p.redis_auth.clone()), (0, None));
    assert_eq!(p.server_connections, DEFAULT_SERVER_CONNECTIONS);
    assert_eq!(p.server_retry_timeout_ms, DEFAULT_SERVER_RETRY_TIMEOUT_MS);
    assert_eq!(p.server_failure_limit, DEFAULT_SERVER_FAILURE_LIMIT);
}

#[test]
fn redis_db_beside_redis_auth_warns_that_nutcracker_stayed_on_database_0() {
    let cfg = parse(
        "n.yml",
        "p:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_auth: pw\n  redis_db: 2\n  servers:\n   - 127.0.0.1:2:1\n",
    )
    .unwrap();
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(
        cfg.warnings[0].starts_with(
            "n.yml:5: pool 'p': redis_db: beside redis_auth nutcracker never selects it"
        ),
        "{:?}",
        cfg.warnings
    );
    assert!(cfg.warnings[0].contains("shardis selects database 2"));
    let alone =
        "p:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_db: 2\n  servers:\n   - 127.0.0.1:2:1\n";
    assert!(parse("n.yml", alone).unwrap().warnings.is_empty());
}

#[test]
fn unknown_and_ignored_directives_warn_by_name() {
    let cfg = parse(
        "n.yml",
        "p:\n  listen: 0.0.0.0:1\n  redis: true\n  colour: blue\n  client_connections: 10\n  tcpkeepalive: true\n  servers:\n   - h:2:1\n",
    )
    .unwrap();
    assert_eq!(cfg.warnings.len(), 3, "{:?}", cfg.warnings);
    assert!(cfg.warnings[0].starts_with("n.yml:4: pool 'p': colour: unknown directive"));
    assert!(cfg.warnings[1].contains("client_connections: not supported"));
    assert!(cfg.warnings[2].contains("tcpkeepalive: not supported"));
}

#[test]
fn memcache_pools_are_refused_clearly() {
    for redis in ["  redis: false\n", ""] {
        let text = format!("mc:\n  listen: 0.0.0.0:1\n{redis}  servers:\n   - h:2:1\n");
        let e = error(&text);
        assert!(
            e.starts_with("nutcracker.yml:1: pool 'mc': is a memcache pool"),
            "{e}"
        );
        assert!(e.contains("redis: true"), "{e}");
    }
}

#[test]
fn errors_name_file_line_pool_and_field() {
    let base = "p:\n  listen: 0.0.0.0:1\n  redis: true\n";
    let cases: &[(&str, &str)] = &[
        (
            "  hash: sha1\n",
            "nutcracker.yml:4: pool 'p': hash: unknown hash 'sha1'",
        ),
        (
            "  distribution: rendezvous\n",
            "pool 'p': distribution: unknown distribution",
        ),
        (
            "  hash_tag: \"{\"\n",
            "pool 'p': hash_tag: must be two characters",
        ),
        ("  timeout: -1\n", "pool 'p': timeout: is not a number"),
        ("  timeout: 0x10\n", "pool 'p': timeout: is not a number"),
        (
            "  preconnect: yes\n",
            "pool 'p': preconnect: is not \"true\" or \"false\"",
        ),
        (
            "  server_connections: 0\n",
            "pool 'p': server_connections: cannot be 0",
        ),
        ("  redis: true\n", "pool 'p': redis: is a duplicate"),
        (
            "  backlog:\n   - 1\n",
            "pool 'p': backlog: must be a single value",
        ),
    ];
    for (line, want) in cases {
        let e = error(&format!("{base}{line}  servers:\n   - h:2:1\n"));
        assert!(e.contains(want), "{line:?}: {e}");
    }
    let servers: &[(&str, &str)] = &[
        ("h:2:0", "zero weight"),
        ("h:2:x", "invalid weight"),
        ("h:0:1", "invalid port"),
        ("h:70000:1", "invalid port"),
        ("h:1", "is not \"host:port:weight [name]\""),
        ("h:2:1 ", "empty name"),
        ("h:2:1 my name", "invalid weight"),
    ];
    for (entry, want) in servers {
        let e = error(&format!("{base}  servers:\n   - {entry:?}\n"));
        assert!(
            e.contains("nutcracker.yml:5: pool 'p': servers: "),
            "{entry}: {e}"
        );
        assert!(e.contains(want), "{entry}: {e}");
    }
    assert!(error("p:\n  redis: true\n  servers:\n   - h:2:1\n").contains("\"listen:\" is missing"));
    assert!(error(base).contains("has no servers"));
    let dup = format!("{base}  servers:\n   - h:2:1 a\n   - h:3:1 a\n");
    assert!(error(&dup).contains("two servers named 'a'"));
}

#[test]
fn pools_must_differ_in_name_and_listener() {
    let pool = |name: &str, port: u16| {
        format!("{name}:\n  listen: 127.0.0.1:{port}\n  redis: true\n  servers:\n   - h:2:1\n")
    };
    let e = error(&format!("{}{}", pool("a", 1), pool("b", 1)));
    assert!(e.contains("pool 'b': listens where pool 'a' does"), "{e}");
    assert!(parse("n", &format!("{}{}", pool("a", 1), pool("b", 2))).is_ok());
}

#[test]
fn shapes_twemproxy_refuses_are_refused() {
    let cases: &[(&str, &str)] = &[
        ("", "has no pools"),
        ("just a string\n", "must be a mapping of pool names"),
        ("a: &x\n  listen: 1\nb: *x\n", "alias"),
        ("p:\n  listen:\n    host: h\n", "must be a value or a list"),
        ("p: [1, 2]\n", "must be a mapping of directives"),
        (
            "p:\n  listen: 0.0.0.0:1\n---\nq: 1\n",
            "only one YAML document",
        ),
        ("p:\n  listen: [unclosed\n", "not valid YAML"),
    ];
    for (text, want) in cases {
        let e = error(text);
        assert!(e.starts_with("nutcracker.yml"), "{text:?}: {e}");
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

proptest! {
    #[test]
    fn garbage_never_panics(text in "\\PC{0,200}") {
        let _ = parse("fuzz.yml", &text);
    }

    #[test]
    fn mangled_configs_never_panic(cut in 0usize..TWO_POOLS.len(), byte in any::<u8>()) {
        let mut b = TWO_POOLS.as_bytes().to_vec();
        b[cut] = byte;
        let text = String::from_utf8_lossy(&b);
        let _ = parse("fuzz.yml", &text);
        let _ = parse("fuzz.yml", &TWO_POOLS[..cut]);
    }

    #[test]
    fn any_server_entry_is_read_or_refused(entry in "[a-z0-9:/ .\\[\\]]{0,40}") {
        let _ = pool::parse_server(&entry);
    }
}
