//! `shardis demo`: the tour runs end to end on a small data set, loses no key
//! through a join and a leave, and leaves no process behind.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{DieWithTest, BIN};

/// Runs the command, killing it past `limit`; returns (success, stdout, stderr).
fn run_bounded(cmd: &mut Command, limit: Duration) -> (bool, String, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_dying()
        .expect("start shardis demo");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out_reader.join().unwrap(), err_reader.join().unwrap());
    assert!(
        status.is_some(),
        "demo did not finish within {limit:?}\n{out}\n{err}"
    );
    // The demo fails itself when a child panicked; its own panics show here.
    assert!(!err.contains("panicked at"), "a panic:\n{err}");
    (status.unwrap().success(), out, err)
}

/// Every `127.0.0.1:port` printed in the report.
fn ports_in(text: &str) -> Vec<u16> {
    text.split("127.0.0.1:")
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            digits.parse().ok()
        })
        .collect()
}

#[test]
fn demo_tours_join_and_leave_without_losing_keys() {
    let json = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shardis-demo-test-{}.json", std::process::id()));
    let (ok, out, err) = run_bounded(
        Command::new(BIN)
            .args(["demo", "--keys", "20000", "--nodes", "10", "--quick"])
            .args(["--json", json.to_str().unwrap(), "--max-secs", "100"]),
        Duration::from_secs(110),
    );
    assert!(ok, "demo failed\n{out}\n{err}");
    for want in [
        "keys per node",
        "imbalance: max/avg",
        "CLUSTER ADDNODE answered +OK",
        "node3 holds 0 keys now",
        "0 missing",
        "GET at 1000 rps",
        "SET max c8 P16",
        "stopped the proxy and 11 nodes",
        "10 built-in nodes on 127.0.0.1",
    ] {
        assert!(out.contains(want), "no {want:?} in the report:\n{out}");
    }
    assert!(
        !out.contains(" 1 missing") && !out.contains("wrong, 1"),
        "{out}"
    );
    // Free ports are no range: listed, not shown as "first .. last".
    let nodes = out
        .lines()
        .find(|l| l.contains("built-in nodes on"))
        .unwrap();
    assert!(!nodes.contains(" .. "), "{nodes}");

    let text = std::fs::read_to_string(&json).expect("--json file");
    let _ = std::fs::remove_file(&json);
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["keys"], 20000);
    assert_eq!(v["distribution"]["nodes"].as_array().unwrap().len(), 10);
    assert_eq!(v["distribution"]["total"], 20000);
    for change in ["join", "leave"] {
        let c = &v[change];
        assert_eq!(c["verify_after"]["missing"], 0, "{change}");
        assert_eq!(c["verify_after"]["found"], 20000, "{change}");
        assert_eq!(c["reads_during"]["missing"], 0, "{change}");
        let moved = c["moved_pct"].as_f64().unwrap();
        assert!((3.0..20.0).contains(&moved), "{change} moved {moved}%");
    }
    assert_eq!(v["leave"]["removed_node_keys_after"], 0);
    assert_eq!(v["latency"].as_array().unwrap().len(), 6);

    // Nothing the demo started still listens.
    std::thread::sleep(Duration::from_millis(300));
    for port in ports_in(&out) {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} still open after the demo"
        );
    }
}
