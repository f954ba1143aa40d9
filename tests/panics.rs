//! A request whose handling panics costs that one reply: the client gets
//! `-ERR internal error …`, its session goes on, its slot under
//! `max_clients` is kept (and given back when it leaves), and the panic is
//! logged. The panic is injected with `SHARDIS_FAULT_PANIC_ON=<command>`.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

const ERR: &[u8] = b"-ERR internal error while handling 'echo' (logged by the proxy)\r\n";

#[test]
fn a_panicking_request_is_answered_and_neither_the_session_nor_its_slot_is_lost() {
    let node = start_node(free_port());
    let dir = tempdir::Dir::new();
    let (path, port) = write_proxy_config(&dir, &[node.addr()], "max_clients = 3");
    let log = dir.path().join("proxy.log");
    let mut proxy = start_proxy_env(
        &path,
        port,
        &[("SHARDIS_FAULT_PANIC_ON", "echo")],
        Some(std::fs::File::create(&log).unwrap()),
    );
    proxy.expect_panics();
    // More panics than there are client slots: each must leave its slot.
    for i in 0..10 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*1\r\n$4\r\nPING\r\n")
            .unwrap();
        let want = [ERR, b"+PONG\r\n"].concat();
        let got = read_n(&mut s, want.len()).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "connection {i}: the panic is answered and the session goes on"
        );
    }
    // All three slots come back (each once the proxy has seen its client
    // leave): three clients at once are served.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut held = loop {
        let mut held: Vec<TcpStream> = (0..3)
            .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        let mut all = true;
        for s in &mut held {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
            all &= read_n(s, 7).unwrap() == b"+PONG\r\n";
        }
        if all {
            break held;
        }
        assert!(
            Instant::now() < deadline,
            "client slots were not given back"
        );
        drop(held);
        std::thread::sleep(Duration::from_millis(100));
    };
    // Counted in INFO, and logged with the panic's message and place.
    held[0]
        .write_all(b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n")
        .unwrap();
    let info = read_bulk(&mut held[0]);
    assert!(info.contains("shardis_internal_errors:10"), "{info}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        logged.matches("request handler panicked").count(),
        10,
        "{logged}"
    );
    assert!(
        logged.contains("fault injected by SHARDIS_FAULT_PANIC_ON=echo"),
        "{logged}"
    );
    assert!(
        logged.contains("panicked at src/proxy/session.rs"),
        "{logged}"
    );
}

/// Reads one bulk reply (`$n\r\n…\r\n`) and returns its payload.
fn read_bulk(s: &mut TcpStream) -> String {
    let mut header = Vec::new();
    while !header.ends_with(b"\r\n") {
        let b = read_n(s, 1).unwrap();
        assert_eq!(b.len(), 1, "reply cut short after {header:?}");
        header.push(b[0]);
    }
    let n: usize = std::str::from_utf8(&header[1..header.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    let body = read_n(s, n + 2).unwrap();
    String::from_utf8_lossy(&body).into_owned()
}
