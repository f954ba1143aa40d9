//! CLIENT LIST / INFO / KILL / REPLY over the proxy's own clients, compared
//! with redis-server 7 where they overlap: every client of the proxy listed
//! with Redis's fields, a kill that closes the right session and gives back
//! the connections it pinned, replies suppressed exactly as Redis does; and
//! INFO's client count and cluster flag.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn conn(port: u16) -> RespConn {
    RespConn::connect_loopback(port, TIMEOUT).unwrap()
}

fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

/// The lines of a CLIENT LIST reply (bulk in RESP2).
fn lines(reply: &str) -> Vec<String> {
    let body = reply.split_once("\r\n").map_or("", |(_, b)| b);
    body.trim_end_matches("\r\n")
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

fn keys(line: &str) -> Vec<&str> {
    line.split(' ')
        .map(|kv| kv.split('=').next().unwrap())
        .collect()
}

/// A client's own address, as CLIENT INFO gives it.
fn addr(s: &mut RespConn) -> String {
    let info = lines(&text(&s.cmd(&["CLIENT", "INFO"])));
    field(&info[0], "addr").to_string()
}

/// Waits until `port` has closed `s` (EOF or reset), within the timeout.
fn assert_closed(s: &mut RespConn, what: &str) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match s.call_str(&["PING"]) {
            Err(_) => return,
            Ok(r) if r.is_empty() => return,
            Ok(r) => assert!(Instant::now() < deadline, "{what} still answers {r:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn client_list_shows_every_proxy_client_with_redis_fields() {
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    let redis_line = lines(&text(&conn(redis.port).cmd(&["CLIENT", "LIST"])))[0].clone();
    let c = Cluster::redis(2);
    let port = c.proxy.port;
    let mut named = conn(port);
    assert_eq!(named.cmd(&["CLIENT", "SETNAME", "worker-1"]), b"+OK\r\n");
    assert_eq!(named.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    let mut multi = conn(port);
    assert_eq!(multi.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(multi.cmd(&["INCR", "n"]), b"+QUEUED\r\n");
    let mut blocked = conn(port);
    blocked.send(&[b"BLPOP", b"q", b"0"]).unwrap();
    let mut me = conn(port);
    let my_id: i64 = text(&me.cmd(&["CLIENT", "ID"]))[1..]
        .trim()
        .parse()
        .unwrap();
    // The blocked client is listed with `b` once its BLPOP reached the node.
    let deadline = Instant::now() + TIMEOUT;
    let list = loop {
        let list = lines(&text(&me.cmd(&["CLIENT", "LIST"])));
        if list.iter().any(|l| field(l, "flags") == "b") {
            break list;
        }
        assert!(Instant::now() < deadline, "never blocked: {list:#?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(list.len(), 4, "{list:#?}");
    for l in &list {
        assert_eq!(
            keys(l),
            keys(&redis_line),
            "Redis 7's fields, in order:\n{l}\n{redis_line}"
        );
        assert_eq!(field(l, "user"), "default");
        assert_eq!(field(l, "db"), "0");
        assert_eq!(field(l, "laddr"), format!("127.0.0.1:{port}"));
    }
    let by_name: Vec<&String> = list
        .iter()
        .filter(|l| field(l, "name") == "worker-1")
        .collect();
    assert_eq!(by_name.len(), 1);
    assert_eq!(field(by_name[0], "cmd"), "set");
    assert_eq!(field(by_name[0], "flags"), "N");
    let x: Vec<&String> = list.iter().filter(|l| field(l, "flags") == "x").collect();
    assert_eq!(x.len(), 1, "{list:#?}");
    assert_eq!(field(x[0], "multi"), "1");
    let mine = list
        .iter()
        .find(|l| field(l, "id") == my_id.to_string())
        .unwrap();
    assert_eq!(field(mine, "cmd"), "client|list");
    // A plain socket's own address is the one listed for it.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain.write_all(b"PING\r\n").unwrap();
    assert_eq!(read_n(&mut plain, 7).unwrap(), b"+PONG\r\n");
    let plain_addr = plain.local_addr().unwrap().to_string();
    let listed = text(&me.cmd(&["CLIENT", "LIST"]));
    assert!(listed.contains(&format!(" addr={plain_addr} ")), "{listed}");
    drop(plain);
    assert!(field(mine, "addr").starts_with("127.0.0.1:"));
    // Filters: TYPE and ID; CLIENT INFO is this client's line.
    assert_eq!(
        lines(&text(&me.cmd(&["CLIENT", "LIST", "TYPE", "normal"]))).len(),
        4
    );
    assert_eq!(
        lines(&text(&me.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]))).len(),
        0
    );
    let id = my_id.to_string();
    let only = lines(&text(&me.cmd(&["CLIENT", "LIST", "ID", &id, "999999"])));
    assert_eq!(only.len(), 1);
    assert_eq!(field(&only[0], "id"), id);
    let info = lines(&text(&me.cmd(&["CLIENT", "INFO"])));
    assert_eq!(field(&info[0], "cmd"), "client|info");
    // INFO counts the proxy's clients.
    let mut r = Raw::connect(port);
    assert_eq!(r.info_field("clients", "connected_clients"), 5);
    drop(named);
    let deadline = Instant::now() + TIMEOUT;
    while r.info_field("clients", "connected_clients") != 4 {
        assert!(
            Instant::now() < deadline,
            "a client that left is still counted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn client_errors_match_redis_server() {
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    let c = Cluster::builtin(1);
    let mut want = conn(redis.port);
    let mut got = conn(c.proxy.port);
    for cmd in [
        &["CLIENT", "KILL", "1.2.3.4:5"][..],
        &["CLIENT", "KILL", "ID", "0"],
        &["CLIENT", "KILL", "ID", "x"],
        &["CLIENT", "KILL", "ID", "999999"],
        &["CLIENT", "KILL", "TYPE", "foo"],
        &["CLIENT", "KILL", "USER", "bob"],
        &["CLIENT", "KILL", "USER", "default", "SKIPME", "maybe"],
        &["CLIENT", "KILL", "ADDR", "1.2.3.4:5"],
        &["CLIENT", "KILL", "LADDR", "1.2.3.4:5"],
        &["CLIENT", "KILL", "ID", "1", "TYPE"],
        &["CLIENT", "KILL"],
        &["CLIENT", "KILL", "FOO", "bar"],
        &["CLIENT", "KILL", "TYPE", "pubsub"],
        &["CLIENT", "REPLY"],
        &["CLIENT", "REPLY", "MAYBE"],
        &["CLIENT", "REPLY", "ON", "x"],
        &["CLIENT", "REPLY", "ON"],
        &["CLIENT", "LIST", "TYPE", "foo"],
        &["CLIENT", "LIST", "ID", "x"],
        &["CLIENT", "LIST", "foo"],
        &["CLIENT", "LIST", "ID", "999999"],
        &["CLIENT", "INFO", "x"],
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CLIENT", "NO-EVICT", "on"],
        &["SELECT", "0"],
        &["SELECT", "x"],
    ] {
        assert_eq!(text(&got.cmd(cmd)), text(&want.cmd(cmd)), "{cmd:?}");
    }
    // The proxy serves database 0 only, and says so.
    assert!(text(&got.cmd(&["SELECT", "1"])).starts_with("-ERR DB index is out of range"));
}

#[test]
fn client_kill_closes_the_chosen_sessions_only() {
    let c = Cluster::builtin(2);
    let port = c.proxy.port;
    let mut a = conn(port);
    let mut b = conn(port);
    let mut d = conn(port);
    let mut me = conn(port);
    let id = |s: &mut RespConn| text(&s.cmd(&["CLIENT", "ID"]))[1..].trim().to_string();
    let a_id = id(&mut a);
    let b_addr = addr(&mut b);
    let d_addr = addr(&mut d);
    assert_eq!(me.cmd(&["CLIENT", "KILL", "ID", &a_id]), b":1\r\n");
    assert_closed(&mut a, "the client killed by ID");
    assert_eq!(me.cmd(&["CLIENT", "KILL", "ADDR", &b_addr]), b":1\r\n");
    assert_closed(&mut b, "the client killed by ADDR");
    // The old form answers +OK, then -ERR once nobody has that address.
    assert_eq!(me.cmd(&["CLIENT", "KILL", &d_addr]), b"+OK\r\n");
    assert_closed(&mut d, "the client killed by the old form");
    assert_eq!(
        text(&me.cmd(&["CLIENT", "KILL", &d_addr])),
        "-ERR No such client\r\n"
    );
    // SKIPME yes (the default) spares the caller; LADDR matches everyone.
    let laddr = format!("127.0.0.1:{port}");
    let mut e = conn(port);
    assert_eq!(e.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(me.cmd(&["CLIENT", "KILL", "LADDR", &laddr]), b":1\r\n");
    assert_closed(&mut e, "the client killed by LADDR");
    assert_eq!(me.cmd(&["PING"]), b"+PONG\r\n");
    // MAXAGE: only clients at least that old.
    let mut young = conn(port);
    assert_eq!(young.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(me.cmd(&["CLIENT", "KILL", "MAXAGE", "3600"]), b":0\r\n");
    assert_eq!(young.cmd(&["PING"]), b"+PONG\r\n");
    // SKIPME no: the caller is answered, then closed.
    let my_id = id(&mut me);
    assert_eq!(
        me.cmd(&["CLIENT", "KILL", "ID", &my_id, "SKIPME", "no"]),
        b":1\r\n"
    );
    assert_closed(&mut me, "the client that killed itself");
    assert_eq!(young.cmd(&["PING"]), b"+PONG\r\n");
    c.proxy.assert_no_panic();
}

#[test]
fn killing_a_blocked_or_multi_client_gives_back_its_pinned_connection() {
    if !have_tool("redis-server") {
        return;
    }
    let nodes = vec![start_redis(free_port())];
    // `extra` lands inside [proxy].
    let c = Cluster::over(nodes, "max_pinned_per_node = 1\n");
    let port = c.proxy.port;
    let mut admin = conn(port);
    let mut second = conn(port);
    // A blocked client holds the one pin.
    let mut blocked = conn(port);
    let blocked_id = text(&blocked.cmd(&["CLIENT", "ID"]))[1..]
        .trim()
        .to_string();
    blocked.send(&[b"BLPOP", b"q", b"0"]).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    while !text(&admin.cmd(&["CLIENT", "LIST"])).contains("flags=b") {
        assert!(Instant::now() < deadline, "never blocked");
        std::thread::sleep(Duration::from_millis(20));
    }
    loop {
        let r = text(&second.cmd(&["BLPOP", "q", "0.05"]));
        if r.starts_with("-ERR max number of pinned connections") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never refused: {r}; blocked got {:?}",
            blocked.read_reply().map(|r| text(&r))
        );
    }
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ID", &blocked_id]), b":1\r\n");
    assert_closed(&mut blocked, "the killed blocked client");
    assert_pin_given_back(&mut second, &mut admin, "q", "the killed client");
    // A client inside MULTI holds it too, from its first queued key.
    let mut tx = conn(port);
    let tx_addr = addr(&mut tx);
    assert_eq!(tx.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(tx.cmd(&["SET", "k", "1"]), b"+QUEUED\r\n");
    assert!(text(&second.cmd(&["WATCH", "k"])).starts_with("-ERR max number of pinned"));
    assert_eq!(admin.cmd(&["CLIENT", "KILL", "ADDR", &tx_addr]), b":1\r\n");
    assert_closed(&mut tx, "the killed MULTI client");
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let r = text(&second.cmd(&["WATCH", "k"]));
        if r == "+OK\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "the pin never came back: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        admin.cmd(&["EXISTS", "k"]),
        b":0\r\n",
        "the killed transaction never ran"
    );
    c.proxy.assert_no_panic();
}

/// Sends `script` in one write and reads until `end` arrives; returns the bytes.
fn pipelined(port: u16, script: &[u8], end: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(script).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while !got.ends_with(end) {
        assert!(Instant::now() < deadline, "{:?}", text(&got));
        let more = read_n(&mut s, 1).unwrap_or_else(|e| panic!("{e}: {:?}", text(&got)));
        got.extend(more);
    }
    got
}

#[test]
fn client_reply_off_and_skip_suppress_replies_as_redis_server_does() {
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    let c = Cluster::redis(2);
    let script: &[u8] = b"CLIENT REPLY SKIP\r\nSET a 1\r\nGET a\r\n\
        CLIENT REPLY OFF\r\nSET a 2\r\nGET a\r\nNOSUCH\r\nMGET a b c\r\nCLIENT REPLY SKIP\r\nPING\r\n\
        CLIENT REPLY ON\r\nGET a\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\nGET a\r\nECHO end\r\n";
    let end = b"$3\r\nend\r\n";
    let want = pipelined(redis.port, script, end);
    let got = pipelined(c.proxy.port, script, end);
    assert_eq!(text(&got), text(&want));
    assert_eq!(text(&want), "$1\r\n1\r\n+OK\r\n$1\r\n2\r\n$3\r\nend\r\n");
    // The client goes on normally afterwards, also for replies the proxy
    // had to wait for while they were suppressed.
    let got = pipelined(
        c.proxy.port,
        b"CLIENT REPLY OFF\r\nSET big xxxxxxxxxx\r\nMGET big a\r\nCLIENT REPLY ON\r\nGET big\r\n",
        b"$10\r\nxxxxxxxxxx\r\n",
    );
    assert_eq!(text(&got), "+OK\r\n$10\r\nxxxxxxxxxx\r\n");
    c.proxy.assert_no_panic();
}

#[test]
fn info_says_cluster_enabled_as_cluster_info_does() {
    let c = Cluster::builtin(1);
    let mut r = Raw::connect(c.proxy.port);
    let cluster_info = r.call(&["CLUSTER", "INFO"]);
    assert!(
        cluster_info.contains("cluster_enabled:1\r\n"),
        "{cluster_info}"
    );
    assert_eq!(r.info_field("cluster", "cluster_enabled"), 1);
}

#[test]
fn client_reply_off_still_sends_resp3_pushes_as_redis_server_does() {
    let proxy = Cluster::builtin(2);
    let redis = have_tool("redis-server").then(|| start_redis(free_port()));
    let mut ports = vec![proxy.proxy.port];
    ports.extend(redis.as_ref().map(|r| r.port));
    for port in ports {
        let mut sub = Raw::connect(port);
        let hello = sub.call_bytes(&[b"HELLO", b"3"]);
        assert!(hello.starts_with(b"%"), "{}", text(&hello));
        sub.send(&[b"CLIENT", b"REPLY", b"OFF"]);
        sub.send(&[b"SUBSCRIBE", b"channel"]);
        assert_eq!(
            text(&sub.reply()),
            ">3\r\n$9\r\nsubscribe\r\n$7\r\nchannel\r\n:1\r\n",
            "port {port}"
        );
        sub.send(&[b"PSUBSCRIBE", b"ch*"]);
        assert_eq!(
            text(&sub.reply()),
            ">3\r\n$10\r\npsubscribe\r\n$3\r\nch*\r\n:2\r\n"
        );
        let mut publisher = Raw::connect(port);
        assert_eq!(publisher.int(&["PUBLISH", "channel", "hello"]), 2);
        assert_eq!(
            text(&sub.reply()),
            ">3\r\n$7\r\nmessage\r\n$7\r\nchannel\r\n$5\r\nhello\r\n"
        );
        assert_eq!(
            text(&sub.reply()),
            ">4\r\n$8\r\npmessage\r\n$3\r\nch*\r\n$7\r\nchannel\r\n$5\r\nhello\r\n"
        );
        sub.send(&[b"UNSUBSCRIBE", b"channel"]);
        assert_eq!(
            text(&sub.reply()),
            ">3\r\n$11\r\nunsubscribe\r\n$7\r\nchannel\r\n:1\r\n"
        );
        sub.send(&[b"PUNSUBSCRIBE", b"ch*"]);
        assert_eq!(
            text(&sub.reply()),
            ">3\r\n$12\r\npunsubscribe\r\n$3\r\nch*\r\n:0\r\n"
        );
        // Other replies stay off until CLIENT REPLY ON.
        sub.send(&[b"PING"]);
        sub.send(&[b"CLIENT", b"REPLY", b"ON"]);
        assert_eq!(text(&sub.reply()), "+OK\r\n");
    }
    proxy.proxy.assert_no_panic();
}
