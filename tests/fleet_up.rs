//! `shardis up --proxies 3`: a local etcd, three proxies sharing the
//! topology through it, and the nodes; a key written through one proxy reads
//! back through the others, CLUSTER PROXIES lists all three, SIGTERM stops
//! every process (etcd included) and removes etcd's data; `--check-config`
//! checks the other proxies' ports and etcd's.

mod common;

use std::process::{Command, Stdio};

use common::*;

/// A port with the two after it by 100 free too (the fleet's ports).
fn fleet_port() -> u16 {
    for _ in 0..100 {
        let p = free_port();
        let free = |q: u16| std::net::TcpListener::bind(("127.0.0.1", q)).is_ok();
        if p < 32_000 && free(p + 100) && free(p + 200) {
            return p;
        }
    }
    panic!("no free fleet ports");
}

/// Every process below `pid` (children, theirs, …), from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let parent_of = |p: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(all.iter().filter(|&&c| parent_of(c) == Some(p)));
        i += 1;
    }
    out.remove(0);
    out
}

/// Whether `pid` is a process that has not exited (a zombie has).
fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.split_whitespace().next()? != "Z"))
        .unwrap_or(false)
}

fn up_command(dir: &tempdir::Dir, port: u16, first: u16, etcd: u16) -> Command {
    std::fs::write(
        dir.path().join("up.toml"),
        "[admin]\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let mut cmd = Up::command(port, first, 3, dir.path());
    cmd.args(["--config", "up.toml", "--proxies", "3"])
        .args(["--etcd-port", &etcd.to_string()]);
    cmd
}

#[test]
fn up_with_three_proxies_shares_one_topology_and_stops_everything() {
    if !have_tool("etcd") {
        return;
    }
    let dir = tempdir::Dir::new();
    let (port, first, etcd) = (fleet_port(), free_block(3), free_block(2));
    let proc = Proc::spawn(
        up_command(&dir, port, first, etcd).stdout(Stdio::null()),
        port,
        "shardis up --proxies 3",
    );
    let up = Up {
        proc,
        first_node_port: first,
        nodes: 3,
        dir,
    };
    let ports = [port, port + 100, port + 200];
    for p in ports {
        wait_ping(p);
    }
    let proxies = || Raw::connect(port).call(&["CLUSTER", "PROXIES"]);
    eventually(15, "three proxies registered", || {
        proxies().matches("epoch=1").count() == 3
    });
    let listed = proxies();
    for p in ports {
        assert!(listed.contains(&format!("127.0.0.1:{p} ")), "{listed}");
    }
    assert_eq!(
        Raw::connect(ports[0]).call(&["SET", "fleet:k", "v1"]),
        "+OK\r\n"
    );
    for p in &ports[1..] {
        assert_eq!(
            Raw::connect(*p).call(&["GET", "fleet:k"]),
            "$2\r\nv1\r\n",
            "through {p}"
        );
    }
    let info = cluster_info(&mut connect(ports[2]));
    assert_eq!(ring_field(&info, "topology_store"), "etcd", "{info}");

    let pid = up.proc.pid();
    let children = descendants(pid);
    // Three nodes, and etcd under its supervisor.
    assert!(children.len() >= 5, "{children:?}");
    let data = std::env::temp_dir().join(format!("shardis-up-etcd-{pid}"));
    assert!(data.is_dir(), "etcd's data in {}", data.display());
    let (status, err) = up.stop();
    assert!(status.success(), "{status}: {err}");
    eventually(5, "every process stopped", || {
        !children.iter().any(|&c| is_running(c))
    });
    assert!(!is_listening(etcd), "etcd still listens");
    assert!(!data.exists(), "etcd's data left in {}", data.display());
}

#[test]
fn check_config_checks_the_other_proxies_ports_and_etcds() {
    if !have_tool("etcd") {
        return;
    }
    let dir = tempdir::Dir::new();
    let (port, first, etcd) = (fleet_port(), free_block(3), free_block(2));
    let check = |what: &str| {
        let out = up_command(&dir, port, first, etcd)
            .arg("--check-config")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{what}: passed");
        assert!(err.contains(what), "{err}");
    };
    {
        let _taken = std::net::TcpListener::bind(("127.0.0.1", port + 200)).unwrap();
        check(&format!("proxy listen 127.0.0.1:{}", port + 200));
    }
    {
        let _taken = std::net::TcpListener::bind(("127.0.0.1", etcd + 1)).unwrap();
        check(&format!("etcd peer 127.0.0.1:{}", etcd + 1));
    }
    let out = up_command(&dir, port, first, etcd)
        .arg("--check-config")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
