//! Topology changes when a party fails: a node stopped (SIGSTOP) or killed
//! (SIGKILL) mid-change, and a state file that cannot be written. Over
//! redis-server, whose MIGRATE blocks the source while the target is silent.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use redis::Commands;

/// A proxy over redis-server nodes, with a state file, its stderr kept, and
/// environment switches for fault injection.
struct Rig {
    nodes: Vec<Proc>,
    proxy: ProxyProc,
    port: u16,
    dir: tempdir::Dir,
}

/// The proxy process, killed on drop; its stderr goes to `proxy.err`.
struct ProxyProc(std::process::Child);

impl ProxyProc {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ProxyProc {
    fn drop(&mut self) {
        self.kill();
    }
}

const MIGRATION: &str = "[migration]\nbatch = 50\nmax_keys_per_sec = 1000\ntimeout_ms = 5000\n";

impl Rig {
    fn start(n: usize, env: &[(&str, &str)]) -> Rig {
        let nodes: Vec<Proc> = (0..n).map(|_| start_redis(free_port())).collect();
        let dir = tempdir::Dir::new();
        std::fs::create_dir(dir.path().join("state")).unwrap();
        let port = free_port();
        let mut cfg = format!(
            "[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 500\nrequest_timeout_ms = 2000\nstate_file = \"{}\"\n{MIGRATION}\n",
            dir.path().join("state/topology.toml").display()
        );
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
        cfg.push_str(&nodes_toml(&addrs));
        std::fs::write(dir.path().join("proxy.toml"), cfg).unwrap();
        let proxy = spawn_proxy(&dir, port, env);
        Rig {
            nodes,
            proxy,
            port,
            dir,
        }
    }

    fn con(&self) -> redis::Connection {
        connect(self.port)
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("proxy.err")).unwrap_or_default()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.proxy.kill();
        assert!(
            std::thread::panicking() || !self.stderr().contains("panicked at"),
            "{}",
            self.stderr()
        );
    }
}

fn spawn_proxy(dir: &tempdir::Dir, port: u16, env: &[(&str, &str)]) -> ProxyProc {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("proxy.err"))
        .unwrap();
    let child = Command::new(BIN)
        .args(["proxy", "--config"])
        .arg(dir.path().join("proxy.toml"))
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn_dying()
        .expect("start proxy");
    let p = ProxyProc(child);
    wait_ping(port);
    p
}

fn signal(p: &Proc, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &p.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {}", p.pid());
}

fn wait_state(con: &mut redis::Connection, state: &str) -> String {
    wait_info(con, 60, state, |i| ring_field(i, "state") == state)
}

fn wait_copying(con: &mut redis::Connection) -> String {
    wait_info(con, 60, "a copy under way", |i| {
        ring_field(i, "state") == "copying"
            && ring_field(i, "migration_keys_copied")
                .parse::<u64>()
                .unwrap_or(0)
                > 0
    })
}

fn admin(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<()> {
    redis::cmd(args[0]).arg(&args[1..]).query(con)
}

/// Waits (bounded) until `port`'s node holds no key.
fn wait_empty(port: u16, secs: u64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let n = dbsize(port);
        if n == 0 || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_stopped_joining_node_aborts_the_add_its_copies_are_deleted_and_it_can_join_again() {
    if !have_tool("redis-server") {
        return;
    }
    let rig = Rig::start(3, &[]);
    let mut con = rig.con();
    mset_keys(&mut con, "k:", 4000);
    let joining = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_copying(&mut con);
    signal(&joining, "-STOP");
    let i = wait_state(&mut con, "aborted");
    let err = ring_field(&i, "last_error");
    assert!(
        err.contains("node node4"),
        "the abort names the stopped node: {err}"
    );
    assert!(
        !err.contains("node node1") && !err.contains("node node2") && !err.contains("node node3"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    signal(&joining, "-CONT");
    assert_eq!(
        wait_empty(joining.port, 30),
        0,
        "the partial copies are deleted once node4 answers again"
    );
    assert_eq!(ring_field(&cluster_info(&mut con), "sweep_pending"), "-");
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_state(&mut con, "ok");
    assert_eq!(mset_keys_readable(&mut con, "k:", 4000), 4000);
    assert!(dbsize(joining.port) > 0);
}

#[test]
fn a_joining_node_stopped_before_its_copies_are_deleted_is_flushed_when_added_again() {
    if !have_tool("redis-server") {
        return;
    }
    let rig = Rig::start(3, &[]);
    let mut con = rig.con();
    mset_keys(&mut con, "k:", 4000);
    let joining = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_copying(&mut con);
    signal(&joining, "-STOP");
    let i = wait_state(&mut con, "aborted");
    assert_eq!(ring_field(&i, "sweep_pending"), "node4", "{i}");
    // Straight back and re-added before the background retry got to it.
    signal(&joining, "-CONT");
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_state(&mut con, "ok");
    assert_eq!(mset_keys_readable(&mut con, "k:", 4000), 4000);
}

#[test]
fn an_old_owner_killed_mid_copy_aborts_naming_it_and_leaves_the_joining_node_empty() {
    if !have_tool("redis-server") {
        return;
    }
    let mut rig = Rig::start(3, &[]);
    let mut con = rig.con();
    mset_keys(&mut con, "k:", 4000);
    let joining = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_copying(&mut con);
    rig.nodes[0].kill();
    let i = wait_state(&mut con, "aborted");
    let err = ring_field(&i, "last_error");
    assert!(
        err.contains("node node1"),
        "the abort names the dead node: {err}"
    );
    assert_eq!(
        dbsize(joining.port),
        0,
        "the joining node's partial copies were deleted"
    );
    // The operator drops the dead node; its keys are lost with it.
    admin(&mut con, &["CLUSTER", "REMOVENODE", "node1"]).unwrap();
    assert_eq!(ring_field(&cluster_info(&mut con), "nodes"), "2");
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_state(&mut con, "ok");
    let alive = mset_keys_readable(&mut con, "k:", 4000);
    assert!(
        alive > 2000 && alive < 4000,
        "node1's keys are lost, the others kept: {alive}"
    );
}

#[test]
fn removing_a_dead_node_mid_copy_aborts_the_copy_and_drops_it() {
    if !have_tool("redis-server") {
        return;
    }
    let mut rig = Rig::start(3, &[]);
    let mut con = rig.con();
    mset_keys(&mut con, "k:", 4000);
    let joining = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_copying(&mut con);
    signal(&rig.nodes[1], "-STOP");
    rig.nodes[1].kill();
    admin(&mut con, &["CLUSTER", "REMOVENODE", "node2"]).unwrap();
    let i = cluster_info(&mut con);
    assert_eq!(ring_field(&i, "state"), "ok", "{i}");
    assert_eq!(ring_field(&i, "nodes"), "2", "{i}");
    assert_eq!(dbsize(joining.port), 0);
}

#[test]
fn a_node_dead_during_the_sweep_does_not_block_the_next_change() {
    if !have_tool("redis-server") {
        return;
    }
    let mut rig = Rig::start(3, &[("SHARDIS_FAULT_PHASE_DELAY_MS", "1500")]);
    let mut con = rig.con();
    mset_keys(&mut con, "k:", 2000);
    let joining = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_state(&mut con, "sweeping");
    rig.nodes[0].kill();
    let i = wait_state(&mut con, "ok");
    assert_eq!(ring_field(&i, "sweep_pending"), "node1", "{i}");
    assert!(ring_field(&i, "last_error").contains("node1"), "{i}");
    // The dead node can be removed, and changes go on.
    admin(&mut con, &["CLUSTER", "REMOVENODE", "node1"]).unwrap();
    assert_eq!(ring_field(&cluster_info(&mut con), "nodes"), "3");
    let extra = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &extra.addr(), "NAME", "node5"],
    )
    .unwrap();
    // Removing a node that dies mid-sweep waits the (bounded) sweep out.
    wait_state(&mut con, "sweeping");
    rig.nodes[1].kill();
    admin(&mut con, &["CLUSTER", "REMOVENODE", "node2"]).unwrap();
    let i = cluster_info(&mut con);
    assert_eq!(ring_field(&i, "state"), "ok", "{i}");
    assert_eq!(ring_field(&i, "nodes"), "3", "{i}");
    // A proxy restarted mid-sweep, with a node dead, finishes the change too.
    let extra2 = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &extra2.addr(), "NAME", "node6"],
    )
    .unwrap();
    wait_state(&mut con, "sweeping");
    rig.nodes[2].kill();
    rig.proxy.kill();
    rig.proxy = spawn_proxy(&rig.dir, rig.port, &[]);
    let mut con = rig.con();
    let i = wait_state(&mut con, "ok");
    assert_eq!(ring_field(&i, "nodes"), "4", "{i}");
    assert!(ring_field(&i, "sweep_pending").contains("node3"), "{i}");
    let _: () = con.set("after", "1").unwrap();
    admin(&mut con, &["CLUSTER", "REMOVENODE", "node3"]).unwrap();
    admin(&mut con, &["CLUSTER", "REMOVENODE", "node3"]).unwrap();
    let i = cluster_info(&mut con);
    assert_eq!(ring_field(&i, "nodes"), "3", "{i}");
    assert_eq!(ring_field(&i, "sweep_pending"), "node1,node2", "{i}");
}

#[test]
fn a_stopped_joining_node_stalls_the_sources_clients_briefly_not_for_the_migrate_timeout() {
    if !have_tool("redis-server") {
        return;
    }
    let rig = Rig::start(3, &[]);
    let mut con = rig.con();
    mset_keys(&mut con, "k:", 4000);
    let joining = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_copying(&mut con);
    signal(&joining, "-STOP");
    // Reads of every source's keys while the change notices and aborts.
    let mut worst = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut reader = rig.con();
    let mut i = 0;
    while Instant::now() < deadline {
        let t = Instant::now();
        let _: Option<String> = reader.get(format!("k:{}", i % 4000)).unwrap();
        worst = worst.max(t.elapsed());
        i += 7;
    }
    signal(&joining, "-CONT");
    eprintln!(
        "longest read while the joining node was stopped: {} ms",
        worst.as_millis()
    );
    // migration.timeout_ms is 5000: a MIGRATE waiting that long on the
    // stopped target would stall the source's clients as long.
    assert!(worst < Duration::from_millis(3000), "stall {worst:?}");
    wait_state(&mut con, "aborted");
}

#[test]
fn an_unwritable_state_file_refuses_the_change_and_the_proxy_keeps_serving() {
    if !have_tool("redis-server") {
        return;
    }
    let rig = Rig::start(3, &[]);
    let mut con = rig.con();
    mset_keys(&mut con, "k:", 500);
    std::fs::remove_dir_all(rig.dir.path().join("state")).unwrap();
    let joining = start_redis(free_port());
    let err = admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("topology.toml") && err.contains("No such file or directory"),
        "{err}"
    );
    let i = cluster_info(&mut con);
    assert_eq!(ring_field(&i, "state"), "ok", "{i}");
    assert!(
        ring_field(&i, "last_error").contains("topology.toml"),
        "{i}"
    );
    assert_eq!(mset_keys_readable(&mut con, "k:", 500), 500);
}

#[test]
fn a_state_file_lost_mid_copy_aborts_the_change_at_cutover_naming_the_file() {
    if !have_tool("redis-server") {
        return;
    }
    let rig = Rig::start(3, &[]);
    let mut con = rig.con();
    mset_keys(&mut con, "k:", 3000);
    let joining = start_redis(free_port());
    admin(
        &mut con,
        &["CLUSTER", "ADDNODE", &joining.addr(), "NAME", "node4"],
    )
    .unwrap();
    wait_copying(&mut con);
    std::fs::remove_dir_all(rig.dir.path().join("state")).unwrap();
    let i = wait_state(&mut con, "aborted");
    let err = ring_field(&i, "last_error");
    assert!(
        err.contains("topology.toml") && err.contains("No such file or directory"),
        "{err}"
    );
    assert_eq!(ring_field(&i, "nodes"), "3");
    assert_eq!(dbsize(joining.port), 0);
    assert_eq!(mset_keys_readable(&mut con, "k:", 3000), 3000);
    let _: () = con.set("after", "1").unwrap();
}
