//! The admin HTTP listener over real TCP: `/metrics` (checked by promtool and
//! against traffic), the REST cache API (cross-checked with RESP), `/cluster`,
//! and the status page rendered by headless Chromium.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::http::{get, request, sample};
use common::*;
use redis::Commands;

/// A cluster whose proxy serves the admin API on an ephemeral port.
fn cluster(nodes: usize, extra: &str) -> (Cluster, String) {
    let nodes: Vec<Proc> = (0..nodes).map(|_| start_node(free_port())).collect();
    let c = Cluster::over(
        nodes,
        &format!("{extra}\n[admin]\nlisten = \"127.0.0.1:0\"\n"),
    );
    let addr = admin_addr(&mut c.client());
    (c, addr)
}

fn scrape(addr: &str) -> String {
    let r = get(addr, "/metrics");
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    r.text()
}

#[test]
fn metrics_pass_promtool_and_count_the_traffic() {
    let (c, admin) = cluster(3, "");
    let mut con = c.client();
    let _: () = con.set("k", "v").unwrap();
    let before = scrape(&admin);
    let gets = |t: &str| sample(t, "shardis_command_calls_total{command=\"get\"}");
    let node_requests = |t: &str| -> f64 {
        (1..=3)
            .map(|i| {
                sample(
                    t,
                    &format!("shardis_node_requests_total{{node=\"node{i}\"}}"),
                )
            })
            .sum()
    };
    let gets_before = if before.contains("shardis_command_calls_total{command=\"get\"}") {
        gets(&before)
    } else {
        0.0
    };
    for _ in 0..100 {
        let v: String = con.get("k").unwrap();
        assert_eq!(v, "v");
    }
    // One MGET over keys on all three nodes engages three nodes.
    let keys: Vec<String> = (0..30).map(|i| format!("spread:{i}")).collect();
    let _: Vec<Option<String>> = con.mget(&keys).unwrap();
    let after = scrape(&admin);
    assert!(
        gets(&after) - gets_before >= 100.0,
        "get counter grew by {}",
        gets(&after) - gets_before
    );
    assert!(node_requests(&after) - node_requests(&before) >= 100.0);
    assert_eq!(
        sample(
            &after,
            "shardis_command_duration_seconds_count{command=\"get\"}"
        ),
        gets(&after)
    );
    assert_eq!(
        sample(
            &after,
            "shardis_command_nodes_engaged_count{command=\"mget\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            &after,
            "shardis_command_nodes_engaged_sum{command=\"mget\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(
            &after,
            "shardis_command_nodes_engaged_bucket{command=\"get\",le=\"1\"}"
        ),
        gets(&after)
    );
    assert_eq!(sample(&after, "shardis_topology_epoch"), 1.0);
    assert_eq!(sample(&after, "shardis_node_up{node=\"node1\"}"), 1.0);
    assert!(sample(&after, "shardis_clients_connected") >= 1.0);
    assert!(sample(&after, "shardis_client_received_bytes_total") > 0.0);
    assert_eq!(sample(&after, "shardis_migration_phase{phase=\"ok\"}"), 1.0);
    let keys_total: f64 = (1..=3)
        .map(|i| sample(&after, &format!("shardis_node_keys{{node=\"node{i}\"}}")))
        .sum();
    assert_eq!(keys_total, 1.0);

    if !have_tool("promtool") {
        return;
    }
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_dying()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(after.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rest_cache_api_shares_the_ring_with_resp() {
    let (c, admin) = cluster(3, "max_bulk_len = 4096\n");
    let mut con = c.client();
    // Every byte value, and a key that needs escaping.
    let value: Vec<u8> = (0..=255u8).collect();
    let r = request(&admin, "PUT", "/cache/bin%20key%00x", &value);
    assert_eq!((r.status, r.text().as_str()), (200, "OK\n"));
    let via_resp: Vec<u8> = con.get(b"bin key\0x").unwrap();
    assert_eq!(via_resp, value);
    let r = get(&admin, "/cache/bin%20key%00x");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, value);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));

    // Written over RESP, read over HTTP: the same owner node answers.
    let _: () = con.set("user:1", "alice").unwrap();
    assert_eq!(get(&admin, "/cache/user:1").body, b"alice");
    assert_eq!(get(&admin, "/cache/missing").status, 404);

    let r = request(&admin, "PUT", "/cache/ttl?ttl=100", b"t");
    assert_eq!(r.status, 200);
    let ttl: i64 = con.ttl("ttl").unwrap();
    assert!((1..=100).contains(&ttl), "ttl {ttl}");
    for bad in ["abc", "0", "-5", "1.5"] {
        let r = request(&admin, "PUT", &format!("/cache/k?ttl={bad}"), b"v");
        assert_eq!(r.status, 400, "ttl={bad}: {}", r.text());
    }
    let r = request(&admin, "PUT", "/cache/big", &vec![b'x'; 4097]);
    assert_eq!(r.status, 413, "{}", r.text());
    let r = request(&admin, "PUT", "/cache/huge", &vec![b'x'; 64 * 1024]);
    assert_eq!(r.status, 413);
    assert!(!con.exists::<_, bool>("big").unwrap());
    assert_eq!(
        request(&admin, "PUT", "/cache/fits", &vec![b'x'; 4096]).status,
        200
    );

    assert_eq!(request(&admin, "DELETE", "/cache/user:1", b"").status, 204);
    assert_eq!(request(&admin, "DELETE", "/cache/user:1", b"").status, 404);
    assert!(!con.exists::<_, bool>("user:1").unwrap());
    assert_eq!(get(&admin, "/cache/").status, 400);
    // The owner is down: 502 with the node's error, as RESP gets -ERR.
    let owner = keynode(&mut con, "down:key");
    let idx: usize = owner.trim_start_matches("node").parse::<usize>().unwrap() - 1;
    let mut c = c;
    c.nodes[idx].kill();
    let r = get(&admin, "/cache/down:key");
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(r.text().contains("unavailable"), "{}", r.text());
}

#[test]
fn cluster_json_describes_the_ring() {
    let (c, admin) = cluster(3, "");
    let mut con = c.client();
    for i in 0..300 {
        let _: () = con.set(format!("k{i}"), i).unwrap();
    }
    let r = get(&admin, "/cluster");
    assert_eq!(r.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["epoch"], 1);
    let nodes = v["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["node1", "node2", "node3"]);
    let share: f64 = nodes.iter().map(|n| n["share"].as_f64().unwrap()).sum();
    assert!((share - 1.0).abs() < 1e-9);
    let keys: i64 = nodes.iter().map(|n| n["keys"].as_i64().unwrap()).sum();
    assert_eq!(keys, 300);
    assert_eq!(nodes[0]["points"], 160);
    assert_eq!(nodes[0]["state"], "up");
    assert_eq!(v["ring"]["at"].as_array().unwrap().len(), 480);
    assert_eq!(v["change"]["busy"], false);
    let stats: serde_json::Value = serde_json::from_slice(&get(&admin, "/stats").body).unwrap();
    assert!(stats["commands_total"].as_u64().unwrap() >= 300);
}

#[test]
fn admin_listener_is_off_unless_configured_for_shardis_proxy() {
    let c = Cluster::builtin(1);
    let info: String = redis::cmd("CLUSTER")
        .arg("RINGINFO")
        .query(&mut c.client())
        .unwrap();
    assert!(info.contains("admin_listen:-\r\n"), "{info}");
}

/// Runs headless Chromium on `url` (its stdout into a file of `dir`: a pipe
/// could fill and stall it) and returns what it printed.
fn chromium(dir: &tempdir::Dir, url: &str, extra: &[&str]) -> Vec<u8> {
    let dump = dir.path().join("dom.html");
    let mut args = vec![
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1400,1000",
        "--virtual-time-budget=3000",
    ];
    args.extend_from_slice(extra);
    args.push(url);
    let mut child = Command::new("chromium")
        .args(&args)
        .stdout(std::fs::File::create(&dump).unwrap())
        .stderr(Stdio::null())
        .spawn_dying()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::read(&dump).unwrap()
}

#[test]
fn status_page_renders_the_nodes_in_headless_chromium() {
    if !have_tool("chromium") {
        return;
    }
    let (c, admin) = cluster(3, "");
    let mut con = c.client();
    for i in 0..200 {
        let _: () = con.set(format!("k{i}"), i).unwrap();
    }
    let page = get(&admin, "/");
    assert_eq!(page.status, 200);
    let html = page.text();
    // Self-contained: nothing is fetched from elsewhere.
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("src="));
    assert!(
        !html.contains("node1"),
        "node names come from the script, not the file"
    );

    let dir = tempdir::Dir::new();
    let shot = dir.path().join("status.png");
    let url = format!("http://{admin}/");
    let chromium = |extra: &[&str]| chromium(&dir, &url, extra);
    let screenshot_arg = format!("--screenshot={}", shot.display());
    chromium(&[&screenshot_arg]);
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    let dom = String::from_utf8_lossy(&chromium(&["--dump-dom"])).into_owned();
    for name in ["node1", "node2", "node3"] {
        assert!(
            dom.contains(&format!("{name}</td>")) || dom.contains(&format!(">{name}<")),
            "{name} not rendered:\n{dom}"
        );
    }
    assert!(dom.contains("<path d=\"M"), "the ring is drawn");
}

/// GETs of `key` among a few others through `port` until `stop` is set.
fn hammer(port: u16, key: &'static str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut con = connect(port);
        let mut round = 0;
        while !stop.load(Ordering::Relaxed) {
            let mut p = redis::pipe();
            for i in 0..200 {
                p.get(key);
                if i % 10 == 0 {
                    p.get(format!("cold:{round}:{i}"));
                }
            }
            // The cluster is gone once the test ends (or failed).
            if p.query::<Vec<Option<String>>>(&mut con).is_err() {
                return;
            }
            round += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

#[test]
fn status_page_badge_warns_of_a_hot_shard_and_names_the_hot_key() {
    let (c, admin) = cluster(4, "");
    let owner = keynode(&mut c.client(), "hot:key");
    let stop = Arc::new(AtomicBool::new(false));
    let load = hammer(c.proxy.port, "hot:key", stop.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    let stats = loop {
        let stats: serde_json::Value = serde_json::from_slice(&get(&admin, "/stats").body).unwrap();
        let hot: Vec<&str> = stats["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["hot"] == true)
            .map(|n| n["name"].as_str().unwrap())
            .collect();
        if !hot.is_empty() {
            assert_eq!(hot, [owner.as_str()], "{stats}");
            break stats;
        }
        assert!(
            Instant::now() < deadline,
            "the tripwire never fired: {stats}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // /stats names each hot key's owner, which the page matches to the hot node.
    let top = &stats["hot_keys"][0];
    assert_eq!(top["key"], "hot:key", "{stats}");
    assert_eq!(top["node"], owner.as_str(), "{stats}");

    if have_tool("chromium") {
        let dir = tempdir::Dir::new();
        let dom = chromium(&dir, &format!("http://{admin}/"), &["--dump-dom"]);
        let dom = String::from_utf8_lossy(&dom);
        assert!(
            dom.contains(r#"<div class="badge busy" id="state">hot shard</div>"#),
            "the badge warns:\n{dom}"
        );
        assert!(!dom.contains(">healthy<"), "{dom}");
        assert!(
            dom.contains(r#"<code id="hot-culprit">hot:key</code>"#),
            "the alarm names the key:\n{dom}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
}
