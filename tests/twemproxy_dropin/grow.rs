//! Growing a pool started from `nutcracker.yml`: CLUSTER ADDNODE moves the
//! keys online to where nutcracker with the grown server list places them;
//! the state file records it, the YAML stays the operator's, and a restart
//! with both resumes the grown ring.

use super::common::free_port;
use super::site::{self, show, At, Client, Site};
use std::time::{Duration, Instant};

fn yaml(port: u16, servers: &[u16]) -> String {
    yaml_with(port, servers, "")
}

fn yaml_with(port: u16, servers: &[u16], extra: &str) -> String {
    let mut y = format!(
        "shop:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n  hash_tag: \"{{}}\"\n  distribution: ketama\n  redis: true\n{extra}  servers:\n"
    );
    for s in servers {
        y += &format!("   - 127.0.0.1:{s}:1\n");
    }
    y
}

fn wait_ok(at: &At) -> String {
    wait_ok_as(at, None)
}

fn wait_ok_as(at: &At, password: Option<&[u8]>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut c = Client::connect(at);
        if let Some(pw) = password {
            c.call(&[b"AUTH", pw]);
        }
        let info = show(&c.call(&[b"CLUSTER", b"RINGINFO"]));
        if info.contains("state:ok\r\n") {
            return info;
        }
        assert!(
            Instant::now() < deadline,
            "the change did not finish: {info}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every key reads back its own value through `at`.
fn all_readable(at: &At, keys: &[Vec<u8>]) -> usize {
    all_readable_as(at, None, keys)
}

fn all_readable_as(at: &At, password: Option<&[u8]>, keys: &[Vec<u8>]) -> usize {
    let mut c = Client::connect(at);
    if let Some(pw) = password {
        assert_eq!(show(&c.call(&[b"AUTH", pw])), "+OK\r\n");
    }
    keys.iter()
        .filter(|k| {
            let want = format!("${}\r\n{}\r\n", k.len(), show(k));
            show(&c.call(&[b"GET", k])) == want
        })
        .count()
}

#[test]
fn a_yaml_pool_grows_online_and_restarts_grown_with_the_file_untouched() {
    if !site::tools() {
        return;
    }
    let redis = site::redis_servers(3, &[]);
    let ports: Vec<u16> = redis.iter().map(|r| r.port).collect();
    let port = free_port();
    let text = yaml(port, &ports[..2]);
    let site = Site::new(&text);
    let state = site.path("state");
    std::fs::create_dir(&state).unwrap();
    let state_arg = state.to_str().unwrap();
    let at = At::Tcp(port);
    let keys = site::keys(1_000, "grow");
    let mut shardis = site.shardis(port, &["--state-dir", state_arg]);
    site::write_keys(&at, &keys);
    let added = format!("127.0.0.1:{}", ports[2]);
    let mut c = Client::connect(&at);
    assert_eq!(
        show(&c.call(&[b"CLUSTER", b"ADDNODE", added.as_bytes()])),
        "+OK\r\n"
    );
    assert_eq!(
        all_readable(&at, &keys),
        keys.len(),
        "readable during the change"
    );
    let info = wait_ok(&at);
    assert!(info.contains("epoch:2"), "{info}");
    assert_eq!(
        all_readable(&at, &keys),
        keys.len(),
        "readable after the change"
    );

    // Each key is where nutcracker over the three servers looks for it.
    let grown = yaml(free_port(), &ports);
    let grown_site = Site::new(&grown);
    let grown_port = grown
        .split("127.0.0.1:")
        .nth(1)
        .unwrap()
        .split('\n')
        .next()
        .unwrap();
    let grown_port: u16 = grown_port.parse().unwrap();
    let nc = grown_site.nutcracker(grown_port, free_port());
    let found = all_readable(&At::Tcp(grown_port), &keys);
    drop(nc);
    let on_new = site::placement(&redis[2..], 0).len();
    println!("{on_new} of {} keys moved to the added server; nutcracker over three servers finds {found}", keys.len());
    assert_eq!(
        found,
        keys.len(),
        "nutcracker with the grown list finds every key"
    );

    // Restart: the same YAML and state directory, the grown ring.
    shardis.kill();
    site::wait_gone(port);
    assert_eq!(
        site::read(&site.yml),
        text.as_bytes(),
        "the YAML is untouched"
    );
    assert!(state.join("shop.state").exists());
    let shardis = site.shardis(port, &["--state-dir", state_arg]);
    let info = wait_ok(&at);
    assert!(
        info.contains("epoch:2") && info.contains("nodes:3"),
        "{info}"
    );
    assert_eq!(
        all_readable(&at, &keys),
        keys.len(),
        "readable after the restart"
    );
    shardis.assert_no_panic();
}

#[test]
fn a_pool_with_redis_auth_and_redis_db_grows_on_that_database() {
    if !site::tools() {
        return;
    }
    let redis = site::redis_servers(3, &["--requirepass", "pw"]);
    let ports: Vec<u16> = redis.iter().map(|r| r.port).collect();
    let port = free_port();
    let extra = "  redis_auth: pw\n  redis_db: 2\n";
    let site = Site::new(&yaml_with(port, &ports[..2], extra));
    let at = At::Tcp(port);
    let pw = Some(&b"pw"[..]);
    let keys = site::keys(300, "db2");
    let mut cmd = std::process::Command::new(super::common::BIN);
    cmd.args(["proxy", "--config"])
        .arg(&site.yml)
        .stdout(std::process::Stdio::null());
    // PING gets NOAUTH here: any answer means it is up.
    let shardis = super::common::Proc::spawn(&mut cmd, port, "shardis proxy");
    site::wait_answering(port);
    let mut c = Client::connect(&at);
    assert_eq!(show(&c.call(&[b"AUTH", b"pw"])), "+OK\r\n");
    for k in &keys {
        assert_eq!(show(&c.call(&[b"SET", k, k])), "+OK\r\n");
    }
    let added = format!("127.0.0.1:{}", ports[2]);
    assert_eq!(
        show(&c.call(&[b"CLUSTER", b"ADDNODE", added.as_bytes()])),
        "+OK\r\n"
    );
    let info = wait_ok_as(&at, pw);
    assert!(info.contains("epoch:2"), "{info}");
    assert_eq!(all_readable_as(&at, pw, &keys), keys.len());
    let mut on_new = Client::connect(&At::Tcp(ports[2]));
    on_new.call(&[b"AUTH", b"pw"]);
    on_new.call(&[b"SELECT", b"2"]);
    let moved = show(&on_new.call(&[b"DBSIZE"]));
    assert!(
        moved.starts_with(':') && moved != ":0\r\n",
        "keys moved to db 2 of the new server: {moved}"
    );
    println!("moved to the added server's db 2: {}", moved.trim_end());
    shardis.assert_no_panic();
}
