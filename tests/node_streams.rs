//! Streams on built-in nodes beyond single replies: DUMP / RESTORE / COPY /
//! RENAME keep a stream with its consumer groups; a producer and two
//! consumers in one group through the proxy over built-in nodes get every
//! entry exactly once, blocking included; and a stream survives an
//! ADDNODE migration with its groups.

mod common;

use common::{Cluster, Raw};
use std::time::{Duration, Instant};

fn s(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

#[test]
fn dump_restore_copy_and_rename_keep_a_stream_and_its_groups() {
    let node = common::start_node(common::free_port());
    let mut c = Raw::connect(node.port);
    for i in 1..=300 {
        c.call(&[
            "XADD",
            "s",
            &format!("{i}-1"),
            "f",
            &"v".repeat(i % 50),
            "n",
            &i.to_string(),
        ]);
    }
    c.check(&["XDEL", "s", "7-1", "8-1"], ":2\r\n");
    c.check(&["XGROUP", "CREATE", "s", "g", "0"], "+OK\r\n");
    c.call(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "5",
        "STREAMS",
        "s",
        ">",
    ]);
    c.check(&["XGROUP", "CREATECONSUMER", "s", "g", "bob"], ":1\r\n");
    let full = c.call(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]);
    let payload = c.call_bytes(&[b"DUMP", b"s"]);
    let body = {
        // `$<len>\r\n<payload>\r\n`
        let at = payload.iter().position(|&b| b == b'\n').expect("bulk") + 1;
        payload[at..payload.len() - 2].to_vec()
    };
    c.check(&["DEL", "s"], ":1\r\n");
    assert_eq!(c.call_bytes(&[b"RESTORE", b"s", b"0", &body]), b"+OK\r\n");
    assert_eq!(
        c.call(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]),
        full
    );
    let mut bad = body.clone();
    bad[10] ^= 1;
    assert_eq!(
        s(&c.call_bytes(&[b"RESTORE", b"t", b"0", &bad])),
        "-ERR DUMP payload version or checksum are wrong\r\n"
    );
    c.check(&["COPY", "s", "t"], ":1\r\n");
    c.check(&["RENAME", "t", "u"], "+OK\r\n");
    assert_eq!(
        c.call(&["XINFO", "STREAM", "u", "FULL", "COUNT", "0"]),
        full
    );
    c.check(&["TYPE", "u"], "+stream\r\n");
    c.check(&["OBJECT", "ENCODING", "u"], "$6\r\nstream\r\n");
    let mem = c.int(&["MEMORY", "USAGE", "u"]);
    assert!(mem > 300 * 30, "MEMORY USAGE counts the entries: {mem}");
    c.check(&["XTRIM", "u", "MAXLEN", "0"], ":298\r\n");
    assert!(
        c.int(&["MEMORY", "USAGE", "u"]) < mem / 4,
        "trimmed memory is given back"
    );
    c.check(&["XLEN", "u"], ":0\r\n");
    c.check(&["EXISTS", "u"], ":1\r\n");
    c.check(
        &["LPUSH", "u", "x"],
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    node.assert_no_panic();
}

/// Reads for `consumer` until `want` entries were seen in all, acking each.
fn consume(
    port: u16,
    consumer: &str,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    want: usize,
) {
    let mut c = Raw::connect(port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().len() < want && Instant::now() < deadline {
        let r = c.call(&[
            "XREADGROUP",
            "GROUP",
            "{q}g",
            consumer,
            "COUNT",
            "7",
            "BLOCK",
            "200",
            "STREAMS",
            "{q}s",
            ">",
        ]);
        for line in r.lines().filter(|l| l.starts_with("job")) {
            seen.lock().unwrap().push(line.to_string());
        }
        for id in r
            .lines()
            .filter(|l| l.contains('-') && l.chars().next().is_some_and(|c| c.is_ascii_digit()))
        {
            c.call(&["XACK", "{q}s", "{q}g", id]);
        }
    }
}

#[test]
fn a_consumer_group_through_the_proxy_gets_every_entry_once() {
    let cluster = Cluster::builtin(3);
    let port = cluster.proxy.port;
    let mut p = Raw::connect(port);
    p.check(
        &["XGROUP", "CREATE", "{q}s", "{q}g", "$", "MKSTREAM"],
        "+OK\r\n",
    );
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let n = 500;
    let workers: Vec<_> = ["w1", "w2"]
        .into_iter()
        .map(|w| {
            let seen = seen.clone();
            std::thread::spawn(move || consume(port, w, seen, n))
        })
        .collect();
    for i in 0..n {
        let r = p.call(&["XADD", "{q}s", "*", "j", &format!("job{i}")]);
        assert!(r.starts_with('$'), "{r}");
    }
    for w in workers {
        w.join().unwrap();
    }
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("job{i}")).collect();
    want.sort();
    assert_eq!(got, want, "each job delivered exactly once");
    assert_eq!(
        p.call(&["XPENDING", "{q}s", "{q}g"]),
        "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n"
    );
    assert_eq!(p.int(&["XLEN", "{q}s"]), n as i64);
}

#[test]
fn a_stream_survives_an_addnode_migration() {
    let cluster = Cluster::builtin(2);
    let mut p = Raw::connect(cluster.proxy.port);
    for k in 0..40 {
        let key = format!("st{k}");
        for i in 1..=20 {
            p.call(&["XADD", &key, &format!("{i}-0"), "f", &format!("{k}:{i}")]);
        }
        p.check(&["XGROUP", "CREATE", &key, "g", "0"], "+OK\r\n");
        p.call(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "3",
            "STREAMS",
            &key,
            ">",
        ]);
    }
    let before: Vec<String> = (0..40)
        .map(|k| p.call(&["XINFO", "STREAM", &format!("st{k}"), "FULL"]))
        .collect();
    let extra = common::start_node(common::free_port());
    let r = p.call(&["CLUSTER", "ADDNODE", &extra.addr(), "NAME", "n3"]);
    assert!(r.starts_with('+'), "{r}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !p.call(&["CLUSTER", "RINGINFO"]).contains("state:ok") {
        assert!(Instant::now() < deadline, "migration did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    let moved = Raw::connect(extra.port).int(&["DBSIZE"]);
    assert!(moved > 0, "some stream moved to the new node");
    for (k, want) in before.iter().enumerate() {
        let got = p.call(&["XINFO", "STREAM", &format!("st{k}"), "FULL"]);
        assert_eq!(&got, want, "st{k} after the migration");
    }
    extra.assert_no_panic();
}
