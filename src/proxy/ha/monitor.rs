//! The failure detector's probes: one task per shard member, which reads
//! `INFO replication` on its own connection every `probe_interval_ms`
//! (backing off with jitter while the member is down) — a primary's probe
//! raced with its clients' request failures, so one that accepts
//! connections but no longer answers is found down without waiting out a
//! slow probe — records what it says
//! and, on a verdict, acts: a primary found down gets its pool's policy
//! (`failover.rs`), a replica that does not follow its shard's primary is
//! told to (`REPLICAOF`), an ejected primary that answers again is put back.
//!
//! Started by `Proxy::start_ha` and again after a member is added; a task
//! ends when its address is no longer a member or the proxy is gone. Never
//! touches the routing snapshot itself.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::client::{ClientError, Conn, TlsTo};
use crate::proxy::config::ha::{FailoverMode, OnPrimaryDown};
use crate::proxy::ha::status::{parse_info, Detector, Liveness, Probe, ReplInfo, Role};
use crate::proxy::ha::{call, failover};
use crate::proxy::upstream::credentials::Credentials;
use crate::proxy::Proxy;

/// What an address is to the pool right now.
pub(crate) struct Member {
    pub(crate) shard: String,
    /// `None` for the primary; the primary's address for a replica.
    pub(crate) primary: Option<String>,
}

/// The role `addr` plays in the pool, if it is a member at all (an ejected
/// primary still is: it is probed so that it can be put back).
pub(crate) fn member(proxy: &Proxy, addr: &str) -> Option<Member> {
    let routing = proxy.routing.load();
    // A shard being added is in the next ring only.
    let next = routing.next_nodes();
    if let Some(n) = routing
        .ring
        .nodes()
        .iter()
        .chain(next)
        .find(|n| n.addr == addr)
    {
        return Some(Member {
            shard: n.name.clone(),
            primary: None,
        });
    }
    let ejected = proxy.ha.ejected.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = ejected.iter().find(|n| n.addr == addr) {
        return Some(Member {
            shard: n.name.clone(),
            primary: None,
        });
    }
    drop(ejected);
    let shard = proxy.ha.shard_of_replica(addr)?;
    let primary = routing
        .ring
        .nodes()
        .iter()
        .chain(next)
        .find(|n| n.name == shard)
        .map(|n| n.addr.clone())?;
    Some(Member {
        shard,
        primary: Some(primary),
    })
}

/// Starts a probe task for every member that has none. Nothing is probed
/// while no shard has a replica and the policy is not `remap`: the pool then
/// behaves exactly as one without replicas.
pub(crate) fn start(proxy: &Arc<Proxy>) {
    let ha = &proxy.ha;
    if !ha.has_replicas() && ha.config.on_primary_down != OnPrimaryDown::Remap {
        return;
    }
    let routing = proxy.routing.load();
    let next = routing.next_nodes();
    let ring = routing.ring.nodes().iter().chain(next);
    let mut addrs: Vec<String> = ring.map(|n| n.addr.clone()).collect();
    addrs.extend(ha.all_replicas().into_values().flatten());
    for addr in addrs {
        if ha.start_probing(&addr) {
            tokio::spawn(probe_loop(Arc::downgrade(proxy), addr));
        }
    }
}

async fn probe_loop(proxy: Weak<Proxy>, addr: String) {
    let mut conn: Option<Conn> = None;
    let seed = addr.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut detector = Detector::new(seed);
    // The primary's request failures counted up to its last answered probe.
    let mut baseline: Option<u64> = None;
    loop {
        let Some(p) = proxy.upgrade() else { return };
        let Some(m) = member(&p, &addr) else {
            p.ha.stop_probing(&addr);
            return;
        };
        let config = p.ha.config;
        let timeout = Duration::from_millis(config.probe_timeout_ms);
        let creds = crate::proxy::ha::call::creds(&p, &m.shard);
        let tls = crate::proxy::ha::call::tls(&p, &m.shard);
        let (outcome, info) = {
            let login = (tls.as_deref(), creds.as_deref());
            let probed = probe(&mut conn, &addr, login, timeout);
            match m.primary {
                Some(_) => probed.await,
                None => watch_requests(&p, &addr, probed, &mut baseline).await,
            }
        };
        if outcome == Probe::RequestsFailed {
            // The probe was abandoned half way: its connection is unusable.
            conn = None;
        }
        let before = detector.state;
        let verdict = detector.observe(outcome, &config);
        let status = p.ha.status(&addr);
        status.set_liveness(verdict);
        if let Some(info) = &info {
            status.record(info);
        }
        if verdict != before && before != Liveness::Unknown {
            tracing::info!(member = %addr, shard = %m.shard, from = before.as_str(), to = verdict.as_str(), "member liveness changed");
        }
        match (&m.primary, verdict) {
            (None, Liveness::Down) => {
                let (p, addr) = (p.clone(), addr.clone());
                tokio::spawn(async move { failover::primary_down(&p, &m.shard, &addr).await });
            }
            (None, Liveness::Up) => failover::primary_up(&p, &m.shard, &addr).await,
            (Some(primary), Liveness::Up) => {
                if let Some(info) = &info {
                    follow(&p, &m.shard, &addr, primary, info).await;
                }
            }
            _ => {}
        }
        let delay = detector.next_delay(&config);
        drop(p);
        tokio::time::sleep(delay).await;
    }
}

/// Request failures (replies that timed out, connections lost or refused)
/// on the pooled upstream connections to `addr` as a shard's primary, ever.
fn request_failures(proxy: &Proxy, addr: &str) -> Option<u64> {
    let routing = proxy.routing.load();
    let node = routing
        .shards
        .iter()
        .map(|s| s.primary())
        .find(|n| n.spec.addr == addr)?;
    Some(
        node.health
            .failures
            .load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// A primary's probe, raced with the clients' requests: while the probe
/// waits for its reply (a node that accepts connections but has stopped
/// answering keeps it waiting for the whole `probe_timeout_ms`), every
/// `probe_interval_ms` the primary's request failures since its last
/// answered probe are counted, and `down_after_timeouts` of them end the
/// wait as [`Probe::RequestsFailed`]. An answered probe moves the baseline:
/// a node that answers is not failed over for its clients' timeouts alone.
async fn watch_requests(
    proxy: &Proxy,
    addr: &str,
    probed: impl std::future::Future<Output = (Probe, Option<ReplInfo>)>,
    baseline: &mut Option<u64>,
) -> (Probe, Option<ReplInfo>) {
    let config = proxy.ha.config;
    let base = *baseline.get_or_insert_with(|| request_failures(proxy, addr).unwrap_or(0));
    let every = Duration::from_millis(config.probe_interval_ms);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tokio::pin!(probed);
    let result = loop {
        tokio::select! {
            r = &mut probed => break r,
            _ = tick.tick() => {
                let now = request_failures(proxy, addr).unwrap_or(base);
                // A new primary's connections count from zero.
                let failed = now.checked_sub(base).unwrap_or(now);
                if failed >= u64::from(config.down_after_timeouts) {
                    break (Probe::RequestsFailed, None);
                }
            }
        }
    };
    let now = request_failures(proxy, addr);
    match result.0 {
        Probe::Answered => *baseline = now,
        _ if now.is_some_and(|n| n < base) => *baseline = now,
        _ => {}
    }
    result
}

/// One `INFO replication` on the member's probe connection, reconnecting
/// once when the connection broke: a killed node shows as a refused connect.
async fn probe(
    conn: &mut Option<Conn>,
    addr: &str,
    (tls, creds): (Option<&TlsTo>, Option<&Credentials>),
    timeout: Duration,
) -> (Probe, Option<ReplInfo>) {
    for _ in 0..2 {
        let fresh = conn.is_none();
        if conn.is_none() {
            match call::connect(addr, tls, creds, timeout).await {
                Ok(c) => *conn = Some(c),
                Err(e) => return (classify(&e), None),
            }
        }
        let Some(c) = conn.as_mut() else { break };
        let call = c.call(&[b"INFO", b"replication"]);
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(reply)) => {
                let text = String::from_utf8_lossy(&reply);
                return (Probe::Answered, Some(parse_info(&text)));
            }
            Ok(Err(e)) => {
                *conn = None;
                if e.is_read_timeout() || fresh {
                    return (classify(&e), None);
                }
            }
            Err(_) => {
                *conn = None;
                return (Probe::TimedOut, None);
            }
        }
    }
    (Probe::TimedOut, None)
}

fn classify(e: &ClientError) -> Probe {
    match e {
        ClientError::Connect { err, .. } if err.kind() == std::io::ErrorKind::ConnectionRefused => {
            Probe::Refused
        }
        ClientError::Closed => Probe::Refused,
        _ => Probe::TimedOut,
    }
}

/// A replica that is not replicating from its shard's primary (a returning
/// old primary, a replica the failover could not repoint, one just added)
/// is told to, once the primary is up and answers as a master. Its full
/// sync replaces whatever it held, so a key deleted while it was away
/// cannot come back; reads skip it until it is in sync.
async fn follow(proxy: &Arc<Proxy>, shard: &str, addr: &str, primary: &str, info: &ReplInfo) {
    if info.role == Role::Replica && info.master.as_deref() == Some(primary) {
        return;
    }
    // Under Sentinel, Sentinel repoints replicas; the proxy only watches.
    if proxy.ha.is_failing(shard) || proxy.ha.config.mode == FailoverMode::Sentinel {
        return;
    }
    let p = proxy.ha.status(primary);
    if p.liveness() != Liveness::Up || p.role() != Role::Master {
        return;
    }
    let timeout = Duration::from_millis(proxy.ha.config.probe_timeout_ms.max(500));
    let r = call::repoint(proxy, shard, addr, primary, timeout).await;
    match r {
        Ok(reply) if !crate::resp::reply::is_error(&reply) => {
            proxy.ha.note(format!(
                "{addr} ({shard}) was not following its primary: now a replica of {primary}"
            ));
        }
        Ok(reply) => {
            tracing::warn!(member = %addr, reply = %String::from_utf8_lossy(&reply).trim_end(), "REPLICAOF refused")
        }
        Err(e) => tracing::warn!(member = %addr, error = %e, "REPLICAOF failed"),
    }
}
