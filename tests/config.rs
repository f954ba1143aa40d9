//! Configuration mistakes fail loudly, before anything starts: one line
//! naming the file and the field, and a hint where the file is meant for
//! the other subcommand.

mod common;

use std::process::{Command, Output};

use common::*;

fn shardis(args: &[&str]) -> Output {
    let dir = tempdir::Dir::new();
    Command::new(BIN)
        .current_dir(dir.path())
        .args(args)
        .output_dying()
        .unwrap()
}

/// Runs and expects failure; returns stderr.
fn fails(args: &[&str]) -> String {
    let out = shardis(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} should fail: {err}");
    assert!(!err.contains("panicked at"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("config ok"));
    err
}

/// Whether every one of `ports` can be bound now: the shipped configs use
/// 7000…, which another program on this machine may hold, and then
/// `--check-config` rightly fails. Records the skip when they cannot.
fn free_now(ports: std::ops::RangeInclusive<u16>) -> bool {
    let (lo, hi) = (*ports.start(), *ports.end());
    let free = ports
        .into_iter()
        .all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok());
    if !free {
        skip_busy(
            &format!("a port of 127.0.0.1:{lo}-{hi} is in use"),
            "stop what listens there",
        );
    }
    free
}

fn write(dir: &tempdir::Dir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// The repository's own config files, by absolute path.
fn repo_config(name: &str) -> String {
    format!("{}/config/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn up_with_a_config_that_does_not_exist_names_the_file() {
    let err = fails(&["up", "--config", "nosuch.toml", "--check-config"]);
    assert!(
        err.contains("nosuch.toml") && err.contains("No such file"),
        "{err}"
    );
}

#[test]
fn up_without_a_config_uses_the_defaults() {
    if !free_now(7000..=7010) {
        return;
    }
    let out = shardis(&["up", "--check-config"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("config ok: listen 127.0.0.1:7000"), "{text}");
    assert_eq!(text.matches("  node node").count(), 10, "{text}");
}

#[test]
fn up_starts_the_nodes_a_config_lists_with_their_names_and_weights() {
    if !free_now(7000..=7003) {
        return;
    }
    let out = shardis(&[
        "up",
        "--config",
        &repo_config("weighted.toml"),
        "--check-config",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for line in [
        "node small-a at 127.0.0.1:7001 weight 1",
        "node small-b at 127.0.0.1:7002 weight 1",
        "node big at 127.0.0.1:7003 weight 2",
    ] {
        assert!(text.contains(line), "{text}");
    }
    let err = fails(&[
        "up",
        "--config",
        &repo_config("weighted.toml"),
        "--nodes",
        "5",
    ]);
    assert!(err.contains("lists its own [[nodes]]"), "{err}");
}

#[test]
fn up_over_a_config_with_nodes_serves_through_exactly_those_nodes() {
    let dir = tempdir::Dir::new();
    let first = free_block(2);
    let port = free_port();
    let cfg = write(
        &dir,
        "w.toml",
        &format!(
            "[proxy]\nlisten = \"127.0.0.1:{port}\"\n[ring]\npoints = \"vnode\"\n[[nodes]]\naddr = \"127.0.0.1:{first}\"\nname = \"small\"\n[[nodes]]\naddr = \"127.0.0.1:{}\"\nname = \"big\"\nweight = 3\n",
            first + 1
        ),
    );
    let _up = Proc::spawn(
        Command::new(BIN)
            .current_dir(dir.path())
            .args(["up", "--config", &cfg])
            .stdout(std::process::Stdio::null()),
        port,
        "shardis up",
    );
    wait_ping(port);
    let mut con = connect(port);
    for i in 0..400 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    let pw = up_node_password(dir.path());
    let small: i64 = redis::cmd("DBSIZE")
        .query(&mut connect_with_password(first, &pw))
        .unwrap();
    let big: i64 = redis::cmd("DBSIZE")
        .query(&mut connect_with_password(first + 1, &pw))
        .unwrap();
    assert_eq!(small + big, 400);
    assert!(
        big > 2 * small,
        "weight 3 takes about three quarters: {small} / {big}"
    );
}

#[test]
fn listen_addresses_are_checked() {
    let dir = tempdir::Dir::new();
    let cfg = write(&dir, "p.toml", "[[nodes]]\naddr = \"127.0.0.1:6379\"\n");
    let err = fails(&[
        "proxy",
        "--config",
        &cfg,
        "--listen",
        "foo",
        "--check-config",
    ]);
    assert!(err.contains("--listen") && err.contains("\"foo\""), "{err}");
    let bad = write(
        &dir,
        "port.toml",
        "[proxy]\nlisten = \"127.0.0.1:99999\"\n[[nodes]]\naddr = \"127.0.0.1:6379\"\n",
    );
    let err = fails(&["proxy", "--config", &bad, "--check-config"]);
    assert!(
        err.contains("port.toml: proxy.listen") && err.contains("99999"),
        "{err}"
    );
    let err = fails(&["up", "--config", &bad, "--check-config"]);
    assert!(err.contains("proxy.listen"), "{err}");
}

#[test]
fn an_unknown_copy_rate_names_the_file_and_the_field() {
    let dir = tempdir::Dir::new();
    let cfg = write(&dir, "rate.toml", "[migration]\ncopy_rate = \"fast\"\n");
    let err = fails(&["up", "--config", &cfg, "--check-config"]);
    assert!(
        err.contains("rate.toml: migration.copy_rate: expected \"adaptive\" or \"unlimited\""),
        "{err}"
    );
}

#[test]
fn a_state_file_whose_directory_is_missing_fails_the_check() {
    let dir = tempdir::Dir::new();
    let cfg = write(
        &dir,
        "s.toml",
        "[proxy]\nstate_file = \"nosuchdir/topo.toml\"\n",
    );
    let err = fails(&["up", "--config", &cfg, "--check-config"]);
    assert!(
        err.contains("proxy.state_file") && err.contains("does not exist"),
        "{err}"
    );
    // A directory that is a file is no better.
    write(&dir, "afile", "");
    let cfg = write(
        &dir,
        "f.toml",
        "[proxy]\nstate_file = \"afile/topo.toml\"\n",
    );
    let err = fails(&["up", "--config", &cfg, "--check-config"]);
    assert!(err.contains("proxy.state_file"), "{err}");
}

#[test]
fn a_wrong_type_names_the_line_and_the_field() {
    let dir = tempdir::Dir::new();
    let cfg = write(
        &dir,
        "t.toml",
        "[proxy]\nrequest_timeout_ms = \"5s\"\n[[nodes]]\naddr = \"127.0.0.1:6379\"\n",
    );
    let err = fails(&["proxy", "--config", &cfg, "--check-config"]);
    assert!(
        err.contains("line 2: proxy.request_timeout_ms: invalid type"),
        "{err}"
    );
    let cfg = write(
        &dir,
        "w.toml",
        "[[nodes]]\naddr = \"127.0.0.1:1\"\n[[nodes]]\naddr = \"127.0.0.1:2\"\nweight = \"2\"\n",
    );
    let err = fails(&["proxy", "--config", &cfg, "--check-config"]);
    assert!(err.contains("nodes[1].weight"), "{err}");
}

#[test]
fn too_few_ketama_vnodes_blame_vnodes_not_the_weights() {
    let dir = tempdir::Dir::new();
    let cfg = write(&dir, "v.toml", "[ring]\nvnodes = 2\n");
    let err = fails(&["up", "--config", &cfg, "--check-config"]);
    assert!(
        err.contains("ring.vnodes") && !err.contains("weight"),
        "{err}"
    );
}

#[test]
fn the_up_config_given_to_proxy_says_it_is_for_up() {
    let err = fails(&[
        "proxy",
        "--config",
        &repo_config("default.toml"),
        "--check-config",
    ]);
    assert!(
        err.contains("for `shardis up`") && err.contains("redis-servers.toml"),
        "{err}"
    );
}

#[test]
fn every_shipped_config_passes_its_check() {
    if !free_now(7000..=7010) {
        return;
    }
    for (cmd, file) in [
        ("up", "default.toml"),
        ("up", "weighted.toml"),
        ("proxy", "weighted.toml"),
        ("proxy", "redis-servers.toml"),
    ] {
        let out = shardis(&[cmd, "--config", &repo_config(file), "--check-config"]);
        assert!(
            out.status.success(),
            "{cmd} {file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_relative_state_file_lives_next_to_the_config() {
    let nodes: Vec<Proc> = (0..2).map(|_| start_node(free_port())).collect();
    let cfg_dir = tempdir::Dir::new();
    let port = free_port();
    let cfg = write(
        &cfg_dir,
        "p.toml",
        &format!(
            "[proxy]\nlisten = \"127.0.0.1:{port}\"\nstate_file = \"topo.toml\"\n[[nodes]]\naddr = \"{}\"\nname = \"a\"\n[[nodes]]\naddr = \"{}\"\nname = \"b\"\n",
            nodes[0].addr(),
            nodes[1].addr()
        ),
    );
    let run_dir = tempdir::Dir::new();
    let _proxy = Proc::spawn(
        Command::new(BIN)
            .current_dir(run_dir.path())
            .args(["proxy", "--config", &cfg])
            .stdout(std::process::Stdio::null()),
        port,
        "proxy",
    );
    wait_ping(port);
    let mut con = connect(port);
    let _: String = redis::cmd("CLUSTER")
        .arg("REMOVENODE")
        .arg("b")
        .query(&mut con)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cfg_dir.path().join("topo.toml").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no state file next to the config"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!run_dir.path().join("topo.toml").exists());
}

#[test]
fn check_config_fails_when_a_port_it_would_listen_on_is_taken() {
    let dir = tempdir::Dir::new();
    // Three free ports; the test holds the middle one.
    let block = free_block(3);
    let taken = block + 1;
    let held = std::net::TcpListener::bind(("127.0.0.1", taken)).unwrap();
    let (free, first) = (free_port(), free_block(3));
    let up_check = |port: u16, first: u16| {
        let (port, first) = (port.to_string(), first.to_string());
        let args = [
            "up",
            "--nodes",
            "3",
            "--port",
            &port,
            "--first-node-port",
            &first,
        ];
        shardis(&[&args[..], &["--check-config"]].concat())
    };
    let refused = |out: Output, what: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what} is taken: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("config ok"));
        let want = format!("{what} 127.0.0.1:{taken}: cannot listen there");
        assert!(err.contains(&want), "{err}");
    };

    let out = up_check(free, first);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    refused(up_check(taken, first), "proxy listen");
    // node2 of that block would start on the taken port.
    refused(up_check(free, block), "node");

    // `proxy`: its listen address, and a configured admin listener.
    let node = start_node(free_port());
    for (listen, admin, what) in [(taken, free, "proxy listen"), (free, taken, "admin listen")] {
        let cfg = write(
            &dir,
            "p.toml",
            &format!(
                "[proxy]\nlisten = \"127.0.0.1:{listen}\"\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n[[nodes]]\naddr = \"{}\"\n",
                node.addr()
            ),
        );
        refused(
            shardis(&["proxy", "--config", &cfg, "--check-config"]),
            what,
        );
    }
    drop(held);
}
