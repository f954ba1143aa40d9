//! CONFIG through the proxy: SET reaches every node and is `+OK` only when
//! every node accepted it, otherwise the error names each node that refused
//! and what it said; GET answers the proxy's own parameters and the first
//! node's.

mod common;

use common::{start_node, start_redis, Cluster};

fn config(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd("CONFIG");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(con)
}

fn get(con: &mut redis::Connection, name: &str) -> Vec<String> {
    redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(con)
        .unwrap()
}

#[test]
fn config_set_reaches_every_node_and_get_reads_the_first() {
    let cluster = Cluster::builtin(3);
    let mut c = cluster.client();
    let ok: String = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-lfu")
        .arg("maxmemory")
        .arg("100mb")
        .query(&mut c)
        .unwrap();
    assert_eq!(ok, "OK");
    for n in &cluster.nodes {
        let mut nc = common::connect(n.port);
        assert_eq!(
            get(&mut nc, "maxmemory-policy"),
            ["maxmemory-policy", "allkeys-lfu"]
        );
        assert_eq!(get(&mut nc, "maxmemory"), ["maxmemory", "104857600"]);
    }
    assert_eq!(
        get(&mut c, "maxmemory-policy"),
        ["maxmemory-policy", "allkeys-lfu"]
    );
    // The proxy's own parameters win over the nodes'.
    assert_eq!(get(&mut c, "databases"), ["databases", "1"]);
    assert_eq!(get(&mut c, "cluster-enabled"), ["cluster-enabled", "no"]);
    let mut pairs = get(&mut c, "maxmemory*");
    pairs.sort();
    assert!(
        pairs.contains(&"maxmemory-samples".to_string()),
        "{pairs:?}"
    );

    // A value every node refuses: each one is named with its reason.
    let err = config(&mut c, &["SET", "maxmemory-samples", "0"]).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("refused by 3 of 3 nodes"), "{text}");
    for i in 1..=3 {
        assert!(text.contains(&format!("node{i} (")), "{text}");
    }
    assert!(text.contains("argument must be between 1 and"), "{text}");
    // Arity and syntax are checked before anything is sent.
    let err = config(&mut c, &["SET", "maxmemory"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("wrong number of arguments for 'config|set'"),
        "{err}"
    );
    let err = config(&mut c, &["SET", "maxmemory", "1", "x"]).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
}

#[test]
fn config_set_names_the_nodes_that_refused_and_the_ones_that_did_not_answer() {
    if !common::have_tool("redis-server") {
        return;
    }
    let nodes = vec![
        start_node(common::free_port()),
        start_redis(common::free_port()),
        start_node(common::free_port()),
    ];
    let mut cluster = Cluster::over(nodes, "");
    let mut c = cluster.client();
    // redis-server knows this parameter; the built-in nodes do not.
    let err = config(&mut c, &["SET", "lazyfree-lazy-user-del", "yes"]).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("refused by 2 of 3 nodes"), "{text}");
    assert!(
        text.contains("node1 (") && text.contains("node3 ("),
        "{text}"
    );
    assert!(!text.contains("node2 ("), "{text}");
    assert!(
        text.contains(
            "Unknown option or number of arguments for CONFIG SET - 'lazyfree-lazy-user-del'"
        ),
        "{text}"
    );
    // Accepted by all three.
    let ok: String = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hll-sparse-max-bytes")
        .arg("2000")
        .query(&mut c)
        .unwrap();
    assert_eq!(ok, "OK");
    // A node that is down is named too.
    cluster.nodes[2].kill();
    let err = config(&mut c, &["SET", "hll-sparse-max-bytes", "3000"]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("refused by 1 of 3 nodes") && text.contains("node3 ("),
        "{text}"
    );
}

#[test]
fn config_get_requirepass_answers_the_empty_password_as_redis_server_does() {
    let cluster = Cluster::builtin(2);
    let want = vec!["requirepass".to_string(), String::new()];
    assert_eq!(get(&mut cluster.client(), "requirepass"), want, "the proxy");
    let mut node = common::connect(cluster.nodes[0].port);
    assert_eq!(get(&mut node, "requirepass"), want, "a built-in node");
    if common::have_tool("redis-server") {
        let redis = start_redis(common::free_port());
        assert_eq!(
            get(&mut common::connect(redis.port), "requirepass"),
            want,
            "redis-server"
        );
    }
}
