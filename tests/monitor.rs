//! MONITOR on the proxy: every client's commands, one line each in
//! redis-server 7's format plus the node that served it, seen through raw
//! TCP, `redis-cli monitor` and redis-py's `monitor()`; a monitor that does
//! not read is closed at its output limit while the proxy serves on.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

/// Reads CRLF-terminated monitor lines (and replies) until one contains
/// `until`; returns them all.
fn lines_until(s: &mut TcpStream, until: &str) -> Vec<String> {
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let mut got = Vec::new();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        assert!(
            Instant::now() < deadline,
            "no line with {until:?} in {got:#?}"
        );
        let n = s
            .read(&mut byte)
            .unwrap_or_else(|e| panic!("{e}; so far {got:#?}"));
        assert!(n > 0, "closed; so far {got:#?}");
        buf.push(byte[0]);
        if buf.ends_with(b"\r\n") {
            let line = text(&buf);
            buf.clear();
            let done = line.contains(until);
            got.push(line);
            if done {
                return got;
            }
        }
    }
}

/// The name of the node that owns `key`.
fn keynode(port: u16, key: &str) -> String {
    let r = Raw::connect(port).call(&["CLUSTER", "KEYNODE", key]);
    r.lines()
        .nth(1)
        .unwrap_or_else(|| panic!("{r:?}"))
        .to_string()
}

fn monitor(port: u16) -> TcpStream {
    let mut m = TcpStream::connect(("127.0.0.1", port)).unwrap();
    m.set_read_timeout(Some(TIMEOUT)).unwrap();
    m.write_all(b"MONITOR\r\n").unwrap();
    assert_eq!(read_n(&mut m, 5).unwrap(), b"+OK\r\n");
    m
}

/// The same commands against `port`, and the monitor's view of them with
/// times and addresses blanked (the node, when `strip_node`, cut off).
fn monitored_script(port: u16, strip_node: bool) -> Vec<String> {
    let mut m = monitor(port);
    let mut other = Raw::connect(port);
    other.call_bytes(&[b"SET", b"k", b"a\x00b\n\"c\\"]);
    other.call(&["AUTH", "someone", "secret"]);
    other.call(&["HELLO", "2", "AUTH", "someone", "secret", "SETNAME", "x"]);
    other.call(&["CLIENT", "SETNAME", "nm"]);
    other.call(&["CONFIG", "GET", "maxmemory"]);
    other.call(&["CLIENT", "LIST"]);
    other.call(&["NOSUCHCOMMAND"]);
    other.call(&["GET"]);
    other.call_bytes(&[b"GET", "é".as_bytes()]);
    other.call(&["MULTI"]);
    other.call(&["INCR", "z"]);
    other.call(&["EXEC"]);
    other.call(&["ECHO", "end"]);
    let mut got = lines_until(&mut m, "\"end\"");
    // The monitor's own commands: shown, answered; keyspace ones refused.
    m.write_all(b"PING\r\nGET k\r\nMONITOR\r\nECHO own\r\n")
        .unwrap();
    got.extend(lines_until(&mut m, "\"own\""));
    let re_head = |l: &str| -> String {
        let Some(rest) = l.strip_prefix('+').filter(|r| r.contains("] ")) else {
            return l.to_string();
        };
        let (ts, rest) = rest.split_once(' ').unwrap();
        assert!(
            ts.len() > 8 && ts.as_bytes()[ts.len() - 7] == b'.',
            "{l}: seconds.micros"
        );
        let (_, rest) = rest.split_once("] ").unwrap();
        let mut body = format!("+T [0 A] {rest}");
        if strip_node {
            let cut = body
                .rfind(" -> ")
                .unwrap_or_else(|| panic!("no node in {l}"));
            body = format!("{}\r\n", &body[..cut]);
        }
        body
    };
    got.iter().map(|l| re_head(l)).collect()
}

#[test]
fn monitor_lines_match_redis_server_byte_for_byte_apart_from_the_node() {
    if !have_tool("redis-server") {
        return;
    }
    let redis = start_redis(free_port());
    let want = monitored_script(redis.port, false);
    let c = Cluster::redis(2);
    let got = monitored_script(c.proxy.port, true);
    assert_eq!(got, want);
    // What Redis shows, for the record: secrets redacted, admin commands,
    // unknown commands and bad arities absent.
    assert!(want.contains(&"+T [0 A] \"AUTH\" \"(redacted)\" \"(redacted)\"\r\n".to_string()));
    assert!(!want
        .iter()
        .any(|l| l.contains("CONFIG") || l.contains("NOSUCH")));
}

#[test]
fn monitor_names_the_client_and_the_node_that_served_each_command() {
    let c = Cluster::builtin(3);
    let port = c.proxy.port;
    let mut m = monitor(port);
    let mut other = TcpStream::connect(("127.0.0.1", port)).unwrap();
    other.set_read_timeout(Some(TIMEOUT)).unwrap();
    let peer = other.local_addr().unwrap().to_string();
    let mut admin = Raw::connect(port);
    let node = keynode(port, "user:42");
    other
        .write_all(b"SET user:42 v\r\nMGET a b c d e f g h i j k l m n o p q r s t\r\nPING\r\n")
        .unwrap();
    let got = lines_until(&mut m, "\"PING\"");
    let set = got.iter().find(|l| l.contains("\"SET\"")).unwrap();
    assert!(
        set.ends_with(&format!(
            "[0 {peer}] \"SET\" \"user:42\" \"v\" -> {node}\r\n"
        )),
        "{set} (node {node})"
    );
    let mget = got.iter().find(|l| l.contains("\"MGET\"")).unwrap();
    assert!(
        mget.ends_with(" -> 3 nodes\r\n"),
        "{mget}: 20 keys over 3 nodes"
    );
    let ping = got.iter().find(|l| l.contains("\"PING\"")).unwrap();
    assert!(
        ping.ends_with(&format!("[0 {peer}] \"PING\" -> proxy\r\n")),
        "{ping}"
    );
    // CLIENT LIST shows the monitor with flag O.
    let list = admin.call(&["CLIENT", "LIST"]);
    assert_eq!(list.matches("flags=O").count(), 1, "{list}");
    // RESET makes it a normal client again: no more lines.
    m.write_all(b"RESET\r\n").unwrap();
    let got = lines_until(&mut m, "+RESET");
    assert_eq!(got.last().unwrap(), "+RESET\r\n");
    admin.call(&["SET", "after", "reset"]);
    m.write_all(b"GET after\r\n").unwrap();
    assert_eq!(read_n(&mut m, 11).unwrap(), b"$5\r\nreset\r\n");
    let list = admin.call(&["CLIENT", "LIST"]);
    assert!(!list.contains("flags=O"), "{list}");
    // QUIT from a monitor: +OK, then closed.
    let mut m = monitor(port);
    m.write_all(b"QUIT\r\n").unwrap();
    let rest = read_to_close(&mut m);
    assert!(text(&rest).ends_with("+OK\r\n"), "{}", text(&rest));
    c.proxy.assert_no_panic();
}

#[test]
fn redis_cli_monitor_prints_other_clients_commands_with_their_node() {
    if !have_tool("redis-cli") {
        return;
    }
    let c = Cluster::builtin(2);
    let port = c.proxy.port;
    let mut cli = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "monitor"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn_dying()
        .unwrap();
    let stdout = cli.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut other = Raw::connect(port);
    let node = keynode(port, "clikey");
    let deadline = Instant::now() + TIMEOUT;
    let mut seen = Vec::new();
    let found = loop {
        // redis-cli may attach after the first SETs: repeat until one shows.
        other.call(&["SET", "clikey", "v"]);
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if line.contains("\"SET\" \"clikey\" \"v\" -> ") {
                break line;
            }
            seen.push(line);
        }
        assert!(Instant::now() < deadline, "redis-cli printed {seen:#?}");
    };
    let _ = cli.kill();
    let _ = cli.wait();
    let _ = reader.join();
    assert!(found.starts_with(|ch: char| ch.is_ascii_digit()), "{found}");
    assert!(found.ends_with(&format!("-> {node}")), "{found} / {node}");
}

#[test]
fn redis_py_monitor_parses_lines_and_sees_the_node() {
    let Some(lib) = redis_py(8) else {
        return;
    };
    let c = Cluster::builtin(3);
    let port = c.proxy.port;
    let script = r#"
import sys, redis
port = int(sys.argv[1])
r = redis.Redis(port=port, socket_timeout=10)
other = redis.Redis(port=port, socket_timeout=10)
other.ping()
with r.monitor() as m:
    other.set('pyk', 'v"q')
    for _ in range(50):
        c = m.next_command()
        if c['command'].startswith('SET'):
            break
    print('parsed', repr(c['command']), c['db'], c['client_address'], c['client_type'], c['time'] > 1e9)
    other.get('pyk')
    for _ in range(50):
        line = m.connection.read_response()
        if b'"GET"' in line:
            break
    print('raw', line.decode())
"#;
    let out = run_ok(
        Command::new("timeout")
            .args(["60", "python3", "-c", script, &port.to_string()])
            .env("PYTHONPATH", &lib),
    );
    assert!(
        out.contains("parsed 'SET pyk v\"q' 0 127.0.0.1 tcp True"),
        "{out}"
    );
    let node = keynode(port, "pyk");
    let raw_line = out.lines().find(|l| l.starts_with("raw ")).unwrap();
    assert!(
        raw_line.ends_with(&format!("\"GET\" \"pyk\" -> {node}")),
        "{raw_line} / {node}"
    );
}

#[test]
fn a_monitor_that_does_not_read_is_closed_at_its_limit_and_the_proxy_serves_on() {
    let nodes = vec![start_node(free_port())];
    let c = Cluster::over(
        nodes,
        "client_output_hard_limit = 262144\nclient_output_soft_limit = 0\n",
    );
    let port = c.proxy.port;
    let mut m = monitor(port);
    // Never read from `m` again until the end: its lines pile up.
    let mut other = RespConn::connect_loopback(port, TIMEOUT).unwrap();
    let value = "x".repeat(1000);
    let mut admin = Raw::connect(port);
    let mut closed = false;
    // At most 40 000 writes of ~1 KB (40 MB of lines, far past any socket
    // buffer), stopping as soon as the monitor is gone.
    for batch in 0..200 {
        for i in 0..200 {
            let k = format!("k{batch}:{i}");
            other.queue(&[b"SET", k.as_bytes(), value.as_bytes()]);
        }
        other.flush().unwrap();
        for _ in 0..200 {
            assert_eq!(other.read_reply().unwrap(), b"+OK\r\n");
        }
        if !admin.call(&["CLIENT", "LIST"]).contains("flags=O") {
            closed = true;
            break;
        }
    }
    assert!(closed, "the monitor was never closed");
    assert!(admin.info_field("stats", "client_output_buffer_limit_disconnections") >= 1);
    // The proxy goes on, and the monitor's socket ends after what was sent.
    assert_eq!(admin.call(&["PING"]), "+PONG\r\n");
    let _ = read_to_close(&mut m);
    c.proxy.assert_no_panic();
}
