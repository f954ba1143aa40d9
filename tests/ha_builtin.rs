//! High availability on built-in nodes, as `shardis up --replicas R` runs
//! them: every node gets R built-in replicas that follow it from the start;
//! kill -9 of a primary under writes through the proxy promotes a replica
//! within the failover window, and with `write_ack = "replica"` (two
//! replicas, so the promoted primary still has one) no acknowledged write
//! is lost. The same checks as `tests/ha_failover.rs` on redis-server.
//! `up` starts a killed node again, as a replica of its shard's new
//! primary, so one replica a shard keeps `write_ack = "replica"` writable.
//! Timings are printed, not asserted.

mod common;
mod ha;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use ha::*;

/// `shardis up --nodes 3 --replicas R` with a state file, no admin HTTP
/// listener and `extra` config; the node ports are `first..first + 3 × (1 + R)`.
struct UpHa {
    up: Proc,
    first: u16,
    dir: tempdir::Dir,
}

const NODES: u16 = 3;

fn up_with_replicas(replicas: u16, extra: &str) -> UpHa {
    let dir = tempdir::Dir::new();
    let first = free_block((NODES * (1 + replicas)) as usize);
    let port = free_port();
    let cfg = format!(
        "[proxy]\nconnect_timeout_ms = 300\nrequest_timeout_ms = 2000\nstate_file = \"state.toml\"\n[admin]\nlisten = \"\"\n{extra}\n"
    );
    let path = dir.path().join("up.toml");
    std::fs::write(&path, cfg).unwrap();
    let mut cmd = Up::command(port, first, NODES as usize, dir.path());
    cmd.args(["--config", path.to_str().unwrap()])
        .args(["--replicas", &replicas.to_string()])
        .stdout(Stdio::null());
    let up = Proc::spawn(&mut cmd, port, "shardis up");
    wait_ping(port);
    for p in first..first + NODES * (1 + replicas) {
        wait_ping(p);
    }
    UpHa { up, first, dir }
}

impl UpHa {
    /// A direct connection to a member, logged in as the proxy is.
    fn direct(&self, port: u16) -> redis::Connection {
        connect_with_password(port, &up_node_password(self.dir.path()))
    }
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

#[test]
fn up_with_one_replica_each_starts_every_node_with_a_replica_that_follows_it() {
    let c = up_with_replicas(1, "");
    let mut con = connect(c.up.port);
    let r = wait_ring(&mut con, 15, "every replica follows its node", |r| {
        (0..NODES).all(|i| is_synced_replica(r, &addr(c.first + NODES + i)))
    });
    for i in 0..NODES {
        let line = format!(
            "{a} {a} replica_of=node{} state=up",
            i + 1,
            a = addr(c.first + NODES + i)
        );
        assert!(r.contains(&line), "{line}:\n{r}");
    }
    for i in 0..20 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    // Every key reaches the replica of the node that owns it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let on_replicas: usize = (0..NODES)
            .map(|i| {
                let n: usize = redis::cmd("DBSIZE")
                    .query(&mut c.direct(c.first + NODES + i))
                    .unwrap();
                n
            })
            .sum();
        if on_replicas == 20 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{on_replicas} of 20 keys on the replicas"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut d = c.direct(c.first + NODES);
    let e = redis::cmd("SET")
        .arg("x")
        .arg("1")
        .query::<()>(&mut d)
        .unwrap_err();
    assert_eq!(e.code(), Some("READONLY"), "{e}");
}

/// kill -9 of node1's built-in primary, a child of `up`, under writes.
fn kill_builtin_primary(replicas: u16, write_ack: &str) -> (Writes, Vec<usize>) {
    let extra = format!("[failover]\nwrite_ack = \"{write_ack}\"\n");
    let c = up_with_replicas(replicas, &extra);
    let primary = addr(c.first);
    let copies: Vec<String> = (1..=replicas).map(|j| addr(c.first + j * NODES)).collect();
    let copies: Vec<&str> = copies.iter().map(String::as_str).collect();
    let pid = child_with_port(c.up.pid(), c.first).expect("node1's process under up");
    let label = format!("built-in, {replicas} replica(s), write_ack={write_ack}");
    let shard = KilledShard {
        proxy: c.up.port,
        primary: &primary,
        replicas: &copies,
        state_file: &c.dir.path().join("state.toml"),
        label: &label,
    };
    shard.kill_under_writes(|| kill_9(pid))
}

#[test]
fn killing_a_builtin_primary_under_up_fails_over_to_its_replica() {
    kill_builtin_primary(1, "primary");
}

#[test]
fn killing_a_builtin_primary_loses_no_write_acknowledged_by_a_replica() {
    let (_, lost) = kill_builtin_primary(2, "replica");
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}

#[test]
fn up_restarts_a_killed_primary_as_a_replica_so_one_replica_keeps_acknowledging_writes() {
    let extra = "[failover]\nwrite_ack = \"replica\"\nwait_timeout_ms = 2000\n";
    let c = up_with_replicas(1, extra);
    let (old, replica) = (addr(c.first), addr(c.first + NODES));
    let mut con = connect(c.up.port);
    wait_ring(&mut con, 15, "node1's replica follows it", |r| {
        is_synced_replica(r, &replica)
    });
    let key = (0..1000)
        .map(|i| format!("k{i}"))
        .find(|k| keynode(&mut con, k) == "node1")
        .unwrap();
    let pid = child_with_port(c.up.pid(), c.first).expect("node1's process under up");
    kill_9(pid);
    // up starts it again as a replica of the promoted one, which then has
    // a replica to acknowledge its writes.
    let r = wait_ring(&mut con, 20, "the old primary is back as a replica", |r| {
        r.contains(&format!("node1 {replica} ")) && is_synced_replica(r, &old)
    });
    assert!(r.contains(&format!("{old} {old} replica_of=node1")), "{r}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match redis::cmd("SET")
            .arg(&key)
            .arg("after")
            .query::<()>(&mut con)
        {
            Ok(()) => break,
            Err(e) => assert!(
                std::time::Instant::now() < deadline,
                "writes acknowledged again: {e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let v: Option<String> = redis::cmd("GET")
        .arg(&key)
        .query(&mut c.direct(c.first))
        .unwrap();
    assert_eq!(
        v.as_deref(),
        Some("after"),
        "the restarted node has the write"
    );
    let restarted = child_with_port(c.up.pid(), c.first).expect("a node process again");
    assert_ne!(restarted, pid);
}

#[test]
fn up_restarts_a_killed_primary_as_a_replica_when_the_proxy_requires_a_password() {
    // up's watcher reads CLUSTER RING through the proxy's own port: with
    // users configured it must log in, or it would wait out its deadline
    // and bring the node back as an empty primary.
    let extra = "[[users]]\nname = \"ops\"\npassword = \"s3cret-ops\"\ncommands = \"admin\"\n";
    let c = up_with_replicas(1, extra);
    let (old, replica) = (addr(c.first), addr(c.first + NODES));
    let mut con = connect(c.up.port);
    let _: () = redis::cmd("AUTH")
        .arg("ops")
        .arg("s3cret-ops")
        .query(&mut con)
        .unwrap();
    wait_ring(&mut con, 15, "node1's replica follows it", |r| {
        is_synced_replica(r, &replica)
    });
    let pid = child_with_port(c.up.pid(), c.first).expect("node1's process under up");
    kill_9(pid);
    let r = wait_ring(&mut con, 20, "the old primary is back as a replica", |r| {
        r.contains(&format!("node1 {replica} ")) && is_synced_replica(r, &old)
    });
    assert!(r.contains(&format!("{old} {old} replica_of=node1")), "{r}");
    // Started as a replica at once, not as an empty primary after the
    // watcher's deadline (which the proxy would then demote).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let log = loop {
        let log = c.up.stderr_tail(200);
        if log.contains("node started again") || std::time::Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!log.contains("refused CLUSTER RING"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("node started again") && l.contains("replica_of=Some")),
        "{log}"
    );
    let users: Vec<String> = redis::cmd("ACL").arg("USERS").query(&mut con).unwrap();
    assert!(users.iter().any(|u| u == "shardis-up-watch"), "{users:?}");
}
