use super::*;

#[test]
fn empty_file_gives_defaults() {
    let c = Config::parse("").unwrap();
    assert_eq!(c.listen, DEFAULT_LISTEN);
    assert_eq!(c.ring.vnodes, 160);
    assert_eq!(c.up.nodes, 10);
    assert!(c.nodes.is_empty());
    assert_eq!(c.migration.copy_rate, CopyRate::Unlimited);
    assert_eq!(c.migration.max_keys_per_sec, 0);
    let c = Config::parse("[migration]\ncopy_rate = \"adaptive\"\n").unwrap();
    assert_eq!(c.migration.copy_rate, CopyRate::Adaptive);
}

#[test]
fn nodes_default_name_to_addr_and_weight_to_one() {
    let c = Config::parse("[[nodes]]\naddr = \"127.0.0.1:7001\"\n[[nodes]]\naddr = \"127.0.0.1:7002\"\nname = \"b\"\nweight = 2\n").unwrap();
    assert_eq!(
        c.nodes[0],
        NodeSpec {
            name: "127.0.0.1:7001".into(),
            addr: "127.0.0.1:7001".into(),
            weight: 1
        }
    );
    assert_eq!(c.nodes[1].name, "b");
    assert_eq!(c.nodes[1].weight, 2);
}

#[test]
fn relative_state_file_resolves_next_to_the_config_and_its_directory_is_checked() {
    let dir = std::env::temp_dir().join(format!("shardis-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.toml");
    std::fs::write(&path, "[proxy]\nstate_file = \"topo.toml\"\n").unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(
        c.state_file.as_deref(),
        Some(dir.join("topo.toml").to_str().unwrap())
    );
    std::fs::write(&path, "[proxy]\nstate_file = \"nosuchdir/topo.toml\"\n").unwrap();
    let err = Config::load(&path).unwrap_err();
    assert!(
        err.contains("proxy.state_file") && err.contains("does not exist"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn byte_budgets_default_and_parse() {
    let c = Config::parse("").unwrap();
    assert_eq!(c.output_limits.hard_bytes, DEFAULT_CLIENT_OUTPUT_HARD_LIMIT);
    assert_eq!(c.output_limits.soft_bytes, DEFAULT_CLIENT_OUTPUT_SOFT_LIMIT);
    assert_eq!(
        c.output_limits.soft_time,
        Duration::from_secs(DEFAULT_CLIENT_OUTPUT_SOFT_SECONDS)
    );
    assert_eq!(c.max_query_buffer_total, DEFAULT_MAX_QUERY_BUFFER_TOTAL);
    assert_eq!(c.max_output_buffer_total, DEFAULT_MAX_OUTPUT_BUFFER_TOTAL);
    assert_eq!(c.drain_timeout_ms, DEFAULT_DRAIN_TIMEOUT_MS);
    // A total alone sets each client's share of it.
    let c = Config::parse("[proxy]\nmax_output_buffer_total = 800\n").unwrap();
    assert_eq!(
        (c.output_limits.hard_bytes, c.output_limits.soft_bytes),
        (100, 25)
    );
    let c = Config::parse(
        "[proxy]\nclient_output_hard_limit = 0\nclient_output_soft_limit = 5\n\
         client_output_soft_seconds = 2\nmax_query_buffer_total = 7\ndrain_timeout_ms = 0\n",
    )
    .unwrap();
    assert_eq!(c.output_limits.hard_bytes, 0);
    assert_eq!(c.output_limits.soft_bytes, 5);
    assert_eq!(c.output_limits.soft_time, Duration::from_secs(2));
    assert_eq!(c.max_query_buffer_total, 7);
    assert_eq!(c.drain_timeout_ms, 0);
    // The shipped default file states the defaults.
    let file = Config::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/default.toml"
    )))
    .unwrap();
    assert_eq!(file.output_limits, Config::parse("").unwrap().output_limits);
    assert_eq!(file.max_query_buffer_total, DEFAULT_MAX_QUERY_BUFFER_TOTAL);
    assert_eq!(
        file.max_output_buffer_total,
        DEFAULT_MAX_OUTPUT_BUFFER_TOTAL
    );
    assert_eq!(file.limits, Limits::default());
    assert_eq!(file.drain_timeout_ms, DEFAULT_DRAIN_TIMEOUT_MS);
}

#[test]
fn invalid_fields_are_named() {
    let cases = [
        ("[ring]\npoints = \"modulo\"\n", "ring.points"),
        ("[ring]\nvnodes = 0\n", "ring.vnodes"),
        (
            "[migration]\ncopy_rate = \"fast\"\n",
            "migration.copy_rate: expected \"adaptive\" or \"unlimited\", got \"fast\"",
        ),
        ("[migration]\ncopy_rate = 5\n", "migration.copy_rate: invalid type"),
        ("[proxy]\npipeline_depth = 0\n", "proxy.pipeline_depth"),
        ("[proxy]\nlisten = \"nowhere\"\n", "proxy.listen"),
        ("[proxy]\nbogus = 1\n", "bogus"),
        (
            "[proxy]\nmax_query_buffer_total = 0\n",
            "proxy.max_query_buffer_total",
        ),
        (
            "[proxy]\nmax_output_buffer_total = 0\n",
            "proxy.max_output_buffer_total",
        ),
        ("[[nodes]]\naddr = \"x\"\n", "nodes[0].addr"),
        (
            "[[nodes]]\naddr = \"127.0.0.1:1\"\nweight = 0\n",
            "nodes[0].weight",
        ),
        (
            "[[nodes]]\naddr = \"127.0.0.1:1\"\n[[nodes]]\naddr = \"127.0.0.1:1\"\n",
            "nodes:",
        ),
        (
            "[proxy]\nrequest_timeout_ms = \"x\"\n",
            "line 2: proxy.request_timeout_ms: invalid type",
        ),
        (
            "[[nodes]]\naddr = \"127.0.0.1:1\"\n[[nodes]]\naddr = \"127.0.0.1:2\"\nweight = \"2\"\n",
            "line 5: nodes[1].weight:",
        ),
        ("[proxy]\nlisten = \"127.0.0.1:99999\"\n", "proxy.listen"),
        ("[proxy]\nlisten = \":7000\"\n", "proxy.listen"),
        ("[[nodes]]\naddr = \"h:70000\"\n", "nodes[0].addr"),
        (
            "[ring]\nvnodes = 2\n[[nodes]]\naddr = \"127.0.0.1:1\"\n",
            "ring.vnodes: ketama makes points four at a time",
        ),
        ("[proxy]\nbogus = 1\n", "line 2: unknown field `bogus`"),
        ("[backend_auth]\nusername = \"u\"\n", "backend_auth.password"),
        (
            "[[nodes]]\naddr = \"127.0.0.1:1\"\nusername = \"u\"\n",
            "nodes[0].password",
        ),
        ("[proxy]\nlisten = \"0.0.0.0:7000\"\n", "protected mode"),
        ("[backend_tls]\n", "backend_tls.ca: TLS towards a node needs the CA"),
        (
            "[[nodes]]\naddr = \"127.0.0.1:1\"\ntls = true\n",
            "nodes[0].tls_ca (or backend_tls.ca)",
        ),
        (
            "[[nodes]]\naddr = \"127.0.0.1:1\"\ntls_ca = \"ca.pem\"\n",
            "nodes[0].tls: the entry's tls_* settings are used only with tls = true",
        ),
        (
            "[[nodes]]\naddr = \"127.0.0.1:1\"\ntls = true\ntls_ca = \"/nonexistent/ca.pem\"\n",
            "nodes[0].tls_ca: /nonexistent/ca.pem",
        ),
        (
            "[backend_tls]\nenabled = false\nca = \"/nonexistent/ca.pem\"\ncert = \"c.pem\"\n[[nodes]]\naddr = \"127.0.0.1:1\"\ntls = true\n",
            "backend_tls.cert: a client certificate needs its key",
        ),
        ("listen = =\n", "line 1: listen: "),
        ("a\nlisten = 0", "line 1: "),
    ];
    for (text, field) in cases {
        let err = Config::parse(text).unwrap_err();
        assert!(err.contains(field), "{text:?} -> {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}
