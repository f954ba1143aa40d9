//! The copy phase's pace (`migration.copy_rate`): an adaptive join under
//! client load ends with every key readable with its value, and `CLUSTER
//! RINGINFO` shows the pace the copy took.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use common::writers::{check, Writers};
use common::*;

/// Readers that GET random preloaded keys (`user:{i}` = `v{i}`) until told
/// to stop: (reads, wrong or missing values).
fn readers(
    port: u16,
    n: usize,
    count: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<JoinHandle<(u64, u64)>> {
    (0..count)
        .map(|r| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut con = connect(port);
                let (mut reads, mut bad) = (0u64, 0u64);
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (r as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = x as usize % n;
                    let got: Option<String> = redis::cmd("GET")
                        .arg(format!("user:{i}"))
                        .query(&mut con)
                        .unwrap();
                    reads += 1;
                    if got.as_deref() != Some(format!("v{i}").as_str()) {
                        bad += 1;
                        eprintln!("user:{i} read {got:?}");
                    }
                }
                (reads, bad)
            })
        })
        .collect()
}

#[test]
fn an_adaptive_join_under_client_load_loses_no_key() {
    let n = 20_000;
    let mut c = Cluster::over(
        Backend::Builtin.nodes(4),
        "[migration]\ncopy_rate = \"adaptive\"\nbatch = 100\n",
    );
    let port = c.proxy.port;
    let mut con = c.client();
    mset_keys(&mut con, "user:", n);
    let stop = Arc::new(AtomicBool::new(false));
    let reading = readers(port, n, 4, &stop);
    let writers = Writers::start(&[port, port]);
    // The load runs before the change, so the pace measures its baseline.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let extra = start_node(free_port());
    add_node(&mut con, &extra.addr(), "node5");
    let mut modes = Vec::new();
    let info = poll_until(
        120,
        "state:ok",
        || {
            let i = cluster_info(&mut con);
            if ring_field(&i, "state") == "copying" {
                modes.push(ring_field(&i, "migration_copy_rate_mode"));
            }
            i
        },
        |i| ring_field(i, "state") == "ok",
    );
    stop.store(true, Ordering::Relaxed);
    let (mut reads, mut bad) = (0, 0);
    for r in reading {
        let (a, b) = r.join().unwrap();
        reads += a;
        bad += b;
    }
    let (known, acked, _) = writers.finish();

    assert!(modes.iter().all(|m| m == "adaptive"), "{modes:?}");
    assert_eq!(ring_field(&info, "migration_copy_rate_mode"), "adaptive");
    let rate: u64 = ring_field(&info, "migration_copy_rate_keys_per_sec")
        .parse()
        .unwrap_or_else(|_| panic!("a number of keys/s: {info}"));
    assert!(rate >= 1_000, "the rate never goes under its floor: {info}");
    let copied: i64 = ring_field(&info, "migration_keys_copied").parse().unwrap();
    assert!(
        copied > n as i64 / 10,
        "a fifth node takes about a fifth: {info}"
    );
    eprintln!("copied {copied} keys, last rate {rate} keys/s, {reads} reads during the change");

    assert!(
        reads > 0 && acked > 0,
        "the clients ran: {reads} reads, {acked} writes"
    );
    assert_eq!(bad, 0, "every read during the change saw its value");
    assert_eq!(
        mset_keys_readable(&mut con, "user:", n),
        n,
        "every key readable after the join"
    );
    assert_eq!(
        check(port, &known),
        (0, 0),
        "no acknowledged write lost, no delete undone"
    );
    c.nodes.push(extra);
}

#[test]
fn ringinfo_names_an_unlimited_and_a_fixed_pace() {
    let c = Cluster::over(
        Backend::Builtin.nodes(2),
        "[migration]\ncopy_rate = \"unlimited\"\n",
    );
    let info = cluster_info(&mut c.client());
    assert_eq!(ring_field(&info, "migration_copy_rate_mode"), "unlimited");
    assert_eq!(
        ring_field(&info, "migration_copy_rate_keys_per_sec"),
        "unlimited"
    );
    assert_eq!(ring_field(&info, "migration_client_latency_ratio"), "-");

    let c = Cluster::over(
        Backend::Builtin.nodes(2),
        "[migration]\ncopy_rate = \"unlimited\"\nmax_keys_per_sec = 5000\n",
    );
    let info = cluster_info(&mut c.client());
    assert_eq!(ring_field(&info, "migration_copy_rate_mode"), "fixed");
    assert_eq!(
        ring_field(&info, "migration_copy_rate_keys_per_sec"),
        "5000"
    );

    // The default is unlimited (the adaptive pace is chosen in the file).
    let c = Cluster::builtin(2);
    let info = cluster_info(&mut c.client());
    assert_eq!(ring_field(&info, "migration_copy_rate_mode"), "unlimited");
    assert_eq!(
        ring_field(&info, "migration_copy_rate_keys_per_sec"),
        "unlimited"
    );
}
