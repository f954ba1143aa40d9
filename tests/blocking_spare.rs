//! A blocking command is written to its node at once, on the spare pinned
//! connection the proxy keeps open per node (`upstream/spare.rs`), so a
//! client that blocks is blocked at the node before a write another client
//! sends just after it gets there, as on one Redis; and a spare left stale
//! by a node restart is never handed to a client.

mod common;

use std::time::{Duration, Instant};

use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);

fn conn(port: u16) -> RespConn {
    RespConn::connect_loopback(port, TIMEOUT).unwrap()
}

fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

#[test]
fn a_blocked_read_is_at_the_node_before_a_write_sent_just_after_it() {
    for backend in backends() {
        blocked_before_the_next_write(backend);
    }
}

fn blocked_before_the_next_write(backend: Backend) {
    let c = Cluster::over(backend.nodes(3), "");
    let port = c.proxy.port;
    let mut reader = conn(port);
    let mut writer = conn(port);
    // The first blocking command opens the first spare.
    assert_eq!(text(&reader.cmd(&["BLPOP", "mystream", "0.01"])), "*-1\r\n");
    // Redis's own "Blocking XREADGROUP: key deleted": the DEL goes out right
    // after the read, on another connection. Without a connection ready the
    // read reaches the node after the DEL nearly every time (it is refused
    // -NOGROUP); with one, it is blocked first. Scheduling on a loaded
    // machine may still reorder the two now and then, as it may for two
    // clients of one Redis.
    let mut first = 0;
    let mut seen = Vec::new();
    for _ in 0..20 {
        writer.cmd(&["DEL", "mystream"]);
        writer.cmd(&["XADD", "mystream", "666", "f", "v"]);
        assert_eq!(
            writer.cmd(&["XGROUP", "CREATE", "mystream", "g", "$"]),
            b"+OK\r\n"
        );
        reader
            .send(&[
                b"XREADGROUP",
                b"GROUP",
                b"g",
                b"alice",
                b"BLOCK",
                b"0",
                b"STREAMS",
                b"mystream",
                b">",
            ])
            .unwrap();
        writer.cmd(&["DEL", "mystream"]);
        let r = text(&reader.read_reply().unwrap());
        if r.contains("no longer exists") {
            first += 1;
        }
        seen.push(r);
    }
    assert!(first >= 15, "{first} of 20 blocked first: {seen:?}");
    c.proxy.assert_no_panic();
}

#[test]
fn a_spare_left_stale_by_a_node_restart_is_not_given_to_a_client() {
    let port = free_port();
    let mut c = Cluster::over(vec![start_node(port)], "");
    let proxy = c.proxy.port;
    let mut client = conn(proxy);
    assert_eq!(text(&client.cmd(&["BLPOP", "q", "0.01"])), "*-1\r\n");
    // The spare is open now; the node goes away and comes back empty.
    c.nodes[0].kill();
    c.nodes[0] = start_node(port);
    let deadline = Instant::now() + TIMEOUT;
    while text(&client.cmd(&["SET", "k", "v"])) != "+OK\r\n" {
        assert!(Instant::now() < deadline, "the node never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..3 {
        assert_eq!(text(&client.cmd(&["BLPOP", "q", "0.01"])), "*-1\r\n");
    }
    c.proxy.assert_no_panic();
}
