//! `shardis up`: one command brings up nodes and proxy; stopping it leaves nothing behind.

mod common;

use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// `shardis up` with `nodes` nodes from `first_node_port`, the proxy on `port`,
/// and no config file.
fn up_command(port: u16, first_node_port: u16, nodes: usize) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "up",
        "--nodes",
        &nodes.to_string(),
        "--port",
        &port.to_string(),
    ])
    .args([
        "--first-node-port",
        &first_node_port.to_string(),
        "--config",
        "/nonexistent/default.toml",
    ]);
    cmd
}

fn spawn_up(port: u16, first_node_port: u16, nodes: usize) -> Proc {
    Proc::spawn(
        up_command(port, first_node_port, nodes).stdout(Stdio::null()),
        port,
        "shardis up",
    )
}

/// A block of `n` consecutive free ports.
fn free_block(n: usize) -> u16 {
    'search: for _ in 0..50 {
        let base = free_port();
        if base as usize + n >= 65_000 {
            continue;
        }
        for p in base..base + n as u16 {
            if std::net::TcpListener::bind(("127.0.0.1", p)).is_err() {
                continue 'search;
            }
        }
        return base;
    }
    panic!("no block of {n} free ports");
}

fn is_listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

fn wait_closed(ports: impl Iterator<Item = u16> + Clone) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while ports.clone().any(is_listening) {
        assert!(Instant::now() < deadline, "a node outlived `shardis up`");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn up_serves_through_the_proxy_and_sigterm_stops_every_node() {
    let nodes = 4;
    let first = free_block(nodes);
    let port = free_port();
    let mut up = spawn_up(port, first, nodes);
    wait_ping(port);
    for p in first..first + nodes as u16 {
        wait_ping(p);
    }
    let mut con = connect(port);
    let _: () = redis::cmd("SET")
        .arg("user:42")
        .arg("ada")
        .query(&mut con)
        .unwrap();
    let v: String = redis::cmd("GET").arg("user:42").query(&mut con).unwrap();
    assert_eq!(v, "ada");
    Command::new("kill")
        .args(["-TERM", &up.pid().to_string()])
        .status()
        .unwrap();
    let status = up.child.wait().unwrap();
    assert!(status.success(), "up exits cleanly on SIGTERM: {status}");
    wait_closed(first..first + nodes as u16);
    assert!(!is_listening(port));
}

#[test]
fn nodes_exit_when_up_is_killed_outright() {
    let nodes = 3;
    let first = free_block(nodes);
    let port = free_port();
    let mut up = spawn_up(port, first, nodes);
    wait_ping(port);
    up.kill(); // SIGKILL: no handler runs, the nodes notice their parent is gone
    wait_closed(first..first + nodes as u16);
}

#[test]
fn up_with_its_port_taken_fails_clearly_and_starts_no_node() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let first = free_block(2);
    let out = up_command(port, first, 2).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{err}"
    );
    assert!(!is_listening(first) && !is_listening(first + 1));
}

#[test]
fn up_with_a_node_port_taken_fails_and_reaps_the_other_nodes() {
    let first = free_block(3);
    let _taken = std::net::TcpListener::bind(("127.0.0.1", first + 1)).unwrap();
    let port = free_port();
    let out = up_command(port, first, 3).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error:"), "{err}");
    wait_closed([first, first + 2].into_iter());
}

#[test]
fn invalid_config_is_one_line_naming_file_and_field() {
    let dir = tempdir::Dir::new();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[ring]\npoints = \"modulo\"\n").unwrap();
    let out = Command::new(BIN)
        .args(["proxy", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml") && err.contains("ring.points"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn spawnnode_grows_the_up_cluster_in_one_step_and_stop_reaps_it_too() {
    let nodes = 3;
    let first = free_block(nodes + 1);
    let port = free_port();
    let mut up = spawn_up(port, first, nodes);
    wait_ping(port);
    let mut con = connect(port);
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    let line: String = redis::cmd("CLUSTER")
        .arg("SPAWNNODE")
        .query(&mut con)
        .unwrap();
    let new_port = first + nodes as u16;
    assert_eq!(line, format!("node{new_port} 127.0.0.1:{new_port}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
        if info.contains("state:ok") {
            break;
        }
        assert!(Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let moved: i64 = redis::cmd("DBSIZE").query(&mut connect(new_port)).unwrap();
    assert!(moved > 0, "the spawned node took keys");
    for i in 0..300 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut con)
            .unwrap();
        assert_eq!(v, i);
    }
    Command::new("kill")
        .args(["-TERM", &up.pid().to_string()])
        .status()
        .unwrap();
    assert!(up.child.wait().unwrap().success());
    wait_closed(first..first + nodes as u16 + 1);
}

#[test]
fn spawnnode_outside_up_says_how_to_add_a_node() {
    let c = Cluster::builtin(1);
    let mut con = c.client();
    let r: redis::RedisResult<String> = redis::cmd("CLUSTER").arg("SPAWNNODE").query(&mut con);
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("CLUSTER ADDNODE host:port"));
}
