//! The proxy when a node fails: a dead node fails only its own keys, fast,
//! and is used again once it is back; a node that never answers times out
//! its keys only.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redis::Commands;

#[test]
fn a_dead_node_fails_only_its_keys_promptly_and_recovers_when_back() {
    let mut c = Cluster::builtin(4);
    let mut con = c.client();
    for i in 0..100 {
        let _: () = con.set(format!("f:{i}"), i).unwrap();
    }
    let victim_port = c.nodes[1].port;
    c.nodes[1].kill();
    let (mut failed, mut served) = (0, 0);
    for i in 0..100 {
        let key = format!("f:{i}");
        let owner = keynode(&mut con, &key);
        let t = Instant::now();
        let r: redis::RedisResult<Option<i64>> = con.get(&key);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "a down node must fail fast"
        );
        if owner == "node2" {
            let e = r.unwrap_err().to_string();
            assert!(e.contains("node2") && e.contains("unavailable"), "{e}");
            failed += 1;
        } else {
            assert_eq!(r.unwrap(), Some(i));
            served += 1;
        }
    }
    assert!(failed > 0 && served > 0);
    // Back on the same port: the proxy reconnects by itself.
    c.nodes[1] = start_node(victim_port);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r: redis::RedisResult<()> = con.set("f:probe{f:1}", 1);
        let all_ok = (0..100).all(|i| con.set::<_, _, ()>(format!("f:{i}"), i).is_ok());
        if r.is_ok() && all_ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "proxy did not recover after the node returned"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A node that accepts connections and reads requests but never answers.
fn silent_node() -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = common::bind_free();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        // Bounded: the test sets `stop`, and 60 s is the most it lives anyway.
        let end = Instant::now() + Duration::from_secs(60);
        while !stopped.load(Ordering::Relaxed) && Instant::now() < end {
            if let Ok((s, _)) = listener.accept() {
                s.set_nonblocking(true).unwrap();
                held.push(s);
            }
            let mut buf = [0u8; 4096];
            for s in &mut held {
                let _ = s.read(&mut buf);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    (port, stop)
}

#[test]
fn a_node_that_never_answers_times_out_its_keys_only() {
    let (silent_port, stop) = silent_node();
    let good = start_node(free_port());
    let dir = tempdir::Dir::new();
    let port = free_port();
    let cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 500\nrequest_timeout_ms = 400\n\
         [[nodes]]\naddr = \"127.0.0.1:{silent_port}\"\nname = \"silent\"\n\
         [[nodes]]\naddr = \"{}\"\nname = \"good\"\n",
        good.addr()
    );
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    let _proxy = start_proxy_with(&path, port);
    let mut admin = connect(port);
    let owner = keynode;
    let silent_key = (0..1000)
        .map(|i| format!("t:{i}"))
        .find(|k| owner(&mut admin, k) == "silent")
        .unwrap();
    let good_key = (0..1000)
        .map(|i| format!("t:{i}"))
        .find(|k| owner(&mut admin, k) == "good")
        .unwrap();

    // One client waits on the silent node; another keeps being served meanwhile.
    let waiter = std::thread::spawn(move || {
        let mut con = connect(port);
        let t = Instant::now();
        let r: redis::RedisResult<Option<String>> = con.get(&silent_key);
        (r, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(50));
    let mut con = connect(port);
    let t = Instant::now();
    let _: () = con.set(&good_key, "v").unwrap();
    let v: String = con.get(&good_key).unwrap();
    assert_eq!(v, "v");
    assert!(
        t.elapsed() < Duration::from_millis(340),
        "a hung node delayed another node's keys"
    );
    let (r, took) = waiter.join().unwrap();
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("silent") && e.contains("no reply within 400 ms"),
        "{e}"
    );
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "timed out after {took:?}"
    );
    // After the timeout the good node is still untouched.
    let v: String = con.get(&good_key).unwrap();
    assert_eq!(v, "v");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn a_node_that_keeps_answering_a_long_pipeline_is_not_timed_out() {
    // 30 scripts of 40 ms each, pipelined on one key: 1.2 s of work behind a
    // 400 ms request timeout. Each carries 256 KB, so the node reads and
    // answers them a few at a time: it answers all the while, and none fails
    // although the last waits three times the timeout for its turn.
    let node = start_node(free_port());
    let dir = tempdir::Dir::new();
    let port = free_port();
    let cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\nrequest_timeout_ms = 400\n\
         [[nodes]]\naddr = \"{}\"\nname = \"busy\"\n",
        node.addr()
    );
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    let _proxy = start_proxy_with(&path, port);
    let spin = "local t = redis.call('TIME') \
                local start = t[1] * 1000000 + t[2] \
                repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= 40000 \
                return redis.call('INCR', KEYS[1])";
    let mut con = connect(port);
    let ballast = vec![b'x'; 256 * 1024];
    let mut pipe = redis::pipe();
    for _ in 0..30 {
        pipe.cmd("EVAL").arg(spin).arg(1).arg("spin").arg(&ballast);
    }
    let t = Instant::now();
    let got: Vec<i64> = pipe.query(&mut con).unwrap();
    assert_eq!(got, (1..=30).collect::<Vec<i64>>());
    assert!(
        t.elapsed() >= Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
}
