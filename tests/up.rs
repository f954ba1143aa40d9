//! `shardis up`: one command brings up nodes and proxy; stopping it leaves nothing behind.

mod common;

use std::process::{Command, Stdio};

use common::*;

fn spawn_up(port: u16, first_node_port: u16, nodes: usize, dir: &tempdir::Dir) -> Proc {
    Proc::spawn(
        Up::command(port, first_node_port, nodes, dir.path()).stdout(Stdio::null()),
        port,
        "shardis up",
    )
}

#[test]
fn up_serves_through_the_proxy_and_sigterm_stops_every_node() {
    let nodes = 4;
    let first = free_block(nodes);
    let port = free_port();
    let dir = tempdir::Dir::new();
    let mut up = spawn_up(port, first, nodes, &dir);
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
    wait_closed(first..first + nodes as u16, 5);
    assert!(!is_listening(port));
}

#[test]
fn nodes_exit_when_up_is_killed_outright() {
    let nodes = 3;
    let first = free_block(nodes);
    let port = free_port();
    let dir = tempdir::Dir::new();
    let mut up = spawn_up(port, first, nodes, &dir);
    wait_ping(port);
    up.kill(); // SIGKILL: no handler runs, the nodes notice their parent is gone
    wait_closed(first..first + nodes as u16, 5);
}

#[test]
fn up_with_its_port_taken_fails_clearly_and_starts_no_node() {
    let taken = common::bind_free();
    let port = taken.local_addr().unwrap().port();
    let first = free_block(2);
    let dir = tempdir::Dir::new();
    let out = Up::command(port, first, 2, dir.path())
        .output_dying()
        .unwrap();
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
    let dir = tempdir::Dir::new();
    let out = Up::command(port, first, 3, dir.path())
        .output_dying()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error:"), "{err}");
    wait_closed([first, first + 2].into_iter(), 5);
}

#[test]
fn invalid_config_is_one_line_naming_file_and_field() {
    let dir = tempdir::Dir::new();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[ring]\npoints = \"modulo\"\n").unwrap();
    let out = Command::new(BIN)
        .args(["proxy", "--config", path.to_str().unwrap()])
        .output_dying()
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
    let dir = tempdir::Dir::new();
    let mut up = spawn_up(port, first, nodes, &dir);
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
    assert_eq!(
        line,
        format!("node4 127.0.0.1:{new_port}"),
        "named after node1..node3"
    );
    wait_state_ok(&mut con, 60);
    let mut node = connect_with_password(new_port, &up_node_password(dir.path()));
    let moved: i64 = redis::cmd("DBSIZE").query(&mut node).unwrap();
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
    wait_closed(first..first + nodes as u16 + 1, 5);
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

#[test]
fn a_node_removed_under_up_is_stopped_once_swept_and_the_log_says_so() {
    let up = Up::start(3, &[]);
    let mut con = connect(up.port());
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    let _: String = redis::cmd("CLUSTER")
        .arg("REMOVENODE")
        .arg("node2")
        .query(&mut con)
        .unwrap();
    wait_state_ok(&mut con, 60);
    let node2 = up.first_node_port + 1;
    wait_closed(std::iter::once(node2), 10);
    for i in 0..200 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut con)
            .unwrap();
        assert_eq!(v, i);
    }
    let (status, err) = up.stop();
    assert!(status.success());
    assert!(
        err.contains("stopping the node process") && err.contains(&format!("127.0.0.1:{node2}")),
        "{err}"
    );
}

#[test]
fn restarted_up_starts_the_state_files_topology_and_says_how_it_differs_from_the_config() {
    let cfg_dir = tempdir::Dir::new();
    let cfg = cfg_dir.path().join("c.toml");
    // Relative: resolved next to the config file, not in up's directory.
    std::fs::write(&cfg, "[proxy]\nstate_file = \"topo.toml\"\n").unwrap();
    let cfg = cfg.to_str().unwrap().to_string();
    let up = Up::start(3, &["--config", &cfg]);
    let mut con = connect(up.port());
    let _: String = redis::cmd("CLUSTER")
        .arg("REMOVENODE")
        .arg("node2")
        .query(&mut con)
        .unwrap();
    wait_state_ok(&mut con, 60);
    let spawned: String = redis::cmd("CLUSTER")
        .arg("SPAWNNODE")
        .query(&mut con)
        .unwrap();
    assert!(spawned.starts_with("node4 127.0.0.1:"), "{spawned}");
    let node4: u16 = spawned.rsplit(':').next().unwrap().parse().unwrap();
    wait_state_ok(&mut con, 60);
    let (first, port) = (up.first_node_port, up.port());
    let (status, _) = up.stop();
    assert!(status.success());
    assert!(
        cfg_dir.path().join("topo.toml").exists(),
        "state file next to the config"
    );
    wait_closed((first..first + 3).chain([node4]), 10);

    let dir = tempdir::Dir::new();
    let check = Up::command(port, first, 3, dir.path())
        .args(["--config", &cfg, "--check-config"])
        .output_dying()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && said.contains("topology from the state file"),
        "--check-config tells what a start would run: {said}"
    );
    let child = Up::command(port, first, 3, dir.path())
        .args(["--config", &cfg])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_dying()
        .unwrap();
    // Killed if an assertion below fails, so no `up` outlives the test.
    let mut child = KillOnDrop(Some(child));
    wait_ping(port);
    let nodes: String = redis::cmd("CLUSTER")
        .arg("RINGINFO")
        .query(&mut connect(port))
        .unwrap();
    assert!(nodes.contains("nodes:3"), "{nodes}");
    assert!(is_listening(node4), "the spawned node4 is started again");
    assert!(!is_listening(first + 1), "the removed node2 is not");
    Command::new("kill")
        .args(["-TERM", &child.0.as_ref().unwrap().id().to_string()])
        .status()
        .unwrap();
    let out = child.0.take().unwrap().wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("topology from the state file")
            && stdout.contains("added at run time: node4")
            && stdout.contains("removed at run time: node2"),
        "{stdout}"
    );
}

#[test]
fn a_command_the_built_in_nodes_lack_names_the_backends_that_serve_it() {
    let up = Up::start(1, &[]);
    let r: redis::RedisResult<String> = redis::cmd("HEXPIRE")
        .arg(&["h", "10", "FIELDS", "1", "f"])
        .query(&mut connect(up.port()));
    let err = r.unwrap_err().to_string();
    assert!(
        err.contains("'hexpire' is not served by the built-in nodes; use redis-server nodes (config/redis-servers.toml)"),
        "{err}"
    );
}

#[test]
fn up_with_redis_server_nodes_serves_what_they_serve_and_leaves_none_behind() {
    if !have_tool("redis-server") {
        return;
    }
    let mut up = Up::start(3, &["--backend", "redis-server"]);
    let mut con = connect(up.port());
    let id: String = redis::cmd("XADD")
        .arg("s")
        .arg("*")
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    assert!(id.contains('-'), "{id}");
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut up.node(up.first_node_port))
        .unwrap();
    assert!(
        info.contains("redis_version:"),
        "a real redis-server: {info}"
    );
    // Even a SIGKILL of up leaves no redis-server running.
    up.proc.kill();
    wait_closed(up.first_node_port..up.first_node_port + 3, 10);
}

#[test]
fn redis_server_backend_without_redis_server_installed_fails_clearly() {
    let out = Command::new(BIN)
        .args(["up", "--backend", "redis-server", "--check-config"])
        .env("PATH", "/nonexistent")
        .output_dying()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("redis-server is not installed"), "{err}");
}

/// A child process killed when dropped, unless taken out first.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
