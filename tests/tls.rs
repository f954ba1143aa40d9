//! TLS towards clients, with Debian's redis-cli (OpenSSL) and a rustls
//! client, certificates made by rcgen at test time in a temp dir:
//!
//! * redis-cli over TLS to the proxy reaches the nodes;
//! * a client trusting another CA is refused; so are an expired
//!   certificate and one for another name;
//! * with a client CA (mutual TLS) a client without a certificate is refused;
//! * `plaintext = false` closes the plaintext port;
//! * SIGHUP swaps the certificate while a client already connected stays.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use tokio_rustls::rustls;

/// A proxy over one built-in node with `[tls]` as given; returns it, its
/// TLS port and its plaintext port.
fn proxy_with_tls(dir: &tempdir::Dir, tls: &str, node: &Proc) -> (Proc, u16, u16) {
    let (port, tls_port) = (free_port(), free_port());
    let cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\n[tls]\nlisten = \"127.0.0.1:{tls_port}\"\n{tls}\n\
         [[nodes]]\naddr = \"{}\"\nname = \"node1\"\n",
        node.addr()
    );
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    let p = Proc::spawn(
        Command::new(BIN)
            .args(["proxy", "--config", path.to_str().unwrap()])
            .stdout(Stdio::null()),
        tls_port,
        "proxy",
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while !is_listening(tls_port) {
        assert!(Instant::now() < deadline, "{}", p.stderr_tail(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    p.assert_no_panic();
    (p, tls_port, port)
}

/// redis-cli over TLS with `args`: its output, or its error text.
fn cli(port: u16, ca: &Path, extra: &[&str], args: &[&str]) -> Result<String, String> {
    let out = output(
        Command::new("redis-cli")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "--tls",
                "--cacert",
            ])
            .arg(ca)
            .args(extra)
            .args(args),
    );
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    // redis-cli prints a failed handshake and exits 1, or prints it on stdout.
    if !out.status.success() || text.contains("SSL") || text.contains("Could not connect") {
        return Err(format!("{text} {err}"));
    }
    Ok(text)
}

/// A rustls client trusting `ca`, connected to `port` as `name`.
fn rustls_client(
    port: u16,
    ca: &Path,
    name: &str,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap();
    for c in rustls_pki_types::pem::PemObject::pem_slice_iter(&pem) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server = rustls_pki_types::ServerName::try_from(name.to_string()).unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), server).unwrap();
    let sock = TcpStream::connect(("127.0.0.1", port))?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut s = rustls::StreamOwned::new(conn, sock);
    // Drives the handshake: refused certificates fail here.
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// PING over an open TLS stream.
fn ping(s: &mut impl ReadWrite) -> String {
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut b = [0u8; 7];
    s.read_exact(&mut b).unwrap();
    String::from_utf8_lossy(&b).into_owned()
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

#[test]
fn redis_cli_over_tls_reaches_the_nodes_and_other_cas_are_refused() {
    if !tls_cli() {
        return;
    }
    let dir = tempdir::Dir::new();
    let ca = Ca::new(dir.path(), "ca");
    let other = Ca::new(dir.path(), "other-ca");
    let (cert, key) = ca.issue(dir.path(), "proxy", "localhost", false);
    let node = start_node(free_port());
    let tls = format!("cert = \"{}\"\nkey = \"{}\"", cert.display(), key.display());
    let (_proxy, port, plain) = proxy_with_tls(&dir, &tls, &node);
    assert_eq!(cli(port, &ca.pem, &[], &["SET", "k", "v"]).unwrap(), "OK");
    assert_eq!(cli(port, &ca.pem, &[], &["GET", "k"]).unwrap(), "v");
    // The value is on the node, reached in plaintext.
    assert_eq!(
        raw(node.port, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", 7),
        b"$1\r\nv\r\n"
    );
    // The plaintext port serves too, by default.
    assert_eq!(raw(plain, b"*1\r\n$4\r\nPING\r\n", 7), b"+PONG\r\n");
    let refused = cli(port, &other.pem, &[], &["PING"]).unwrap_err();
    assert!(
        refused.contains("SSL") || refused.contains("certificate"),
        "{refused}"
    );
    // rustls checks the name too: the certificate is for localhost.
    let mut s = rustls_client(port, &ca.pem, "localhost").unwrap();
    assert_eq!(ping(&mut s), "+PONG\r\n");
    let wrong = rustls_client(port, &ca.pem, "elsewhere.example").unwrap_err();
    assert!(wrong.to_string().contains("certificate"), "{wrong}");
}

#[test]
fn an_expired_certificate_is_refused() {
    if !tls_cli() {
        return;
    }
    let dir = tempdir::Dir::new();
    let ca = Ca::new(dir.path(), "ca");
    let (cert, key) = ca.issue(dir.path(), "old", "localhost", true);
    let node = start_node(free_port());
    let tls = format!("cert = \"{}\"\nkey = \"{}\"", cert.display(), key.display());
    let (_proxy, port, _) = proxy_with_tls(&dir, &tls, &node);
    let refused = cli(port, &ca.pem, &[], &["PING"]).unwrap_err();
    assert!(
        refused.contains("SSL") || refused.contains("certificate"),
        "{refused}"
    );
    let e = rustls_client(port, &ca.pem, "localhost").unwrap_err();
    assert!(e.to_string().to_lowercase().contains("expired"), "{e}");
}

#[test]
fn with_a_client_ca_only_clients_with_a_certificate_it_signed_get_in() {
    if !tls_cli() {
        return;
    }
    let dir = tempdir::Dir::new();
    let ca = Ca::new(dir.path(), "ca");
    let clients = Ca::new(dir.path(), "clients-ca");
    let strangers = Ca::new(dir.path(), "strangers-ca");
    let (cert, key) = ca.issue(dir.path(), "proxy", "localhost", false);
    let (ccert, ckey) = clients.issue(dir.path(), "app", "app", false);
    let (scert, skey) = strangers.issue(dir.path(), "stranger", "app", false);
    let node = start_node(free_port());
    let tls = format!(
        "cert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\nplaintext = false",
        cert.display(),
        key.display(),
        clients.pem.display()
    );
    let (_proxy, port, plain) = proxy_with_tls(&dir, &tls, &node);
    let with = |c: &Path, k: &Path| {
        let (c, k) = (
            c.to_str().unwrap().to_string(),
            k.to_str().unwrap().to_string(),
        );
        cli(port, &ca.pem, &["--cert", &c, "--key", &k], &["PING"])
    };
    assert_eq!(with(&ccert, &ckey).unwrap(), "PONG");
    assert!(
        with(&scert, &skey).is_err(),
        "a stranger's certificate got in"
    );
    assert!(
        cli(port, &ca.pem, &[], &["PING"]).is_err(),
        "no certificate got in"
    );
    // plaintext = false: nothing serves on proxy.listen.
    wait_closed(std::iter::once(plain), 5);
}

#[test]
fn sighup_swaps_the_certificate_and_a_connected_client_stays() {
    if !tls_cli() {
        return;
    }
    let dir = tempdir::Dir::new();
    let old_ca = Ca::new(dir.path(), "old-ca");
    let new_ca = Ca::new(dir.path(), "new-ca");
    let (cert, key) = old_ca.issue(dir.path(), "proxy", "localhost", false);
    let node = start_node(free_port());
    let tls = format!("cert = \"{}\"\nkey = \"{}\"", cert.display(), key.display());
    let (proxy, port, _) = proxy_with_tls(&dir, &tls, &node);
    let mut kept = rustls_client(port, &old_ca.pem, "localhost").unwrap();
    assert_eq!(ping(&mut kept), "+PONG\r\n");
    // The files are replaced in place by ones of the new CA, then SIGHUP.
    let (c2, k2) = new_ca.issue(dir.path(), "next", "localhost", false);
    std::fs::copy(&c2, &cert).unwrap();
    std::fs::copy(&k2, &key).unwrap();
    // SAFETY: a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(proxy.pid() as i32, libc::SIGHUP) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while cli(port, &new_ca.pem, &[], &["PING"]).is_err() {
        assert!(
            Instant::now() < deadline,
            "never presented the new certificate"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(cli(port, &old_ca.pem, &[], &["PING"]).is_err());
    // The client connected before still has its session.
    assert_eq!(ping(&mut kept), "+PONG\r\n");
    // A file that does not parse keeps the certificate that works.
    std::fs::write(&cert, "not a certificate").unwrap();
    assert_eq!(unsafe { libc::kill(proxy.pid() as i32, libc::SIGHUP) }, 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cli(port, &new_ca.pem, &[], &["PING"]).unwrap(), "PONG");
    proxy.assert_no_panic();
}

#[test]
fn monitor_over_tls_sees_each_command_at_once() {
    if !tls_cli() {
        return;
    }
    let dir = tempdir::Dir::new();
    let ca = Ca::new(dir.path(), "ca");
    let (cert, key) = ca.issue(dir.path(), "proxy", "localhost", false);
    let node = start_node(free_port());
    let tls = format!("cert = \"{}\"\nkey = \"{}\"", cert.display(), key.display());
    let (_proxy, port, plain) = proxy_with_tls(&dir, &tls, &node);
    let mut monitor = Proc::spawn(
        Command::new("redis-cli")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "--tls",
                "--cacert",
            ])
            .arg(&ca.pem)
            .arg("MONITOR")
            .stdout(Stdio::piped()),
        port,
        "redis-cli MONITOR",
    );
    let out = monitor.child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "OK");
    // One command at a time: each line must arrive before the next command
    // is sent, so a line held back in a TLS record would time out here.
    for i in 0..5 {
        let key = format!("mon{i}");
        let req = format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\nv\r\n", key.len());
        assert_eq!(raw(plain, req.as_bytes(), 5), b"+OK\r\n");
        let sent = Instant::now();
        let line = rx.recv_timeout(Duration::from_secs(2)).unwrap();
        assert!(line.contains("\"SET\"") && line.contains(&key), "{line}");
        assert!(
            sent.elapsed() < Duration::from_secs(1),
            "{:?}",
            sent.elapsed()
        );
    }
}
