//! A request held in a cutover's pause for a client that hangs up is never
//! sent. A pause can outlast a client's timeout (in a fleet, a leader lost
//! in its cutover holds moving keys until its successor has finished), and
//! a write sent after its client gave up could land after what the client
//! wrote since on a new connection: a deleted key would come back.

mod common;

use std::io::Write;
use std::net::TcpStream;

use common::*;

#[test]
fn writes_paused_in_a_cutover_are_dropped_once_their_client_hangs_up() {
    let nodes: Vec<Proc> = (0..3).map(|_| start_node(free_port())).collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    let dir = tempdir::Dir::new();
    let (path, port) = write_proxy_config(&dir, &addrs[..2], "");
    // Catch-up, the cutover's pause and the sweep each last 3 s longer.
    let env = [("SHARDIS_FAULT_PHASE_DELAY_MS", "3000")];
    let _proxy = start_proxy_env(&path, port, &env, None);
    let mut con = connect(port);
    mset_keys(&mut con, "k:", 1000);
    let joining = addrs[2].clone();
    let change = std::thread::spawn(move || {
        redis::cmd("CLUSTER")
            .arg(&["ADDNODE", &joining, "NAME", "node3"])
            .query::<String>(&mut connect(port))
    });
    wait_info(&mut con, 60, "the cutover's pause", |i| {
        ring_field(i, "state") == "cutover"
    });
    // Each SET from a client that sends it and hangs up at once: moving keys
    // wait in the pause, the others are sent.
    let n = 300;
    for i in 0..n {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let key = format!("gone:{i}");
        write!(
            s,
            "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\nv\r\n",
            key.len()
        )
        .unwrap();
        drop(s);
    }
    assert_eq!(change.join().unwrap().unwrap(), "OK");
    wait_info(&mut con, 60, "the change's end", |i| {
        ring_field(i, "state") == "ok"
    });
    // Keys now on the joining node were moving: their SETs were held and
    // must not have been sent; every other key's SET was.
    let mut on_new = connect(nodes[2].port);
    let (mut moving, mut sent) = (0, 0);
    for i in 0..n {
        let key = format!("gone:{i}");
        let there: i64 = redis::cmd("EXISTS").arg(&key).query(&mut on_new).unwrap();
        let through: i64 = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
        if through == 1 {
            sent += 1;
        }
        if there == 1 {
            moving += 1;
        }
    }
    eprintln!("{n} SETs of clients that hung up: {sent} sent, {moving} on the joining node");
    assert_eq!(moving, 0, "a SET held for a client that hung up was sent");
    assert!(
        sent > 0 && sent < n,
        "{sent} of {n} sent: expected the keys not moving only"
    );
    assert!(
        dbsize(nodes[2].port) > 0,
        "nothing moved to the joining node"
    );
    let values: Vec<Option<String>> = (0..1000)
        .map(|i| {
            redis::cmd("GET")
                .arg(format!("k:{i}"))
                .query(&mut con)
                .unwrap()
        })
        .collect();
    assert!(
        values.iter().all(|v| v.is_some()),
        "a key written before the change is gone"
    );
}
