//! Reload without restart: a node written into the config file and a
//! SIGHUP add it with ADDNODE's guarantees (writers running, no
//! acknowledged write lost, no deleted key back); a broken file is refused
//! and the running config keeps serving; a changed limit and timeout apply
//! to new work at once; CONFIG RELOAD over RESP answers how it went.

mod common;

use std::time::{Duration, Instant};

use common::writers::{check, Known, Writers};
use common::*;

fn reload(port: u16) -> redis::RedisResult<String> {
    redis::cmd("CONFIG").arg("RELOAD").query(&mut connect(port))
}

fn hangup(proxy: &Proc) {
    // SAFETY: a signal to a child process this test started.
    assert_eq!(
        unsafe { libc::kill(proxy.pid() as libc::pid_t, libc::SIGHUP) },
        0
    );
}

fn is_settled_at(port: u16, epoch: u64) -> bool {
    let i = cluster_info(&mut connect(port));
    ring_field(&i, "epoch") == epoch.to_string() && ring_field(&i, "state") == "ok"
}

#[test]
fn a_node_written_into_the_file_and_a_sighup_add_it_losing_no_acknowledged_write() {
    let nodes: Vec<Proc> = (0..3).map(|_| start_node(free_port())).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let dir = tempdir::Dir::new();
    let (path, port) = write_proxy_config(&dir, &addrs[..2], "");
    // Catch-up, cutover and sweep each last 0.5 s longer: writes land in all.
    let proxy = start_proxy_env(
        &path,
        port,
        &[("SHARDIS_FAULT_PHASE_DELAY_MS", "500")],
        None,
    );
    let writers = Writers::start(&[port, port]);
    std::thread::sleep(Duration::from_millis(300));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        format!(
            "{text}[[nodes]]\naddr = \"{}\"\nname = \"node3\"\n",
            addrs[2]
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    hangup(&proxy);
    eventually(30, "epoch 2 with node3", || is_settled_at(port, 2));
    eprintln!("the reload's ADDNODE took {:?} under writes", t0.elapsed());
    std::thread::sleep(Duration::from_millis(300));
    let (known, acked, refused) = writers.finish();
    let (lost, resurrected) = check(port, &known);
    let unsure = known.values().filter(|k| **k == Known::Unsure).count();
    eprintln!(
        "{acked} acknowledged writes ({refused} refused, {unsure} unsure), {} keys checked: {lost} lost, {resurrected} resurrected",
        known.len()
    );
    assert_eq!((lost, resurrected), (0, 0), "lost or resurrected keys");
    assert!(acked > 500, "only {acked} acknowledged writes");
    assert!(owns_keys(port, "node3"), "node3 owns keys");
    proxy.assert_no_panic();
}

/// Whether some key of the first thousand is owned by `name`.
fn owns_keys(port: u16, name: &str) -> bool {
    let mut con = connect(port);
    (0..1000).any(|i| keynode(&mut con, &format!("k:{i}")) == name)
}

#[test]
fn a_broken_file_is_refused_and_the_running_config_keeps_serving() {
    let cluster = Cluster::builtin(2);
    let port = cluster.proxy.port;
    let path = cluster.dir.path().join("proxy.toml");
    let good = std::fs::read_to_string(&path).unwrap();
    let mut con = connect(port);
    let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut con).unwrap();

    std::fs::write(&path, "[proxy\nlisten = ").unwrap();
    let e = reload(port).unwrap_err().to_string();
    assert!(
        e.contains("CONFIG RELOAD refused, the running config stays"),
        "{e}"
    );
    assert!(e.contains("proxy.toml"), "names the file: {e}");

    std::fs::write(
        &path,
        good.replace("request_timeout_ms = 2000", "request_timeout_ms = 0"),
    )
    .unwrap();
    let e = reload(port).unwrap_err().to_string();
    assert!(
        e.contains("proxy.request_timeout_ms: must be greater than 0"),
        "{e}"
    );

    // A SIGHUP with the broken file changes nothing either.
    hangup(&cluster.proxy);
    std::thread::sleep(Duration::from_millis(300));
    let got: String = redis::cmd("GET")
        .arg("a")
        .query(&mut connect(port))
        .unwrap();
    assert_eq!(got, "1");
    assert!(is_settled_at(port, 1));

    // A node moved to another address is refused too, naming it.
    let moved = good.replacen(&cluster.nodes[0].addr(), "127.0.0.1:1", 1);
    std::fs::write(&path, moved).unwrap();
    let e = reload(port).unwrap_err().to_string();
    assert!(e.contains("node node1 is at"), "{e}");

    std::fs::write(&path, good).unwrap();
    assert_eq!(reload(port).unwrap(), "OK");
    cluster.proxy.assert_no_panic();
}

#[test]
fn a_changed_limit_and_timeout_apply_to_new_work_at_once() {
    let (silent, stop) = fake_node(b"+OK\r\n", Duration::from_secs(60));
    let good = start_node(free_port());
    let dir = tempdir::Dir::new();
    let port = free_port();
    let write = |timeout_ms: u64, max_clients: usize| {
        let cfg = format!(
            "[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 500\nrequest_timeout_ms = {timeout_ms}\nmax_clients = {max_clients}\n\
             [[nodes]]\naddr = \"127.0.0.1:{silent}\"\nname = \"silent\"\n\
             [[nodes]]\naddr = \"{}\"\nname = \"good\"\n",
            good.addr()
        );
        std::fs::write(dir.path().join("proxy.toml"), cfg).unwrap();
    };
    write(10_000, 100);
    let proxy = start_proxy_with(&dir.path().join("proxy.toml"), port);
    let mut admin = connect(port);
    let silent_key = (0..1000)
        .map(|i| format!("t:{i}"))
        .find(|k| keynode(&mut admin, k) == "silent")
        .unwrap();

    write(300, 2);
    let mut raw = Raw::connect(port);
    assert_eq!(raw.call(&["CONFIG", "RELOAD"]), "+OK\r\n");
    // The next request to the silent node fails by the new timeout.
    let t0 = Instant::now();
    let r = raw.call(&["GET", &silent_key]);
    let took = t0.elapsed();
    assert!(r.starts_with("-ERR") && r.contains("silent"), "{r}");
    assert!(
        took < Duration::from_secs(3),
        "timed out after {took:?}, the old 10 s"
    );
    eprintln!(
        "with request_timeout_ms reloaded to 300, the silent node's key failed after {took:?}"
    );
    // Two clients connected (admin, raw): a third is refused by the new limit.
    let third = raw_reply(port);
    assert_eq!(third, "-ERR max number of clients reached\r\n");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    proxy.assert_no_panic();
}

/// What a fresh connection is told before it says anything.
fn raw_reply(port: u16) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn config_reload_queues_several_node_changes_one_at_a_time() {
    let nodes: Vec<Proc> = (0..4).map(|_| start_node(free_port())).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let dir = tempdir::Dir::new();
    let (path, port) = write_proxy_config(&dir, &addrs[..3], "");
    let proxy = start_proxy_with(&path, port);
    mset_keys(&mut connect(port), "q:", 500);
    // node4 added, node2 weighted 2, node3 removed: three changes in a row.
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("name = \"node2\"\n", "name = \"node2\"\nweight = 2\n");
    let text = text.replace(
        &format!("[[nodes]]\naddr = \"{}\"\nname = \"node3\"\n", addrs[2]),
        "",
    );
    std::fs::write(
        &path,
        format!(
            "{text}[[nodes]]\naddr = \"{}\"\nname = \"node4\"\n",
            addrs[3]
        ),
    )
    .unwrap();
    assert_eq!(reload(port).unwrap(), "OK");
    assert!(
        is_settled_at(port, 4),
        "{}",
        cluster_info(&mut connect(port))
    );
    let ring = Raw::connect(port).call(&["CLUSTER", "RING"]);
    assert!(ring.contains("node4") && !ring.contains("node3"), "{ring}");
    let mut con = connect(port);
    for i in 0..500 {
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("q:{i}"))
            .query(&mut con)
            .unwrap();
        assert!(v.is_some(), "q:{i} lost");
    }
    // Read again: nothing left to change.
    assert_eq!(reload(port).unwrap(), "OK");
    assert!(is_settled_at(port, 4));
    proxy.assert_no_panic();
}
