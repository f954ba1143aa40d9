//! Byte budgets: what one client, or a node, can make the proxy hold.
//!
//! * a client that pipelines reads of large values and never reads the
//!   replies is closed at its output hard limit, and the proxy stays small;
//! * such a stuck client does not hold up another client of the same node;
//! * a node announcing a reply longer than `proto-max-bulk-len` poisons only
//!   its own connection, with an error that says so;
//! * over the proxy-wide query buffer total, the client with the largest
//!   buffer is closed and the others go on;
//! * over the proxy-wide total of owed replies, the clients owing the most
//!   are closed, the proxy stays under that total, and the others go on.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use redis::Commands;

const MB: usize = 1024 * 1024;

/// Stores a 1 MB value at `key` through the proxy.
fn store_big(port: u16, key: &str) {
    let mut con = connect(port);
    let _: () = con.set(key, vec![b'x'; MB]).unwrap();
}

/// The proxy's peak RSS, sampled every 2 ms on a thread of its own.
struct PeakRss {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl PeakRss {
    fn sample(pid: u32) -> PeakRss {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            let end = Instant::now() + Duration::from_secs(120);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < end {
                peak = peak.max(rss_bytes(pid));
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        });
        PeakRss { done, thread }
    }

    /// Stops sampling; the peak seen.
    fn stop(self) -> u64 {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// Pipelines `n` GETs of `key` on a new connection that never reads.
fn stuck_client(port: u16, key: &str, n: usize) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let get = format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len());
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(get.repeat(n).as_bytes()).unwrap();
    s
}

#[test]
fn a_client_that_never_reads_is_closed_at_its_output_limit_and_the_proxy_stays_small() {
    const HARD: usize = 32 * MB;
    let node = start_node(free_port());
    let extra = format!("client_output_hard_limit = {HARD}\nclient_output_soft_limit = 0");
    let c = Cluster::over(vec![node], &extra);
    store_big(c.proxy.port, "big");
    let pid = c.proxy.pid();
    let before = rss_bytes(pid);
    let sampler = PeakRss::sample(pid);
    let mut stuck = stuck_client(c.proxy.port, "big", 2_000);
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_number(
        c.proxy.port,
        "stats",
        "client_output_buffer_limit_disconnections",
    ) == 0
    {
        if Instant::now() > deadline {
            let peak = sampler.stop();
            panic!(
                "the stuck client was never closed (peak RSS {} MB)",
                peak / MB as u64
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the node's remaining replies (for a closed client) pass through.
    std::thread::sleep(Duration::from_secs(1));
    let peak = sampler.stop();
    // What the kernel buffered reaches the client, then the close (no reply
    // of ours: the client was not reading).
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let _ = stuck.read_to_end(&mut got);
    assert!(got.len() < 2_000 * MB, "the stuck client got everything");
    // The bound: the hard limit, one reply being assembled, one write batch,
    // and allocator slack; without the limit the proxy held about 1 GB here.
    let bound = before + 2 * HARD as u64 + 64 * MB as u64;
    eprintln!(
        "proxy RSS before {} MB, peak {} MB, bound {} MB",
        before / MB as u64,
        peak / MB as u64,
        bound / MB as u64
    );
    assert!(peak < bound, "peak RSS {peak} over {bound}");
    // Everybody else is served as before, once the node has worked through
    // the requests the closed client had sent (the shared connection is
    // FIFO; with a 2 s request timeout the first tries may time out).
    let mut con = c.client();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match con.get::<_, Vec<u8>>("big") {
            Ok(v) => break assert_eq!(v.len(), MB),
            Err(e) => assert!(Instant::now() < deadline, "{e}"),
        }
    }
}

#[test]
fn a_stuck_client_does_not_hold_up_another_client_of_the_same_node() {
    let node = start_node(free_port());
    let c = Cluster::over(vec![node], "");
    store_big(c.proxy.port, "big");
    let mut con = c.client();
    let _: () = con.set("small", "v").unwrap();
    // 200 MB of replies owed to a client that does not read them.
    let _stuck = stuck_client(c.proxy.port, "big", 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    while rss_bytes(c.proxy.pid()) < 150 * MB as u64 {
        assert!(
            Instant::now() < deadline,
            "the proxy never held the replies"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let v: String = con.get("small").unwrap();
    let took = t.elapsed();
    assert_eq!(v, "v");
    eprintln!("GET behind 200 MB owed to a stuck client took {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_reply_longer_than_proto_max_bulk_len_poisons_only_its_node() {
    let (fake_port, stop) = fake_node(b"$1099511627776\r\n", Duration::ZERO);
    let good = start_node(free_port());
    let dir = tempdir::Dir::new();
    let nodes = [format!("127.0.0.1:{fake_port}"), good.addr()];
    let (path, port) = write_proxy_config(&dir, &nodes, "");
    let proxy = start_proxy_with(&path, port);
    let mut con = connect(port);
    let owner = keynode;
    let keys: Vec<String> = (0..100).map(|i| format!("k:{i}")).collect();
    let bad = keys.iter().find(|k| owner(&mut con, k) == "node1").unwrap();
    let fine = keys.iter().find(|k| owner(&mut con, k) == "node2").unwrap();
    let before = rss_bytes(proxy.pid());
    let t = Instant::now();
    let err = con.get::<_, Option<String>>(bad).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "node node1 (127.0.0.1:{fake_port}) is unavailable"
        )) && err.contains("bulk length 1099511627776 is over proto-max-bulk-len (536870912)"),
        "{err}"
    );
    // Refused from its header: not after the request timeout (2 s).
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(rss_bytes(proxy.pid()) < before + 16 * MB as u64);
    let _: () = con.set(fine, "v").unwrap();
    let v: String = con.get(fine).unwrap();
    assert_eq!(v, "v");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn over_the_proxy_wide_query_buffer_total_the_largest_buffer_is_closed() {
    let node = start_node(free_port());
    let c = Cluster::over(vec![node], &format!("max_query_buffer_total = {}", 6 * MB));
    let port = c.proxy.port;
    // A client sends part of a SET of `len` bytes: `held` bytes of it.
    let partial = |key: &str, len: usize, held: usize| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(format!("*3\r\n$3\r\nSET\r\n$2\r\n{key}\r\n${len}\r\n").as_bytes())
            .unwrap();
        s.write_all(&vec![b'x'; held]).unwrap();
        s
    };
    let buffered = || info_number(port, "clients", "shardis_query_buffer_bytes") as usize;
    let wait_buffered = |at_least: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while buffered() < at_least {
            assert!(
                Instant::now() < deadline,
                "the proxy never buffered {at_least}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut largest = partial("k1", 8 * MB, 4 * MB);
    wait_buffered(4 * MB);
    // 4 MB + 2.5 MB is over the 6 MB total: the largest buffer goes.
    let mut smaller = partial("k2", 3 * MB, 5 * MB / 2);
    let got = read_to_close(&mut largest);
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-ERR Protocol error: proxy-wide query buffer limit reached (this client held the largest buffer)\r\n"
    );
    // The smaller one completes its request; other clients never noticed.
    smaller.write_all(&vec![b'x'; MB / 2]).unwrap();
    smaller.write_all(b"\r\n").unwrap();
    assert_eq!(read_n(&mut smaller, 5).unwrap(), b"+OK\r\n");
    let mut con = c.client();
    let v: Vec<u8> = con.get("k2").unwrap();
    assert_eq!(v.len(), 3 * MB);
    assert_eq!(
        info_number(port, "stats", "client_query_buffer_limit_disconnections"),
        1
    );
    assert!(buffered() < 64 * 1024, "buffers given back: {}", buffered());
}

#[test]
fn a_client_over_its_soft_limit_for_too_long_is_closed() {
    let node = start_node(free_port());
    let extra = format!(
        "client_output_hard_limit = 0\nclient_output_soft_limit = {}\nclient_output_soft_seconds = 1",
        8 * MB
    );
    let c = Cluster::over(vec![node], &extra);
    store_big(c.proxy.port, "big");
    let t = Instant::now();
    let _stuck = stuck_client(c.proxy.port, "big", 100);
    let closes = || {
        info_number(
            c.proxy.port,
            "stats",
            "client_output_buffer_limit_disconnections",
        )
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while closes() == 0 {
        assert!(Instant::now() < deadline, "never closed");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Over the soft limit is allowed for its second, not less.
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(closes(), 1);
}

#[test]
fn a_client_over_its_query_buffer_limit_is_answered_and_closed() {
    let node = start_node(free_port());
    let c = Cluster::over(vec![node], &format!("max_query_buffer = {MB}"));
    let mut s = TcpStream::connect(("127.0.0.1", c.proxy.port)).unwrap();
    s.write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", 4 * MB).as_bytes())
        .unwrap();
    // The proxy may close before it has read all of this: ignore the error.
    let _ = s.write_all(&vec![b'x'; 2 * MB]);
    assert_eq!(
        String::from_utf8_lossy(&read_to_close(&mut s)),
        "-ERR Protocol error: query buffer limit reached\r\n"
    );
    assert_eq!(
        info_number(
            c.proxy.port,
            "stats",
            "client_query_buffer_limit_disconnections"
        ),
        1
    );
    let mut con = c.client();
    let _: () = con.set("k", "v").unwrap();
}

#[test]
fn over_the_reply_total_the_clients_owing_most_are_closed_and_others_are_served() {
    const TOTAL: usize = 64 * MB;
    const STUCK: usize = 10;
    let nodes = [start_node(free_port()), start_node(free_port())];
    // No per-client limits: the total alone keeps the proxy small. A long
    // request timeout: the node works through every GET sent before the
    // clients were closed, and a timeout would answer the rest with errors.
    let admin = format!("127.0.0.1:{}", free_port());
    let port = free_port();
    let dir = tempdir::Dir::new();
    let mut cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\nrequest_timeout_ms = 60000\n\
         max_output_buffer_total = {TOTAL}\nclient_output_hard_limit = 0\nclient_output_soft_limit = 0\n\
         [admin]\nlisten = \"{admin}\"\n"
    );
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    cfg.push_str(&nodes_toml(&addrs));
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    let proxy = start_proxy_with(&path, port);
    let mut con = connect(port);
    let start = rss_bytes(proxy.pid());
    let keys: Vec<String> = (0..100).map(|i| format!("k:{i}")).collect();
    let big = keys
        .iter()
        .find(|k| keynode(&mut con, k) == "node1")
        .unwrap();
    let small = keys
        .iter()
        .find(|k| keynode(&mut con, k) == "node2")
        .unwrap();
    store_big(port, big);
    let _: () = con.set(small, "v").unwrap();
    let sampler = PeakRss::sample(proxy.pid());
    // Ten clients ask for 150 MB each (more than the total, and than the
    // kernel's socket buffers take) and read nothing.
    let mut stuck: Vec<TcpStream> = (0..STUCK).map(|_| stuck_client(port, big, 150)).collect();
    // Meanwhile a client of the other node is served throughout.
    let evicted = || info_number(port, "stats", "evicted_clients") as usize;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut served = 0;
    loop {
        let v: String = con.get(small).unwrap();
        assert_eq!(v, "v");
        served += 1;
        if evicted() == STUCK {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {STUCK} stuck clients closed",
            evicted()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let peak = sampler.stop();
    let grown = peak.saturating_sub(start);
    eprintln!(
        "{STUCK} stuck clients closed; proxy RSS {} MB at start, peak {} MB (total {} MB); {served} GETs served meanwhile",
        start / MB as u64,
        peak / MB as u64,
        TOTAL / MB
    );
    // The total, plus a reply being read and allocator slack; without the
    // total the proxy took 1.5 GB here.
    assert!(
        grown < (TOTAL + 16 * MB) as u64,
        "RSS grew by {grown}, over the total {TOTAL}"
    );
    for s in &mut stuck {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        assert!(got.len() < 150 * MB, "a stuck client got everything");
    }
    // Nothing is owed once they are gone (replies still arriving for them
    // are dropped uncounted), and nobody else was closed.
    let owed = info_number(port, "clients", "shardis_reply_bytes_owed");
    assert!(owed < MB as u64, "still owed: {owed}");
    assert_eq!(
        info_number(port, "stats", "client_output_buffer_limit_disconnections"),
        0
    );
    let v: String = con.get(small).unwrap();
    assert_eq!(v, "v");
    let metrics = http::get(&admin, "/metrics").text();
    assert_eq!(
        http::sample(&metrics, "shardis_clients_evicted_total"),
        STUCK as f64
    );
}
