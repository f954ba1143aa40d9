//! Replication between built-in nodes, over TCP between real `shardis node`
//! processes: a full sync of 10^5 keys of every type while a client keeps
//! writing, a replica killed and restarted, a short disconnect resumed from
//! the backlog, a promotion with the other replica repointed, WAIT, and a
//! replica too slow to keep up.

mod common;
#[path = "node_replication/support.rs"]
mod support;

use common::{connect, eventually, free_port, start_node, Raw};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

/// Loads `n` keys of mixed types (strings, some with a TTL, hashes, lists,
/// sets, sorted sets, streams) into the node on `port`.
fn load_mixed(port: u16, n: usize) {
    let mut con = connect(port);
    for start in (0..n).step_by(1000) {
        let mut p = redis::pipe();
        for i in start..(start + 1000).min(n) {
            let k = format!("k:{i}");
            match i % 8 {
                0..=2 => p.cmd("SET").arg(&k).arg(format!("v{i}")).ignore(),
                3 => p.cmd("SET").arg(&k).arg(i).arg("EX").arg(3600).ignore(),
                4 => p
                    .cmd("HSET")
                    .arg(&k)
                    .arg("a")
                    .arg(i)
                    .arg("b")
                    .arg("x")
                    .ignore(),
                5 => p.cmd("RPUSH").arg(&k).arg(1).arg(2).arg(i).ignore(),
                6 => p.cmd("SADD").arg(&k).arg("m").arg(i).ignore(),
                _ if i % 16 == 7 => p
                    .cmd("ZADD")
                    .arg(&k)
                    .arg(1.5)
                    .arg("a")
                    .arg(i)
                    .arg("b")
                    .ignore(),
                _ => p.cmd("XADD").arg(&k).arg("*").arg("f").arg(i).ignore(),
            };
        }
        let () = p.query(&mut con).unwrap();
    }
}

/// A client writing to `port` until `stop`: counts its writes and the
/// slowest reply it saw.
fn writer(
    port: u16,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    slowest_ms: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut con = connect(port);
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            let mut p = redis::pipe();
            p.cmd("SET").arg(format!("w:{}", i % 5000)).arg(i).ignore();
            p.cmd("INCR").arg("w:counter").ignore();
            p.cmd("LPUSH").arg("w:list").arg(i).ignore();
            p.cmd("HSET").arg("w:hash").arg(i % 100).arg(i).ignore();
            p.cmd("EXPIRE")
                .arg(format!("w:{}", i % 5000))
                .arg(1000)
                .ignore();
            p.cmd("DEL").arg(format!("k:{}", i * 7 % 20_000)).ignore();
            let () = p.query(&mut con).unwrap();
            slowest_ms.fetch_max(t.elapsed().as_millis() as u64, Ordering::Relaxed);
            writes.fetch_add(6, Ordering::Relaxed);
            i += 1;
            // A steady client, not a flood: the sync must not be a race for
            // the CPU with the writer.
            std::thread::sleep(Duration::from_micros(500));
        }
    })
}

#[test]
fn a_full_sync_of_a_hundred_thousand_keys_under_writes_ends_identical() {
    let (pp, rp) = (free_port(), free_port());
    let _primary = start_node(pp);
    load_mixed(pp, 100_000);
    let stop = Arc::new(AtomicBool::new(false));
    let (writes, slowest) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let w = writer(pp, stop.clone(), writes.clone(), slowest.clone());
    std::thread::sleep(Duration::from_millis(500));
    let before = writes.load(Ordering::Relaxed);
    let slowest_before = slowest.swap(0, Ordering::Relaxed);
    let started = Instant::now();
    let replica = start_replica(rp, &format!("127.0.0.1:{pp}"));
    eventually(60, "the link comes up", || {
        field(rp, "replication", "master_link_status") == "up"
    });
    let synced_in = started.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    w.join().unwrap();
    let during = writes.load(Ordering::Relaxed) - before;
    wait_synced(pp, rp, 30);
    let keys = assert_same_keyspace(pp, rp);
    eprintln!(
        "full sync of {keys} keys in {synced_in:?}; {during} writes meanwhile, slowest pipeline {} ms (before the sync: {slowest_before} ms)",
        slowest.load(Ordering::Relaxed)
    );
    // The writer deletes some of the first 20 000 loaded keys.
    assert!(keys > 80_000, "{keys}");
    assert!(during > 0, "the writer kept writing during the sync");
    assert_eq!(number(pp, "stats", "sync_full"), 1);
    assert_eq!(number(pp, "replication", "connected_slaves"), 1);
    replica.assert_no_panic();
}

#[test]
fn a_replica_killed_and_restarted_resyncs_in_full() {
    let (pp, rp) = (free_port(), free_port());
    let _primary = start_node(pp);
    load_mixed(pp, 5_000);
    let primary_addr = format!("127.0.0.1:{pp}");
    let mut replica = start_replica(rp, &primary_addr);
    wait_synced(pp, rp, 30);
    replica.kill();
    load_mixed(pp, 6_000);
    let mut p = Raw::connect(pp);
    p.check(&["SET", "after", "kill"], "+OK\r\n");
    let replica = start_replica(rp, &primary_addr);
    wait_synced(pp, rp, 30);
    assert_same_keyspace(pp, rp);
    assert_eq!(number(pp, "stats", "sync_full"), 2);
    drop(replica);
}

#[test]
fn a_short_disconnect_resumes_from_the_backlog() {
    let (pp, rp) = (free_port(), free_port());
    let _primary = start_node(pp);
    let relay = Relay::start(pp);
    load_mixed(pp, 2_000);
    let _replica = start_replica(rp, &format!("127.0.0.1:{}", relay.port));
    wait_synced(pp, rp, 30);
    relay.cut();
    let mut p = Raw::connect(pp);
    for i in 0..200 {
        p.check(&["SET", &format!("during:{i}"), "x"], "+OK\r\n");
    }
    wait_synced(pp, rp, 30);
    assert_same_keyspace(pp, rp);
    assert_eq!(number(pp, "stats", "sync_full"), 1);
    assert_eq!(number(pp, "stats", "sync_partial_ok"), 1);
    assert_eq!(number(pp, "stats", "sync_partial_err"), 0);
}

#[test]
fn a_promoted_replica_serves_the_other_with_a_partial_resync() {
    let (pp, ap, bp) = (free_port(), free_port(), free_port());
    let mut primary = start_node(pp);
    load_mixed(pp, 3_000);
    let addr = format!("127.0.0.1:{pp}");
    let _a = start_replica(ap, &addr);
    let _b = start_replica(bp, &addr);
    wait_synced(pp, ap, 30);
    wait_synced(pp, bp, 30);
    let old_id = field(pp, "replication", "master_replid");
    primary.kill();
    eventually(10, "the replicas see their primary down", || {
        field(ap, "replication", "master_link_status") == "down"
    });
    let mut a = Raw::connect(ap);
    a.check(&["REPLICAOF", "NO", "ONE"], "+OK\r\n");
    let info = info(ap, "replication");
    assert_eq!(info["role"], "master");
    assert_eq!(info["master_replid2"], old_id);
    let offset: i64 = info["master_repl_offset"].parse().unwrap();
    assert_eq!(info["second_repl_offset"], (offset + 1).to_string());
    a.check(&["SET", "after", "promotion"], "+OK\r\n");
    let mut b = Raw::connect(bp);
    b.check(&["REPLICAOF", "127.0.0.1", &ap.to_string()], "+OK\r\n");
    wait_synced(ap, bp, 30);
    assert_eq!(number(ap, "stats", "sync_partial_ok"), 1);
    assert_eq!(number(ap, "stats", "sync_full"), 0);
    assert_eq!(
        field(bp, "replication", "master_replid"),
        field(ap, "replication", "master_replid")
    );
    b.check(&["GET", "after"], "$9\r\npromotion\r\n");
    assert_same_keyspace(ap, bp);
}

#[test]
fn wait_counts_the_replicas_that_acknowledged() {
    let (pp, ap, bp) = (free_port(), free_port(), free_port());
    let _primary = start_node(pp);
    let addr = format!("127.0.0.1:{pp}");
    let mut p = Raw::connect(pp);
    p.check(&["WAIT", "0", "0"], ":0\r\n");
    let t = Instant::now();
    p.check(&["WAIT", "1", "200"], ":0\r\n");
    assert!(
        t.elapsed() >= Duration::from_millis(190),
        "{:?}",
        t.elapsed()
    );
    let _a = start_replica(ap, &addr);
    let mut b = start_replica(bp, &addr);
    wait_synced(pp, ap, 30);
    wait_synced(pp, bp, 30);
    p.check(&["SET", "k", "v"], "+OK\r\n");
    let t = Instant::now();
    p.check(&["WAIT", "2", "5000"], ":2\r\n");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    p.check(&["WAIT", "3", "300"], ":2\r\n");
    b.kill();
    p.check(&["SET", "k", "w"], "+OK\r\n");
    eventually(10, "the primary notices", || {
        number(pp, "replication", "connected_slaves") == 1
    });
    p.check(&["WAIT", "2", "300"], ":1\r\n");
    let mut a = Raw::connect(ap);
    let e = a.call(&["WAIT", "1", "0"]);
    assert!(
        e.starts_with("-ERR WAIT cannot be used with replica instances"),
        "{e}"
    );
}

#[test]
fn a_replica_that_stops_reading_is_cut_off_and_holds_bounded_memory() {
    let pp = free_port();
    let _primary = start_node(pp);
    let mut p = Raw::connect(pp);
    p.check(
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 2mb 1mb 1",
        ],
        "+OK\r\n",
    );
    // A replica that asks for the stream and never reads it.
    let mut stuck = Raw::connect(pp);
    stuck.check(&["REPLCONF", "listening-port", "1"], "+OK\r\n");
    stuck.send(&[b"PSYNC", b"?", b"-1"]);
    eventually(10, "the replica is attached", || {
        number(pp, "replication", "connected_slaves") == 1
    });
    let big = "x".repeat(64 * 1024);
    for i in 0..200 {
        p.check(&["SET", &format!("big:{i}"), &big], "+OK\r\n");
    }
    eventually(10, "the stuck replica is cut off", || {
        number(pp, "replication", "connected_slaves") == 0
    });
    let histlen = number(pp, "replication", "repl_backlog_histlen");
    assert!(histlen <= 1024 * 1024, "the backlog shrank back: {histlen}");
}

#[test]
fn a_replica_whose_primary_dies_reports_the_link_down_and_reconnects() {
    let (pp, rp) = (free_port(), free_port());
    let mut primary = start_node(pp);
    Raw::connect(pp).check(&["SET", "a", "1"], "+OK\r\n");
    let _replica = start_replica(rp, &format!("127.0.0.1:{pp}"));
    wait_synced(pp, rp, 30);
    primary.kill();
    eventually(10, "the link is down", || {
        field(rp, "replication", "master_link_status") == "down"
    });
    let role = Raw::connect(rp).call(&["ROLE"]);
    assert!(
        role.contains("\r\n$5\r\nslave\r\n") || role.starts_with("*5\r\n$5\r\nslave"),
        "{role}"
    );
    assert!(role.ends_with(":-1\r\n"), "no offset while down: {role}");
    // Still serving its data meanwhile, as replica-serve-stale-data yes.
    Raw::connect(rp).check(&["GET", "a"], "$1\r\n1\r\n");
    let _primary = start_node(pp);
    Raw::connect(pp).check(&["SET", "b", "2"], "+OK\r\n");
    wait_synced(pp, rp, 30);
    Raw::connect(rp).check(&["GET", "a"], "$-1\r\n");
    Raw::connect(rp).check(&["GET", "b"], "$1\r\n2\r\n");
}
