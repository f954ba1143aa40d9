//! A primary that still accepts connections but has stopped answering
//! (SIGSTOP) is found down by its clients' failed requests: with probes so
//! patient (`probe_timeout_ms = 5000`) that they alone would take 15 s, the
//! requests that time out after `request_timeout_ms` feed the detector and
//! the shard fails over within about `down_after_timeouts` of them. The
//! stalled primary, resumed (SIGCONT), rejoins as a replica of the new one.
//! Timings are printed, not asserted.

mod common;
mod ha;

use std::time::Duration;

use common::*;
use ha::*;

fn signal(p: &Proc, sig: libc::c_int) {
    // SAFETY: kill(2) on a child this test started and still owns.
    unsafe {
        libc::kill(p.pid() as libc::pid_t, sig);
    }
}

#[test]
fn a_primary_that_stops_answering_is_failed_over_by_its_clients_timeouts() {
    let (pp, rp) = (free_port(), free_port());
    let p = builtin_with(pp, &[]);
    let _r = builtin_with(rp, &[]);
    let (primary, replica) = (format!("127.0.0.1:{pp}"), format!("127.0.0.1:{rp}"));
    let extra = "[failover]\nprobe_timeout_ms = 5000\ndown_after_timeouts = 3\n";
    let dir = tempdir::Dir::new();
    let port = free_port();
    let cfg = format!(
        "[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 300\nrequest_timeout_ms = 300\n{extra}\n[[nodes]]\naddr = \"{primary}\"\nname = \"node1\"\nreplicas = [\"{replica}\"]\n"
    );
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, cfg).unwrap();
    let proxy = start_proxy_with(&path, port);
    let mut con = connect(port);
    wait_ring(&mut con, 15, "the replica follows its primary", |r| {
        is_synced_replica(r, &replica)
    });
    let mut stopped_at = None;
    let w = write_for(port, "s", Duration::from_millis(4_000), |i| {
        if i == 200 {
            signal(&p, libc::SIGSTOP);
            stopped_at = Some(std::time::Instant::now());
        }
    });
    let r = wait_ring(&mut con, 10, "the replica is the primary", |r| {
        r.contains(&format!("node1 {replica} "))
    });
    assert!(
        r.contains(&format!("{primary} {primary} replica_of=node1")),
        "{r}"
    );
    assert_eq!(info_field(&mut con, "failovers"), "1");
    eprintln!(
        "SIGSTOP: {} acknowledged, {} errors, failover window {:?} (request_timeout_ms 300, probe_timeout_ms 5000)",
        w.acked.len(),
        w.errors,
        w.window
    );
    assert!(
        w.window.is_some(),
        "writes failed and resumed within 4 s of SIGSTOP ({} errors, last: {})",
        w.errors,
        w.last_error
    );
    // Resumed, the old primary is told to follow the new one and resyncs.
    signal(&p, libc::SIGCONT);
    wait_ring(
        &mut con,
        20,
        "the resumed primary rejoins as a synced replica",
        |r| is_synced_replica(r, &primary),
    );
    let v: Option<String> = redis::cmd("GET").arg("s:1").query(&mut con).unwrap();
    assert_eq!(v.as_deref(), Some("1"));
    drop(proxy);
}
