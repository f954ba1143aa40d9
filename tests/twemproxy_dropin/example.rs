//! `config/nutcracker.yml`, the repository's example of a site's file:
//! nutcracker and shardis both accept it as it is, shardis with no warning;
//! shardis starts on it unchanged; and with only its addresses moved to
//! free ports, every key of every pool lands where nutcracker put it.

use super::common::{free_port, output, BIN};
use super::site::{self, show, At, Client, Site};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/nutcracker.yml");
const PASSWORD: &[u8] = b"change-me";
const SOCKET: &str = "/tmp/shardis-example-sessions.sock";
/// The file's listeners, then its servers (open ones, then protected).
const LISTEN: [u16; 3] = [22121, 22122, 22123];
const SERVERS: [u16; 5] = [6381, 6382, 6383, 6384, 6385];

fn text() -> String {
    std::fs::read_to_string(EXAMPLE).expect("config/nutcracker.yml")
}

#[test]
fn the_example_is_accepted_as_it_is_by_both_and_shardis_warns_about_nothing() {
    let out = output(Command::new(BIN).args(["proxy", "-t", "-c", EXAMPLE]));
    let (said, warned) = (show(&out.stdout), show(&out.stderr));
    assert!(out.status.success(), "{said}{warned}");
    assert!(said.contains("syntax is ok"), "{said}");
    assert!(!warned.contains("warn"), "{warned}");
    if !site::tools() {
        return;
    }
    let theirs = output(Command::new("nutcracker").args(["-t", "-c", EXAMPLE]));
    assert!(theirs.status.success(), "nutcracker -t: {theirs:?}");
}

#[test]
fn shardis_starts_on_the_example_unchanged_and_every_pool_answers() {
    let busy = LISTEN
        .iter()
        .any(|p| TcpListener::bind(("127.0.0.1", *p)).is_err());
    if busy || Path::new(SOCKET).exists() {
        println!("skipped: a port of {LISTEN:?} is in use or {SOCKET} exists");
        return;
    }
    let stats = free_port().to_string();
    let mut cmd = Command::new(BIN);
    cmd.args(["proxy", "-c", EXAMPLE, "-s", &stats, "-a", "127.0.0.1"])
        .stdout(std::process::Stdio::null());
    let shardis = super::common::Proc::spawn(&mut cmd, LISTEN[0], "shardis proxy");
    site::wait_answering(LISTEN[0]);
    for port in LISTEN {
        // Answered by the proxy: no server of the file need be up.
        assert_eq!(
            show(&Client::connect(&At::Tcp(port)).call(&[b"PING"])),
            "+PONG\r\n"
        );
    }
    let mut s = Client::connect(&At::Unix(SOCKET.into()));
    assert_eq!(
        show(&s.call(&[b"PING"])),
        "-NOAUTH Authentication required\r\n"
    );
    assert_eq!(show(&s.call(&[b"AUTH", PASSWORD])), "+OK\r\n");
    shardis.assert_no_panic();
    drop(shardis);
    let _ = std::fs::remove_file(SOCKET);
}

/// The example with every address moved: listeners to `listen`, the unix
/// socket to `sock`, servers to `servers`; nothing else changes.
fn moved(listen: &[u16], sock: &str, servers: &[u16]) -> String {
    let mut t = text().replace(SOCKET, sock);
    for (from, to) in LISTEN.iter().zip(listen).chain(SERVERS.iter().zip(servers)) {
        t = t.replace(&format!("127.0.0.1:{from}"), &format!("127.0.0.1:{to}"));
    }
    t
}

#[test]
fn every_pool_of_the_example_places_keys_where_nutcracker_does() {
    if !site::tools() {
        return;
    }
    let open = site::redis_servers(3, &[]);
    let locked = site::redis_servers(2, &["--requirepass", "change-me"]);
    let servers: Vec<u16> = open.iter().chain(&locked).map(|r| r.port).collect();
    let listen: Vec<u16> = LISTEN.iter().map(|_| free_port()).collect();
    let dir = super::common::tempdir::Dir::new();
    let sock = dir.path().join("sessions.sock");
    let site = Site::new(&moved(&listen, sock.to_str().unwrap(), &servers));
    // (where, password, database, on the protected servers)
    let pools = [
        ("pages", At::Tcp(listen[0]), None, 0, false),
        ("sessions", At::Unix(sock.clone()), Some(PASSWORD), 0, true),
        ("counters", At::Tcp(listen[1]), None, 2, false),
        ("ranks", At::Tcp(listen[2]), None, 3, false),
    ];
    let run = || {
        let mut seen = Vec::new();
        for (name, at, pw, db, protected) in &pools {
            let keys = site::keys(500, name);
            site::write_keys_as(at, *pw, &keys);
            let placed = match protected {
                true => site::placement_as(&locked, *db, Some(PASSWORD)),
                false => site::placement(&open, *db),
            };
            assert_eq!(placed.len(), keys.len(), "pool {name}");
            seen.push(placed);
        }
        site::flushall(&open);
        for r in &locked {
            let mut c = Client::connect(&At::Tcp(r.port));
            c.call(&[b"AUTH", PASSWORD]);
            assert_eq!(show(&c.call(&[b"FLUSHALL"])), "+OK\r\n");
        }
        seen
    };
    let mut nc = site.nutcracker(listen[0], free_port());
    let by_nutcracker = run();
    nc.kill();
    site::wait_gone(listen[0]);
    let shardis = site.shardis(listen[0], &["-s", &free_port().to_string()]);
    let by_shardis = run();
    for (i, (name, ..)) in pools.iter().enumerate() {
        assert_eq!(by_shardis[i], by_nutcracker[i], "pool {name}");
        let mut spread = [0; 3];
        by_shardis[i].values().for_each(|s| spread[*s] += 1);
        println!(
            "pool {name}: {} keys agree, per server {spread:?}",
            by_shardis[i].len()
        );
    }
    shardis.assert_no_panic();
}
