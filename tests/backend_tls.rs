//! TLS towards the nodes, with real redis-servers listening on their TLS
//! port only (`--port 0 --tls-port N`), certificates made by rcgen at test
//! time:
//!
//! * through a proxy with `[backend_tls]`, GET/SET, a blocking pop, pub/sub
//!   and MULTI work, and ADDNODE of another TLS node moves its share (the
//!   nodes' MIGRATE speaks TLS with `tls-cluster yes`);
//! * a node whose certificate another CA signed is refused with a clear
//!   error on its keys only, the other node's keys are served;
//! * a node with `tls-auth-clients yes` takes the proxy only with its
//!   client certificate (mutual TLS);
//! * SIGHUP re-reads the CA and the client certificate towards the nodes
//!   (a rotation), and a broken file keeps the previous ones.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A redis-server on a TLS port only, its certificate signed by `ca`
/// (and trusting `ca` for clients and for its own MIGRATE).
fn tls_redis(dir: &Path, ca: &Ca, file: &str, auth_clients: bool) -> Proc {
    let port = free_port();
    let (cert, key) = ca.issue(dir, file, "localhost", false);
    let p = Proc::spawn(
        Command::new("redis-server")
            .args(["--port", "0", "--bind", "127.0.0.1", "--tls-port"])
            .arg(port.to_string())
            .arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key)
            .arg("--tls-ca-cert-file")
            .arg(&ca.pem)
            .args([
                "--tls-auth-clients",
                if auth_clients { "yes" } else { "no" },
            ])
            .args(["--tls-cluster", "yes", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null()),
        port,
        "redis-server (TLS)",
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_listening(port) {
        assert!(Instant::now() < deadline, "{}", p.stderr_tail(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    p
}

/// Whether redis-server and redis-cli are here and speak TLS.
fn have_tls_redis() -> bool {
    if !have_tool("redis-server") {
        skip(
            "redis-server is not installed",
            "apt-get install redis-server",
        );
        return false;
    }
    tls_cli()
}

/// `DBSIZE` on a TLS node, asked directly with redis-cli (mutual TLS when
/// `client` is given).
fn tls_dbsize(node: &Proc, ca: &Ca, client: Option<(&Path, &Path)>) -> i64 {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", "127.0.0.1", "-p", &node.port.to_string(), "--tls"])
        .arg("--cacert")
        .arg(&ca.pem);
    if let Some((c, k)) = client {
        cmd.arg("--cert").arg(c).arg("--key").arg(k);
    }
    let out = output(cmd.arg("DBSIZE"));
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("DBSIZE gave {text:?} {:?}", out.stderr))
}

fn wait_ok(c: &mut Raw) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.call(&["CLUSTER", "RINGINFO"]).contains("state:ok") {
        assert!(Instant::now() < deadline, "the change did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn every_kind_of_upstream_connection_reaches_tls_nodes_and_a_tls_node_can_be_added() {
    if !have_tls_redis() {
        return;
    }
    let dir = tempdir::Dir::new();
    let ca = Ca::new(dir.path(), "nodes-ca");
    let (a, b, added) = (
        tls_redis(dir.path(), &ca, "a", false),
        tls_redis(dir.path(), &ca, "b", false),
        tls_redis(dir.path(), &ca, "c", false),
    );
    // The certificates also name 127.0.0.1, the host of each address: the
    // server name by default.
    let extra = format!("[backend_tls]\nca = \"{}\"\n", ca.pem.display());
    let (proxy, _pdir) = start_proxy(&[a.addr(), b.addr()], &extra);
    let mut c = Raw::connect(proxy.port);
    for i in 0..200 {
        c.check(&["SET", &format!("k{i}"), &format!("v{i}")], "+OK\r\n");
    }
    assert!(tls_dbsize(&a, &ca, None) > 20 && tls_dbsize(&b, &ca, None) > 20);
    let mut r3 = Raw::connect(proxy.port);
    assert!(r3.call(&["HELLO", "3"]).starts_with('%'));
    r3.check(&["GET", "k1"], "$2\r\nv1\r\n");

    // A blocking pop on a pinned connection, woken by a push from another client.
    let mut blocked = Raw::connect(proxy.port);
    blocked.send(&[b"BLPOP", b"queue", b"5"]);
    std::thread::sleep(Duration::from_millis(200));
    c.check(&["RPUSH", "queue", "job"], ":1\r\n");
    assert_eq!(
        blocked.reply(),
        b"*2\r\n$5\r\nqueue\r\n$3\r\njob\r\n".to_vec()
    );

    c.check(&["MULTI"], "+OK\r\n");
    c.check(&["INCR", "{t}n"], "+QUEUED\r\n");
    c.check(&["INCR", "{t}n"], "+QUEUED\r\n");
    c.check(&["EXEC"], "*2\r\n:1\r\n:2\r\n");

    let mut sub = Raw::connect(proxy.port);
    sub.check(
        &["SUBSCRIBE", "ch"],
        "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    c.check(&["PUBLISH", "ch", "m"], ":1\r\n");
    assert_eq!(
        sub.reply(),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n".to_vec()
    );

    // ADDNODE checks the new node over TLS, the mover talks to both over
    // TLS, and the nodes' MIGRATE between them is TLS too (tls-cluster).
    c.check(&["CLUSTER", "ADDNODE", &added.addr()], "+OK\r\n");
    wait_ok(&mut c);
    let moved = tls_dbsize(&added, &ca, None);
    assert!(moved > 20, "{moved} keys moved");
    for i in 0..200 {
        let v = format!("v{i}");
        c.check(
            &["GET", &format!("k{i}")],
            &format!("${}\r\n{v}\r\n", v.len()),
        );
    }
    // REMOVENODE sees the TLS node alive and moves its keys off it.
    c.check(&["CLUSTER", "REMOVENODE", &added.addr()], "+OK\r\n");
    wait_ok(&mut c);
    assert_eq!(c.call(&["GET", "k7"]), "$2\r\nv7\r\n");
    proxy.assert_no_panic();
}

#[test]
fn a_node_whose_certificate_another_ca_signed_is_refused_and_only_its_keys_fail() {
    if !have_tls_redis() {
        return;
    }
    let dir = tempdir::Dir::new();
    let (ca, other) = (
        Ca::new(dir.path(), "trusted-ca"),
        Ca::new(dir.path(), "other-ca"),
    );
    let good = tls_redis(dir.path(), &ca, "good", false);
    let stranger = tls_redis(dir.path(), &other, "stranger", false);
    // The certificates name localhost, set as the server name.
    let extra = format!(
        "[backend_tls]\nca = \"{}\"\nserver_name = \"localhost\"\n",
        ca.pem.display()
    );
    let (proxy, _pdir) = start_proxy(&[good.addr(), stranger.addr()], &extra);
    let mut c = Raw::connect(proxy.port);
    let (mut served, mut refused) = (0, 0);
    for i in 0..40 {
        let key = format!("k{i}");
        let node = c.call(&["CLUSTER", "KEYNODE", &key]);
        let r = c.call(&["SET", &key, "v"]);
        if node.contains("node1") {
            assert_eq!(r, "+OK\r\n", "{key} on the trusted node");
            served += 1;
        } else {
            assert!(
                r.starts_with(&format!("-ERR node node2 ({})", stranger.addr()))
                    && r.contains("TLS handshake")
                    && r.contains("UnknownIssuer"),
                "{r}"
            );
            refused += 1;
        }
    }
    assert!(
        served > 0 && refused > 0,
        "{served} served, {refused} refused"
    );
    proxy.assert_no_panic();
}

#[test]
fn a_node_that_asks_for_client_certificates_takes_the_proxy_with_its_own() {
    if !have_tls_redis() {
        return;
    }
    let dir = tempdir::Dir::new();
    let ca = Ca::new(dir.path(), "mutual-ca");
    let node = tls_redis(dir.path(), &ca, "node", true);
    let (cert, key) = ca.issue(dir.path(), "proxy-client", "shardis-proxy", false);
    // Without a client certificate the node hangs up.
    let bare = format!(
        "[backend_tls]\nca = \"{}\"\nserver_name = \"localhost\"\n",
        ca.pem.display()
    );
    let (proxy, _d1) = start_proxy(&[node.addr()], &bare);
    let r = Raw::connect(proxy.port).call(&["SET", "k", "v"]);
    assert!(r.starts_with("-ERR node node1 ("), "{r}");
    drop(proxy);
    // With one (a [[nodes]] entry's own, overriding the default's none).
    let own = format!(
        "{bare}[[nodes]]\naddr = \"{}\"\nname = \"node1\"\ntls = true\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
        node.addr(),
        cert.display(),
        key.display()
    );
    let pdir = tempdir::Dir::new();
    let port = free_port();
    let path = pdir.path().join("proxy.toml");
    std::fs::write(
        &path,
        format!("[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 500\n{own}"),
    )
    .unwrap();
    let proxy = start_proxy_with(&path, port);
    let mut c = Raw::connect(proxy.port);
    c.check(&["SET", "k", "v"], "+OK\r\n");
    c.check(&["GET", "k"], "$1\r\nv\r\n");
    assert_eq!(tls_dbsize(&node, &ca, Some((&cert, &key))), 1);
    proxy.assert_no_panic();
}

/// `SET k v` through `c` until it answers `+OK` (within 10 s); the last
/// reply otherwise.
fn set_until_ok(c: &mut Raw) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.call(&["SET", "k", "v"]);
        if r == "+OK\r\n" {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(r);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn hangup(proxy: &Proc) {
    assert_eq!(unsafe { libc::kill(proxy.pid() as i32, libc::SIGHUP) }, 0);
}

#[test]
fn sighup_rereads_the_ca_and_the_client_certificate_towards_the_nodes() {
    if !have_tls_redis() {
        return;
    }
    let dir = tempdir::Dir::new();
    let (ca, other) = (
        Ca::new(dir.path(), "node-ca"),
        Ca::new(dir.path(), "old-ca"),
    );
    // The node asks for a client certificate its CA signed.
    let node = tls_redis(dir.path(), &ca, "node", true);
    let (good_cert, good_key) = ca.issue(dir.path(), "proxy-new", "shardis-proxy", false);
    let (old_cert, old_key) = other.issue(dir.path(), "proxy-old", "shardis-proxy", false);
    // The files the proxy reads: first the old CA's, as before a rotation.
    let (ca_file, cert_file, key_file) = (
        dir.path().join("trust.pem"),
        dir.path().join("client.pem"),
        dir.path().join("client.key"),
    );
    std::fs::copy(&other.pem, &ca_file).unwrap();
    std::fs::copy(&old_cert, &cert_file).unwrap();
    std::fs::copy(&old_key, &key_file).unwrap();
    let extra = format!(
        "[backend_tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\nserver_name = \"localhost\"\n",
        ca_file.display(),
        cert_file.display(),
        key_file.display()
    );
    let log = dir.path().join("proxy.log");
    let (path, port) = write_proxy_config(&dir, &[node.addr()], &extra);
    let proxy = start_proxy_env(&path, port, &[], Some(std::fs::File::create(&log).unwrap()));
    let mut c = Raw::connect(proxy.port);
    let r = c.call(&["SET", "k", "v"]);
    assert!(
        r.contains("UnknownIssuer"),
        "the old CA does not sign the node: {r}"
    );

    // The CA file replaced in place: the node's certificate is trusted, but
    // the node still refuses the old client certificate.
    std::fs::copy(&ca.pem, &ca_file).unwrap();
    hangup(&proxy);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.call(&["SET", "k", "v"]);
        assert!(r.starts_with("-ERR node node1 ("), "{r}");
        if !r.contains("UnknownIssuer") {
            break;
        }
        assert!(Instant::now() < deadline, "the CA was not re-read: {r}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The client certificate and key replaced: served.
    std::fs::copy(&good_cert, &cert_file).unwrap();
    std::fs::copy(&good_key, &key_file).unwrap();
    hangup(&proxy);
    set_until_ok(&mut c).unwrap_or_else(|r| panic!("the client certificate was not re-read: {r}"));
    assert_eq!(tls_dbsize(&node, &ca, Some((&good_cert, &good_key))), 1);

    // A broken CA file: the previous config stays, and the log says so.
    std::fs::write(&ca_file, "not a certificate").unwrap();
    hangup(&proxy);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("the previous ones stay")
    {
        assert!(Instant::now() < deadline, "no log line for the broken file");
        std::thread::sleep(Duration::from_millis(50));
    }
    // New connections (a client of its own pins one) still get in.
    let mut fresh = Raw::connect(proxy.port);
    fresh.check(&["MULTI"], "+OK\r\n");
    fresh.check(&["SET", "k2", "v"], "+QUEUED\r\n");
    assert!(fresh.call(&["EXEC"]).starts_with("*1\r\n+OK"));
    c.check(&["GET", "k"], "$1\r\nv\r\n");
    proxy.assert_no_panic();
}
