//! Replication with passwords: a replica authenticates to a primary that
//! has `requirepass` — the built-in node with `--masterauth` or `CONFIG SET
//! masterauth`, as redis-server — and the proxy, which authenticates its
//! own probes with `[backend_auth]`, gives a replica that password as its
//! `masterauth` whenever it points it at a primary: at start, and after a
//! kill -9 failover, on redis-server and on built-in nodes alike.

mod common;
mod ha;

use std::time::{Duration, Instant};

use common::*;
use ha::*;

const PW: &str = "node-secret";

fn authed(port: u16) -> redis::Connection {
    let mut c = direct(port);
    let _: () = redis::cmd("AUTH").arg(PW).query(&mut c).unwrap();
    c
}

fn link_status(c: &mut redis::Connection) -> String {
    let info: String = redis::cmd("INFO").arg("replication").query(c).unwrap();
    ring_field(&info, "master_link_status")
}

/// Waits (at most 10 s) until `key` reads `want` on `c`.
fn wait_value(c: &mut redis::Connection, key: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v: Option<String> = redis::cmd("GET").arg(key).query(c).unwrap();
        if v.as_deref() == Some(want) {
            return;
        }
        assert!(Instant::now() < deadline, "{key} reached the replica");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_builtin_replica_authenticates_to_its_primary_with_masterauth() {
    let (pp, rp, bare) = (free_port(), free_port(), free_port());
    let primary = format!("127.0.0.1:{pp}");
    let _p = builtin_with(pp, &["--requirepass", PW]);
    let _r = builtin_with(
        rp,
        &[
            "--requirepass",
            PW,
            "--masterauth",
            PW,
            "--replicaof",
            &primary,
        ],
    );
    let _b = builtin_with(bare, &["--replicaof", &primary]);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut authed(pp))
        .unwrap();
    let mut r = authed(rp);
    wait_value(&mut r, "k", "v");
    assert_eq!(link_status(&mut r), "up");
    let masterauth: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("masterauth")
        .query(&mut r)
        .unwrap();
    assert_eq!(masterauth, ["masterauth", PW]);
    // Without masterauth the primary refuses the handshake; CONFIG SET
    // masterauth lets the next attempt in.
    let mut b = direct(bare);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(link_status(&mut b), "down");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("masterauth")
        .arg(PW)
        .query(&mut b)
        .unwrap();
    wait_value(&mut b, "k", "v");
    assert_eq!(link_status(&mut b), "up");
}

/// A shard of three members, each with `requirepass`, none told how to
/// authenticate to a primary: the proxy wires them up and fails over.
fn password_shard_fails_over(start: impl Fn(u16) -> Proc, label: &str) {
    let (pp, rp, rp2) = (free_port(), free_port(), free_port());
    let mut p = start(pp);
    let _r = start(rp);
    let _r2 = start(rp2);
    let primary = format!("127.0.0.1:{pp}");
    let (a, b) = (format!("127.0.0.1:{rp}"), format!("127.0.0.1:{rp2}"));
    let extra =
        format!("[backend_auth]\npassword = \"{PW}\"\n[failover]\nwrite_ack = \"replica\"\n");
    let (proxy, dir) = ha_proxy(&[(primary.clone(), vec![a.clone(), b.clone()])], &extra);
    let shard = KilledShard {
        proxy: proxy.port,
        primary: &primary,
        replicas: &[&a, &b],
        state_file: &dir.path().join("state.toml"),
        label,
    };
    let (_, lost) = shard.kill_under_writes(|| p.kill());
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}

#[test]
fn the_proxy_gives_redis_replicas_the_node_password_and_fails_over() {
    if !need_redis("ha_auth") {
        return;
    }
    password_shard_fails_over(
        |port| redis_with(port, None, &["--requirepass", PW]),
        "redis-server with requirepass, write_ack=replica",
    );
}

#[test]
fn the_proxy_gives_builtin_replicas_the_node_password_and_fails_over() {
    password_shard_fails_over(
        |port| builtin_with(port, &["--requirepass", PW]),
        "built-in with --requirepass, write_ack=replica",
    );
}

/// A proxy with `cfg` (its `[proxy]` table added in front) on a free port.
fn proxy_with(cfg: &str) -> (Proc, tempdir::Dir) {
    let dir = tempdir::Dir::new();
    let port = free_port();
    let text = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 300\nrequest_timeout_ms = 2000\n{cfg}"
    );
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, text).unwrap();
    (start_proxy_with(&path, port), dir)
}

#[test]
fn reads_from_a_replica_log_in_with_the_shards_own_password() {
    if !need_redis("ha_auth") {
        return;
    }
    let (pp, rp) = (free_port(), free_port());
    let _p = redis_with(pp, None, &["--requirepass", PW]);
    let _r = redis_with(rp, None, &["--requirepass", PW]);
    let replica = format!("127.0.0.1:{rp}");
    // The password is the shard's own ([[nodes]] password), not a default.
    let (proxy, _dir) = proxy_with(&format!(
        "[failover]\nread_from = \"replica\"\n\
         [[nodes]]\naddr = \"127.0.0.1:{pp}\"\nname = \"node1\"\npassword = \"{PW}\"\nreplicas = [\"{replica}\"]\n"
    ));
    let mut con = connect(proxy.port);
    wait_ring(&mut con, 10, "the replica follows", |r| {
        is_synced_replica(r, &replica)
    });
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v: Option<String> = redis::cmd("GET").arg("k").query(&mut con).unwrap();
        if v.as_deref() == Some("v") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica serves the read");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut authed(rp))
        .unwrap();
    assert!(
        stats.contains("cmdstat_get:"),
        "the GET went to the replica"
    );
}

#[test]
fn addnode_checks_each_replica_logging_in_with_the_shards_password() {
    if !need_redis("ha_auth") {
        return;
    }
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let _p = redis_with(ports[0], None, &["--requirepass", PW]);
    let _n = redis_with(ports[1], None, &["--requirepass", PW]);
    let _r = redis_with(ports[2], None, &["--requirepass", PW]);
    let _other = redis_with(ports[3], None, &["--requirepass", "another"]);
    let a = |i: usize| format!("127.0.0.1:{}", ports[i]);
    let (proxy, _dir) = proxy_with(&format!(
        "[backend_auth]\npassword = \"{PW}\"\n[[nodes]]\naddr = \"{}\"\nname = \"node1\"\n",
        a(0)
    ));
    let mut con = connect(proxy.port);
    let add = |con: &mut redis::Connection, replica: &str| {
        redis::cmd("CLUSTER")
            .arg("ADDNODE")
            .arg(a(1))
            .arg("NAME")
            .arg("node2")
            .arg("REPLICAS")
            .arg(replica)
            .query::<String>(con)
    };
    // A replica that refuses the shard's password is refused, by name.
    let e = add(&mut con, &a(3)).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("cannot reach node {}", a(3))),
        "{e}"
    );
    assert!(!ring(&mut con).contains("node2"));
    assert_eq!(add(&mut con, &a(2)).unwrap(), "OK");
    wait_ring(&mut con, 15, "the new shard's replica follows it", |r| {
        is_synced_replica(r, &a(2))
    });
}
