//! Sentinel mode (`[failover] mode = "sentinel"`): Redis Sentinel is the
//! failover authority, and the proxy follows it without taking any one
//! Sentinel's word. Every `SENTINEL_POLL_MS`, and at once when a Sentinel
//! publishes `+switch-master`, each shard's primary is asked of every
//! configured Sentinel (`SENTINEL get-master-addr-by-name <master_name>`);
//! an address named by a majority of them (more than half of the list, not
//! of those that answered) that differs from the routed primary must answer
//! `ROLE` as a master before the routing snapshot is swapped to it. A
//! Sentinel that keeps advertising a dead or demoted primary is outvoted;
//! with no majority nothing changes. Each round also asks every Sentinel
//! for the shard's replicas (`SENTINEL replicas <master_name>`): the
//! addresses more than half of them list become the shard's replicas (reads,
//! probes, `CLUSTER RING`), so a replica added to or dropped from the
//! Sentinels' view needs no change of the proxy's config.
//!
//! Started by `Proxy::run` beside the probes; in this mode the probes only
//! observe (liveness, offsets, reads from replicas): the proxy never sends
//! `REPLICAOF` itself. Never holds a lock across `.await`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use crate::client::Conn;
use crate::proxy::ha::status::role_is_master;
use crate::proxy::ha::{call, failover};
use crate::proxy::Proxy;
use crate::resp::reply::elements;

/// Between two rounds of questions to the Sentinels.
const SENTINEL_POLL_MS: u64 = 500;
/// A Sentinel that does not answer within this is not counted.
const SENTINEL_TIMEOUT_MS: u64 = 500;
/// A subscription with nothing to read for this long is reopened.
const SUBSCRIBE_IDLE_MS: u64 = 60_000;
/// Between attempts to subscribe to a Sentinel that is down.
const SUBSCRIBE_RETRY_MS: u64 = 1_000;

/// Starts the poller and one `+switch-master` subscriber per Sentinel.
pub(crate) fn start(proxy: &Arc<Proxy>) {
    let wake = Arc::new(Notify::new());
    for addr in &proxy.config().sentinel.addrs {
        tokio::spawn(subscribe(Arc::downgrade(proxy), addr.clone(), wake.clone()));
    }
    tokio::spawn(poll(Arc::downgrade(proxy), wake));
}

async fn poll(proxy: Weak<Proxy>, wake: Arc<Notify>) {
    loop {
        let Some(p) = proxy.upgrade() else { return };
        for (shard, name) in &p.config().sentinel.masters {
            follow_majority(&p, shard, name).await;
            follow_replicas(&p, shard, name).await;
        }
        drop(p);
        let pause = tokio::time::sleep(Duration::from_millis(SENTINEL_POLL_MS));
        tokio::select! {
            _ = pause => {}
            _ = wake.notified() => {}
        }
    }
}

/// What one Sentinel says the primary of `name` is (`ip:port`).
async fn ask(addr: &str, name: &str) -> Option<String> {
    let args: [&[u8]; 3] = [b"SENTINEL", b"get-master-addr-by-name", name.as_bytes()];
    let t = Duration::from_millis(SENTINEL_TIMEOUT_MS);
    let reply = crate::client::probe(addr, &args, t).await.ok()?;
    parse_addr(&reply)
}

/// The text of one bulk-string reply.
fn bulk(b: &[u8]) -> Option<String> {
    let start = b.iter().position(|&c| c == b'\n')? + 1;
    let text = std::str::from_utf8(b.get(start..b.len().checked_sub(2)?)?).ok()?;
    (b.first() == Some(&b'$')).then(|| text.to_string())
}

/// `*2 $ip $port` as `ip:port`; `None` for a null or an error.
fn parse_addr(reply: &[u8]) -> Option<String> {
    let parts = elements(reply)?;
    match parts.as_slice() {
        [ip, port] => Some(format!(
            "{}:{}",
            bulk(&reply[ip.clone()])?,
            bulk(&reply[port.clone()])?
        )),
        _ => None,
    }
}

/// `SENTINEL replicas`' reply (one field/value array per replica) as
/// `ip:port` addresses; `None` for an error.
fn parse_replicas(reply: &[u8]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for r in elements(reply)? {
        let one = &reply[r];
        let fields: Vec<String> = elements(one)?
            .into_iter()
            .filter_map(|f| bulk(&one[f]))
            .collect();
        let get = |k: &str| {
            fields
                .chunks(2)
                .find(|kv| kv.len() == 2 && kv[0] == k)
                .map(|kv| kv[1].clone())
        };
        if let (Some(ip), Some(port)) = (get("ip"), get("port")) {
            out.push(format!("{ip}:{port}"));
        }
    }
    Some(out)
}

/// What one Sentinel lists as the replicas of `name`.
async fn ask_replicas(addr: &str, name: &str) -> Option<Vec<String>> {
    let args: [&[u8]; 3] = [b"SENTINEL", b"replicas", name.as_bytes()];
    let t = Duration::from_millis(SENTINEL_TIMEOUT_MS);
    let reply = crate::client::probe(addr, &args, t).await.ok()?;
    parse_replicas(&reply)
}

/// The addresses more than half of `sentinels` list, but `primary`.
fn listed_by_majority(
    answers: &[Option<Vec<String>>],
    sentinels: usize,
    primary: &str,
) -> Option<Vec<String>> {
    let answered: Vec<&Vec<String>> = answers.iter().flatten().collect();
    if answered.len() <= sentinels / 2 {
        return None;
    }
    let mut votes: Vec<(&str, usize)> = Vec::new();
    for a in answered.iter().flat_map(|v| v.iter()) {
        match votes.iter_mut().find(|(x, _)| *x == a.as_str()) {
            Some((_, n)) => *n += 1,
            None => votes.push((a.as_str(), 1)),
        }
    }
    Some(
        votes
            .into_iter()
            .filter(|&(a, n)| n > sentinels / 2 && a != primary)
            .map(|(a, _)| a.to_string())
            .collect(),
    )
}

/// The address `routing` sends shard `shard`'s writes to.
fn routed_primary(
    routing: &crate::proxy::upstream::topology::Routing,
    shard: &str,
) -> Option<String> {
    routing
        .ring
        .nodes()
        .iter()
        .find(|n| n.name == shard)
        .map(|n| n.addr.clone())
}

/// Makes the shard's replicas those a majority of the Sentinels list,
/// when that differs from what the proxy has (order aside).
async fn follow_replicas(proxy: &Arc<Proxy>, shard: &str, name: &str) {
    let sentinels = proxy.config().sentinel.addrs.clone();
    let answers = futures::future::join_all(sentinels.iter().map(|s| ask_replicas(s, name))).await;
    let routing = proxy.routing.load_full();
    let Some(primary) = routed_primary(&routing, shard) else {
        return;
    };
    let Some(mut listed) = listed_by_majority(&answers, sentinels.len(), &primary) else {
        return;
    };
    let mut have = proxy.ha.replicas_of(shard);
    listed.sort();
    have.sort();
    // Not beside a topology change: the snapshot is that change's.
    if listed == have || routing.migration.is_some() {
        return;
    }
    // Logged, not noted: `last_failover` keeps saying what switched.
    tracing::info!(
        shard,
        "replicas as a majority of the Sentinels list them: [{}] (were [{}])",
        listed.join(", "),
        have.join(", ")
    );
    proxy.ha.set_replicas(shard, listed);
    crate::proxy::ha::admin::refresh(proxy).await;
}

/// The address more than half of `sentinels` named, with its votes.
fn majority(answers: &[Option<String>], sentinels: usize) -> Option<(String, usize)> {
    let mut votes: HashMap<&str, usize> = HashMap::new();
    for a in answers.iter().flatten() {
        *votes.entry(a.as_str()).or_default() += 1;
    }
    votes
        .into_iter()
        .find(|(_, v)| *v > sentinels / 2)
        .map(|(a, v)| (a.to_string(), v))
}

/// Routes `shard` to the primary a majority of the Sentinels name, once
/// `ROLE` there says master. The old primary joins the shard's replicas
/// (Sentinel makes it one when it returns).
async fn follow_majority(proxy: &Arc<Proxy>, shard: &str, name: &str) {
    let sentinels = &proxy.config().sentinel.addrs;
    let answers = futures::future::join_all(sentinels.iter().map(|s| ask(s, name))).await;
    let Some((winner, votes)) = majority(&answers, sentinels.len()) else {
        return;
    };
    let Some(current) = routed_primary(&proxy.routing.load_full(), shard) else {
        return;
    };
    if winner == current {
        return;
    }
    let t = Duration::from_millis(SENTINEL_TIMEOUT_MS.max(proxy.ha.config.probe_timeout_ms));
    match call::call(proxy, shard, &winner, &[b"ROLE"], t).await {
        Ok(r) if role_is_master(&r) => {}
        other => {
            let why = match other {
                Ok(r) => String::from_utf8_lossy(&r).trim_end().to_string(),
                Err(e) => e.to_string(),
            };
            tracing::warn!(shard, primary = %winner, votes, "the Sentinels' primary is not a master yet (ROLE: {why}); not routing there");
            return;
        }
    }
    let Some(_slot) = proxy.ha.begin_failover(shard) else {
        return;
    };
    let mut rest: Vec<String> = proxy
        .ha
        .replicas_of(shard)
        .into_iter()
        .filter(|r| *r != winner)
        .collect();
    if !rest.contains(&current) {
        rest.push(current.clone());
    }
    proxy.ha.set_replicas(shard, rest);
    proxy.ha.forget_node(&winner);
    if let Err(e) = failover::swap_primary(proxy, shard, &winner).await {
        proxy.ha.note(format!(
            "{shard}: Sentinel's primary {winner} not routed: {e}"
        ));
        return;
    }
    proxy.ha.failovers.fetch_add(1, Ordering::Relaxed);
    proxy.ha.note(format!(
        "{shard}: {votes} of {} Sentinels name {winner} primary in place of {current}; ROLE confirmed, routed there",
        sentinels.len()
    ));
    crate::proxy::ha::monitor::start(proxy);
}

/// Keeps a subscription to `+switch-master` on one Sentinel; any message
/// wakes the poller (which decides by majority, not by the message).
async fn subscribe(proxy: Weak<Proxy>, addr: String, wake: Arc<Notify>) {
    loop {
        if proxy.strong_count() == 0 {
            return;
        }
        let t = Duration::from_millis(SENTINEL_TIMEOUT_MS);
        if let Ok(mut c) = Conn::connect(&addr, t).await {
            c.queue(&[b"SUBSCRIBE", b"+switch-master"]);
            if c.flush().await.is_ok() {
                c.set_timeout(Duration::from_millis(SUBSCRIBE_IDLE_MS));
                while let Ok(msg) = c.read_reply().await {
                    if proxy.strong_count() == 0 {
                        return;
                    }
                    if msg.windows(14).any(|w| w == b"+switch-master") && msg.starts_with(b"*3") {
                        tracing::info!(sentinel = %addr, "+switch-master");
                        wake.notify_one();
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(SUBSCRIBE_RETRY_MS)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_of_the_configured_sentinels_decides() {
        let a = || Some("127.0.0.1:1".to_string());
        let b = || Some("127.0.0.1:2".to_string());
        assert_eq!(majority(&[a(), a(), b()], 3), Some((a().unwrap(), 2)));
        // Two of three silent: one answer is no majority.
        assert_eq!(majority(&[a(), None, None], 3), None);
        assert_eq!(majority(&[a(), b()], 2), None);
        assert_eq!(majority(&[a(), a(), b(), b()], 4), None);
    }

    #[test]
    fn replicas_are_those_a_majority_of_the_sentinels_list() {
        let r = b"*2\r\n*4\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nport\r\n$4\r\n6380\r\n*4\r\n$4\r\nport\r\n$4\r\n6381\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n";
        let listed = parse_replicas(r).unwrap();
        assert_eq!(listed, ["127.0.0.1:6380", "127.0.0.1:6381"]);
        assert_eq!(parse_replicas(b"*0\r\n"), Some(vec![]));
        assert_eq!(
            parse_replicas(b"-ERR No such master with that name\r\n"),
            None
        );
        let (a, b) = ("127.0.0.1:6380".to_string(), "127.0.0.1:6381".to_string());
        let answers = [
            Some(vec![a.clone(), b.clone()]),
            Some(vec![a.clone()]),
            None,
        ];
        assert_eq!(listed_by_majority(&answers, 3, "x"), Some(vec![a.clone()]));
        // The routed primary is never its own replica.
        assert_eq!(listed_by_majority(&answers, 3, &a), Some(vec![]));
        // One answer of three is no majority: nothing changes.
        assert_eq!(
            listed_by_majority(&[Some(vec![b]), None, None], 3, "x"),
            None
        );
    }

    #[test]
    fn the_sentinels_address_reply_is_read() {
        let r = b"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n";
        assert_eq!(parse_addr(r).as_deref(), Some("127.0.0.1:6380"));
        assert_eq!(parse_addr(b"*-1\r\n"), None);
        assert_eq!(parse_addr(b"-ERR nope\r\n"), None);
        assert_eq!(parse_addr(b"*1\r\n$1\r\nx\r\n"), None);
    }
}
