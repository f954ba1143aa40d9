//! A subscriber through the proxy as the client commands see it, on both
//! kinds of node: CLIENT LIST shows it with flag `P` and its `sub`/`psub`/
//! `ssub` counts; `CLIENT KILL TYPE pubsub` and `CLIENT KILL ID` close it and
//! give its pinned connection back (a later subscriber gets the place under
//! `max_pinned_per_node = 1`, and the node no longer holds its channels);
//! MONITOR shows its SUBSCRIBE and a PUBLISH. A subscriber whose node
//! closes its connection on purpose (CLIENT KILL there, or the node's pubsub
//! output buffer limit) is closed too, not moved to another node as if its
//! node had died (which would hide the messages the node dropped).

mod common;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::frames::{call, conn, text, TIMEOUT};
use common::*;

/// The value of `name=` in one CLIENT LIST line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// The CLIENT LIST lines (bulk string body) of `args`.
fn list(admin: &mut RespConn, args: &[&str]) -> Vec<String> {
    let r = text(&admin.cmd(args));
    r.split("\r\n")
        .skip(1)
        .flat_map(|b| b.split('\n'))
        .filter(|l| l.starts_with("id="))
        .map(String::from)
        .collect()
}

fn client_id(c: &mut RespConn) -> String {
    text(&c.cmd(&["CLIENT", "ID"]))[1..].trim().to_string()
}

fn client_list_shows_a_subscriber_with_flag_p_and_its_counts(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(2);
    let port = c.proxy.port;
    let mut sub = conn(port);
    let id = client_id(&mut sub);
    let mut admin = conn(port);
    assert!(list(&mut admin, &["CLIENT", "LIST", "TYPE", "pubsub"]).is_empty());
    call(&mut sub, &["SUBSCRIBE", "a", "b", "c"], 3);
    call(&mut sub, &["PSUBSCRIBE", "p*", "q*"], 2);
    call(&mut sub, &["SSUBSCRIBE", "s"], 1);
    let subs = list(&mut admin, &["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(subs.len(), 1, "{subs:?}");
    let line = &subs[0];
    assert_eq!(field(line, "id"), id);
    assert_eq!(field(line, "flags"), "P", "{line}");
    assert_eq!(
        (field(line, "sub"), field(line, "psub"), field(line, "ssub")),
        ("3", "2", "1"),
        "{line}"
    );
    // The counts follow unsubscribes; CLIENT INFO says the same.
    call(&mut sub, &["UNSUBSCRIBE", "a"], 1);
    call(&mut sub, &["PUNSUBSCRIBE"], 2);
    let info = list(&mut admin, &["CLIENT", "LIST", "ID", &id]);
    assert_eq!(
        (field(&info[0], "sub"), field(&info[0], "psub")),
        ("2", "0"),
        "{info:?}"
    );
    // The admin client is not a subscriber.
    let normal = list(&mut admin, &["CLIENT", "LIST", "TYPE", "normal"]);
    assert_eq!(normal.len(), 1, "{normal:?}");
    assert_eq!(field(&normal[0], "flags"), "N");
    // Nothing left: a normal client again.
    call(&mut sub, &["UNSUBSCRIBE"], 2);
    call(&mut sub, &["SUNSUBSCRIBE"], 1);
    let line = &list(&mut admin, &["CLIENT", "LIST", "ID", &id])[0];
    assert_eq!(field(line, "flags"), "N", "{line}");
    assert_eq!(
        (field(line, "sub"), field(line, "psub"), field(line, "ssub")),
        ("0", "0", "0")
    );
    assert!(list(&mut admin, &["CLIENT", "LIST", "TYPE", "pubsub"]).is_empty());
    c.proxy.assert_no_panic();
}

/// True once the connection is closed (EOF or reset) within the timeout.
fn is_closed_soon(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = [0u8; 256];
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            // Reset by the peer: closed too.
            Err(_) => return true,
        }
    }
    false
}

/// A raw subscriber socket, its client id, after its confirmation.
fn raw_subscriber(port: u16, channel: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(b"CLIENT ID\r\n").unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut id = String::new();
    r.read_line(&mut id).unwrap();
    let id = id.trim().trim_start_matches(':').to_string();
    let req = format!("SUBSCRIBE {channel}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let want = format!(
        "*3\r\n$9\r\nsubscribe\r\n${}\r\n{channel}\r\n:1\r\n",
        channel.len()
    );
    let got = read_n(&mut s, want.len()).unwrap();
    assert_eq!(text(&got), want);
    (s, id)
}

/// Waits until a new client can SUBSCRIBE `channel` (the only pinned place
/// was given back); returns it.
fn subscribe_when_free(port: u16, channel: &str) -> RespConn {
    let mut c = conn(port);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = call(&mut c, &["SUBSCRIBE", channel], 1);
        if r.starts_with("*3") {
            return c;
        }
        assert!(
            r.starts_with("-ERR max number of pinned connections"),
            "{r}"
        );
        assert!(Instant::now() < deadline, "the place never came back: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The node's own count of subscribers of `channel`.
fn node_numsub(node: u16, channel: &str) -> String {
    text(&conn(node).cmd(&["PUBSUB", "NUMSUB", channel]))
}

fn wait_node_numsub(node: u16, channel: &str, n: usize) {
    let want = format!("*2\r\n${}\r\n{channel}\r\n:{n}\r\n", channel.len());
    let deadline = Instant::now() + TIMEOUT;
    while node_numsub(node, channel) != want {
        assert!(
            Instant::now() < deadline,
            "node still holds {channel}: {}",
            node_numsub(node, channel)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn client_kill_closes_a_subscriber_and_gives_its_pinned_connection_back(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = Cluster::over(vec![b.start()], "max_pinned_per_node = 1\n");
    let port = c.proxy.port;
    let node = c.nodes[0].port;
    let mut admin = conn(port);
    // TYPE pubsub closes the subscriber, not the other clients.
    let (mut first, _) = raw_subscriber(port, "one");
    wait_node_numsub(node, "one", 1);
    let refused = call(&mut conn(port), &["SUBSCRIBE", "x"], 1);
    assert!(
        refused.starts_with("-ERR max number of pinned"),
        "{refused}"
    );
    assert_eq!(
        text(&admin.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"])),
        ":1\r\n"
    );
    assert!(
        is_closed_soon(&mut first),
        "the killed subscriber stays open"
    );
    wait_node_numsub(node, "one", 0);
    assert_eq!(text(&admin.cmd(&["PING"])), "+PONG\r\n");
    let second = subscribe_when_free(port, "two");
    drop(second);
    // ID closes the one named.
    let (mut third, id) = raw_subscriber(port, "three");
    wait_node_numsub(node, "three", 1);
    assert_eq!(text(&admin.cmd(&["CLIENT", "KILL", "ID", &id])), ":1\r\n");
    assert!(
        is_closed_soon(&mut third),
        "the killed subscriber stays open"
    );
    wait_node_numsub(node, "three", 0);
    let mut fourth = subscribe_when_free(port, "four");
    // The new subscriber works: it receives what is published.
    assert_eq!(text(&admin.cmd(&["PUBLISH", "four", "hi"])), ":1\r\n");
    assert_eq!(
        text(&fourth.read_reply().unwrap()),
        "*3\r\n$7\r\nmessage\r\n$4\r\nfour\r\n$2\r\nhi\r\n"
    );
    c.proxy.assert_no_panic();
}

/// Reads monitor lines until one contains `until`.
fn monitor_lines_until(m: &mut BufReader<TcpStream>, until: &str) -> Vec<String> {
    let deadline = Instant::now() + TIMEOUT;
    let mut got = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "no {until:?} in {got:#?}");
        let mut l = String::new();
        let n = m
            .read_line(&mut l)
            .unwrap_or_else(|e| panic!("{e}; so far {got:#?}"));
        assert!(n > 0, "closed; so far {got:#?}");
        let done = l.contains(until);
        got.push(l);
        if done {
            return got;
        }
    }
}

fn monitor_shows_subscribe_and_publish(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(2);
    let port = c.proxy.port;
    let mut m = TcpStream::connect(("127.0.0.1", port)).unwrap();
    m.set_read_timeout(Some(TIMEOUT)).unwrap();
    m.write_all(b"MONITOR\r\n").unwrap();
    assert_eq!(read_n(&mut m, 5).unwrap(), b"+OK\r\n");
    let mut m = BufReader::new(m);
    let mut sub = conn(port);
    call(&mut sub, &["SUBSCRIBE", "news"], 1);
    call(&mut sub, &["PSUBSCRIBE", "n*"], 1);
    let mut publisher = conn(port);
    assert_eq!(
        text(&publisher.cmd(&["PUBLISH", "news", "hello"])),
        ":2\r\n"
    );
    call(&mut sub, &["UNSUBSCRIBE", "news"], 1);
    let got = monitor_lines_until(&mut m, "\"UNSUBSCRIBE\"");
    for want in [
        "\"SUBSCRIBE\" \"news\"",
        "\"PSUBSCRIBE\" \"n*\"",
        "\"PUBLISH\" \"news\" \"hello\"",
        "\"UNSUBSCRIBE\" \"news\"",
    ] {
        assert!(
            got.iter().any(|l| l.contains(want)),
            "no {want} in {got:#?}"
        );
    }
    c.proxy.assert_no_panic();
}

/// Publishes `n` messages of 8 KiB to `channel`, pipelined 50 at a time.
fn flood(port: u16, channel: &str, n: usize) {
    let payload = "x".repeat(8192);
    let mut p = conn(port);
    for _ in 0..n / 50 {
        for _ in 0..50 {
            p.queue(&[b"PUBLISH", channel.as_bytes(), payload.as_bytes()]);
        }
        p.flush().unwrap();
        for _ in 0..50 {
            let r = text(&p.read_reply().unwrap());
            assert!(r.starts_with(':'), "{r}");
        }
    }
}

/// Counts the bytes that arrive until the connection closes (true) or
/// nothing came for the timeout (false).
fn bytes_until_close(s: &mut TcpStream) -> (bool, usize) {
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (true, n),
            Ok(k) => n += k,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (false, n)
            }
            Err(_) => return (true, n),
        }
    }
}

fn client_kill_on_the_node_closes_the_subscriber(c: &Cluster) {
    let (mut sub, _) = raw_subscriber(c.proxy.port, "k");
    let holder = c
        .nodes
        .iter()
        .find(|n| node_numsub(n.port, "k").ends_with(":1\r\n"))
        .expect("a node holds the subscriber");
    let r = text(&conn(holder.port).cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]));
    assert_eq!(r, ":1\r\n");
    assert!(is_closed_soon(&mut sub), "the subscriber stays open");
    for n in &c.nodes {
        wait_node_numsub(n.port, "k", 0);
    }
}

fn a_subscriber_whose_node_closes_its_connection_is_closed_not_moved(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(2);
    let port = c.proxy.port;
    // CLIENT KILL on the node itself (the built-in node has no CLIENT KILL).
    if b == Backend::Redis {
        client_kill_on_the_node_closes_the_subscriber(&c);
    }
    // The node's output buffer limit for pub/sub clients.
    for n in &c.nodes {
        let r = conn(n.port).cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 65536 0 0",
        ]);
        assert_eq!(text(&r), "+OK\r\n");
    }
    const MSGS: usize = 2000;
    let (mut sub, _) = raw_subscriber(port, "big");
    let reader = std::thread::spawn(move || bytes_until_close(&mut sub));
    flood(port, "big", MSGS);
    let (closed, bytes) = reader.join().unwrap();
    let one = "*3\r\n$7\r\nmessage\r\n$3\r\nbig\r\n$8192\r\n".len() + 8192 + 2;
    let mut q = Raw::connect(port);
    if closed {
        // Closed, and not subscribed anywhere any more.
        q.check(&["PUBSUB", "NUMSUB", "big"], "*2\r\n$3\r\nbig\r\n:0\r\n");
    } else {
        // A redis-server may write faster than its limit fills: then
        // nothing may be missing.
        assert_eq!(
            bytes,
            MSGS * one,
            "messages lost, the subscriber still open"
        );
    }
    // The built-in node delivers into a mailbox its connection task
    // empties: 50 pipelined messages of 8 KiB overfill 64 KiB.
    if b == Backend::Builtin {
        assert!(closed, "the subscriber stays open");
    }
    // Not the proxy's own output limit.
    assert_eq!(
        q.info_field("stats", "client_output_buffer_limit_disconnections"),
        0
    );
    c.proxy.assert_no_panic();
}

crate::on_both_backends!(
    a_subscriber_whose_node_closes_its_connection_is_closed_not_moved,
    client_list_shows_a_subscriber_with_flag_p_and_its_counts,
    client_kill_closes_a_subscriber_and_gives_its_pinned_connection_back,
    monitor_shows_subscribe_and_publish,
);
