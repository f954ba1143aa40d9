//! Cluster-mode clients through the proxy: the proxy answers CLUSTER SLOTS,
//! SHARDS, NODES and INFO as one Redis Cluster node owning all 16384 slots,
//! so redis-py `RedisCluster`, ioredis `Cluster` and node-redis
//! `createCluster` send everything to it. The libraries are the ones
//! `.ci/run` installs (see tests/clients.rs).

mod common;

use std::process::Command;

use common::*;

/// Keys each client writes and reads back, and pipeline length.
const KEYS: &str = "500";

fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

#[test]
fn cluster_views_describe_the_proxy_as_one_node_owning_every_slot() {
    let c = Cluster::builtin(2);
    let port = c.proxy.port;
    let mut s = RespConn::connect_loopback(port, std::time::Duration::from_secs(10)).unwrap();
    let id = s.cmd(&["CLUSTER", "MYID"]);
    assert!(id.starts_with(b"$40\r\n"), "{}", text(&id));
    let id = text(&id[5..45]);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let want = format!(
        "*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:{port}\r\n$40\r\n{id}\r\n*0\r\n"
    );
    assert_eq!(text(&s.cmd(&["CLUSTER", "SLOTS"])), want);
    let line = format!(
        "{id} 127.0.0.1:{port}@{} myself,master - 0 0 1 connected 0-16383\n",
        port as u32 + 10000
    );
    assert_eq!(
        text(&s.cmd(&["CLUSTER", "NODES"])),
        format!("${}\r\n{line}\r\n", line.len())
    );
    let info = text(&s.cmd(&["CLUSTER", "INFO"]));
    for field in [
        "cluster_state:ok\r\n",
        "cluster_slots_assigned:16384\r\n",
        "cluster_known_nodes:1\r\n",
        "cluster_size:1\r\n",
    ] {
        assert!(info.contains(field), "{field} missing: {info}");
    }
    let shards = text(&s.cmd(&["CLUSTER", "SHARDS"]));
    assert!(
        shards.starts_with("*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n"),
        "{shards}"
    );
    assert!(
        shards.contains(&format!("$4\r\nport\r\n:{port}\r\n")),
        "{shards}"
    );
    for cmd in ["READONLY", "READWRITE", "ASKING"] {
        assert_eq!(s.cmd(&[cmd]), b"+OK\r\n");
    }
    // RESP3: SHARDS and SLOTS' metadata are maps.
    s.cmd(&["HELLO", "3"]);
    let shards = text(&s.cmd(&["CLUSTER", "SHARDS"]));
    assert!(
        shards.starts_with("*1\r\n%2\r\n$5\r\nslots\r\n"),
        "{shards}"
    );
    assert!(text(&s.cmd(&["CLUSTER", "SLOTS"])).ends_with("%0\r\n"));
}

#[test]
fn cluster_help_lists_every_subcommand_in_redis_layout() {
    let c = Cluster::builtin(1);
    let mut s =
        RespConn::connect_loopback(c.proxy.port, std::time::Duration::from_secs(10)).unwrap();
    let help = text(&s.cmd(&["CLUSTER", "HELP"]));
    assert!(
        help.starts_with(
            "*29\r\n+CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
        ),
        "{help}"
    );
    assert!(
        help.ends_with("+HELP\r\n+    Print this help.\r\n"),
        "{help}"
    );
    for sub in [
        "ADDNODE",
        "SPAWNNODE",
        "REMOVENODE",
        "PLAN",
        "ADDREPLICA",
        "REMOVEREPLICA",
        "FAILOVER",
        "RING",
        "RINGINFO",
        "KEYNODE",
    ] {
        assert!(help.contains(&format!("\r\n+{sub}")), "{sub} in {help}");
    }
    for sub in ["HOTKEYS", "SLOTS", "KEYSLOT"] {
        assert!(help.contains(&format!("\r\n+{sub}")), "{sub} in {help}");
    }
    assert_eq!(
        text(&s.cmd(&["CLUSTER", "HELP", "x"])),
        "-ERR wrong number of arguments for 'cluster|help' command\r\n"
    );
}

#[test]
fn the_ring_views_live_under_cluster_ring_and_ringinfo() {
    let c = Cluster::builtin(3);
    let mut s =
        RespConn::connect_loopback(c.proxy.port, std::time::Duration::from_secs(10)).unwrap();
    let ring = text(&s.cmd(&["CLUSTER", "RING"]));
    assert_eq!(ring.matches(" role=member").count(), 3, "{ring}");
    let info = text(&s.cmd(&["CLUSTER", "RINGINFO"]));
    assert!(
        info.contains("\r\nstate:ok\r\nepoch:1\r\nnodes:3\r\n"),
        "{info}"
    );
    assert!(!info.contains("cluster_state"), "{info}");
}

#[test]
fn redis_py_cluster_client_works_through_the_proxy() {
    let c = Cluster::builtin(10);
    let Some(lib) = redis_py(8) else {
        return;
    };
    let out = run_ok(
        Command::new("timeout")
            .args(["120", "python3"])
            .arg(manifest().join("tests/clients/redis_py_cluster.py"))
            .args([&c.proxy.port.to_string(), KEYS])
            .env("PYTHONPATH", &lib),
    );
    assert!(out.contains("RedisCluster ok"), "{out}");
}

#[test]
fn ioredis_and_node_redis_cluster_clients_work_through_the_proxy() {
    let Some(dir) = node_clients() else {
        return;
    };
    let c = Cluster::builtin(10);
    let out = run_ok(
        Command::new("timeout")
            .args(["120", "node"])
            .arg(dir.join("cluster.js"))
            .args([&c.proxy.port.to_string(), KEYS]),
    );
    for lib in ["ioredis 5.", "redis4 4.", "redis6 6."] {
        assert!(out.contains(lib), "{lib} did not report:\n{out}");
    }
}
