//! SIGTERM drains: the proxy stops accepting, answers every reply it owes
//! (within `drain_timeout_ms`), then exits 0; under `shardis up` the proxy
//! drains first and the nodes stop after.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const GET: &[u8] = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

/// Waits (bounded) for the process to exit; its exit code and when.
fn wait_exit(p: &mut Proc, within: Duration) -> (i32, Duration) {
    let t = Instant::now();
    loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            return (status.code().unwrap_or(-1), t.elapsed());
        }
        assert!(t.elapsed() < within, "still running after {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True once nothing accepts connections on `port` (bounded wait).
fn refuses_connections(port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn sigterm_answers_every_owed_reply_refuses_new_clients_and_exits_0() {
    // Each GET takes the node 300 ms: five pipelined take 1.5 s.
    let (node_port, stop) = fake_node(b"$1\r\nv\r\n", Duration::from_millis(300));
    let dir = tempdir::Dir::new();
    let nodes = [format!("127.0.0.1:{node_port}")];
    let (path, port) = write_proxy_config(&dir, &nodes, "drain_timeout_ms = 5000");
    let log = dir.path().join("proxy.log");
    let mut proxy = start_proxy_env(&path, port, &[], Some(std::fs::File::create(&log).unwrap()));
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    client.write_all(&GET.repeat(5)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    signal(proxy.pid(), "TERM");
    assert!(refuses_connections(port), "accepting during the drain");
    let got = read_n(&mut client, 5 * 7).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        "$1\r\nv\r\n".repeat(5),
        "every owed reply arrives"
    );
    // Then the client sees the close, and the proxy exits 0.
    assert_eq!(read_to_close(&mut client), b"");
    let (code, _) = wait_exit(&mut proxy, Duration::from_secs(5 + 5));
    assert_eq!(code, 0);
    eprintln!("drained and exited {:?} after SIGTERM", t.elapsed());
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("drained"), "{logged}");
    assert!(!logged.contains("panicked"), "{logged}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn a_drain_that_cannot_finish_ends_at_its_timeout() {
    // The node never answers in time: the drain gives up at 1 s, exit 0.
    let (node_port, stop) = fake_node(b"$1\r\nv\r\n", Duration::from_secs(30));
    let dir = tempdir::Dir::new();
    let nodes = [format!("127.0.0.1:{node_port}")];
    let (path, port) = write_proxy_config(&dir, &nodes, "drain_timeout_ms = 1000");
    let mut proxy = start_proxy_with(&path, port);
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    client.write_all(GET).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    signal(proxy.pid(), "TERM");
    let (code, took) = wait_exit(&mut proxy, Duration::from_secs(1 + 5));
    assert_eq!(code, 0);
    assert!(took >= Duration::from_millis(900), "exited after {took:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The pid of the `shardis node` listening on `port` (a child of `up`).
fn node_pid(port: u16) -> u32 {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        let is_node = args.get(1) == Some(&&b"node"[..]);
        let on_port = args
            .windows(2)
            .any(|w| w[0] == b"--port" && w[1] == port.to_string().as_bytes());
        if is_node && on_port && args[0].ends_with(BIN.as_bytes()) {
            return pid;
        }
    }
    panic!("no node process on port {port}");
}

#[test]
fn sigterm_to_up_drains_the_proxy_before_the_nodes_stop() {
    let first = free_block(2);
    let port = free_port();
    let dir = tempdir::Dir::new();
    let mut up = Proc::spawn(
        Up::command(port, first, 2, dir.path()).stdout(Stdio::null()),
        port,
        "shardis up",
    );
    wait_ping(port);
    let mut con = connect(port);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let owner = keynode(&mut con, "k");
    let index: u16 = owner.trim_start_matches("node").parse().unwrap();
    let node = node_pid(first + index - 1);
    // The owner stops answering: the GET stays in flight.
    signal(node, "STOP");
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    client.write_all(GET).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    signal(up.pid(), "TERM");
    assert!(refuses_connections(port), "accepting during the drain");
    std::thread::sleep(Duration::from_millis(300));
    // The node is still there (the proxy has not finished draining).
    signal(node, "CONT");
    assert_eq!(read_n(&mut client, 7).unwrap(), b"$1\r\nv\r\n");
    let (code, _) = wait_exit(&mut up, Duration::from_secs(10 + 5));
    assert_eq!(code, 0);
    for p in first..first + 2 {
        assert!(refuses_connections(p), "node on {p} outlived `up`");
    }
}
