//! How the members of each shard read in `CLUSTER RING`, `CLUSTER RINGINFO`
//! and `GET /cluster`: role, replication offset and lag (bytes behind the
//! primary), as the probes last saw them. Read-only.

use serde_json::{json, Value};

use crate::proxy::upstream::shard::Shard;
use crate::proxy::Proxy;

/// ` repl=master offset=N` for a primary line of `CLUSTER RING`, then one
/// line per replica: `name addr replica_of=shard state=… role=replica
/// offset=… lag=… link=up|down`. Empty for a shard without replicas.
pub(crate) fn ring_suffix_and_lines(proxy: &Proxy, shard: &Shard) -> (String, String) {
    if shard.replicas().is_empty() {
        return (String::new(), String::new());
    }
    let primary = proxy.ha.status(&shard.primary().spec.addr);
    let suffix = format!(" repl={} offset={}", primary.role_str(), primary.offset());
    let mut lines = String::new();
    for r in shard.replicas() {
        let s = proxy.ha.status(&r.spec.addr);
        lines.push_str(&format!(
            "{} {} replica_of={} state={} role=replica repl={} offset={} lag={} link={}\n",
            r.spec.addr,
            r.spec.addr,
            shard.name(),
            s.liveness().as_str(),
            s.role_str(),
            s.offset(),
            primary.offset().saturating_sub(s.offset()),
            if s.is_link_up() { "up" } else { "down" },
        ));
    }
    (suffix, lines)
}

/// The `CLUSTER RINGINFO` lines of the pool's policies and each shard with
/// replicas: `shard_NAME:primary=addr,state=…,offset=…;replica=addr,…`.
pub(crate) fn ringinfo_lines(proxy: &Proxy) -> String {
    let c = &proxy.ha.config;
    let routing = proxy.routing.load();
    let last = proxy
        .ha
        .last_event
        .lock()
        .map(|e| e.clone())
        .unwrap_or_default();
    let mut out = format!(
        "failover_mode:{}\r\non_primary_down:{}\r\nwrite_ack:{}\r\nread_from:{}\r\nfailovers:{}\r\nlast_failover:{}\r\n",
        c.mode.as_str(),
        c.on_primary_down.as_str(),
        c.write_ack.as_str(),
        c.read_from.as_str(),
        proxy.ha.failovers.load(std::sync::atomic::Ordering::Relaxed),
        if last.is_empty() { "none" } else { &last },
    );
    for shard in routing.shards.iter().filter(|s| !s.replicas().is_empty()) {
        let p = proxy.ha.status(&shard.primary().spec.addr);
        out.push_str(&format!(
            "shard_{}:primary={},state={},role={},offset={}",
            shard.name(),
            shard.primary().spec.addr,
            p.liveness().as_str(),
            p.role_str(),
            p.offset()
        ));
        for r in shard.replicas() {
            let s = proxy.ha.status(&r.spec.addr);
            out.push_str(&format!(
                ";replica={},state={},role={},offset={},lag={},link={}",
                r.spec.addr,
                s.liveness().as_str(),
                s.role_str(),
                s.offset(),
                p.offset().saturating_sub(s.offset()),
                if s.is_link_up() { "up" } else { "down" }
            ));
        }
        out.push_str("\r\n");
    }
    out
}

/// The `replication` object of a node in `GET /cluster`: its role and
/// offset and each replica's, with lag.
pub(crate) fn json_of(proxy: &Proxy, name: &str) -> Value {
    let routing = proxy.routing.load();
    let Some(shard) = routing.shards.iter().find(|s| s.name() == name) else {
        return Value::Null;
    };
    let p = proxy.ha.status(&shard.primary().spec.addr);
    let replicas: Vec<Value> = shard
        .replicas()
        .iter()
        .map(|r| {
            let s = proxy.ha.status(&r.spec.addr);
            json!({
                "addr": r.spec.addr, "state": s.liveness().as_str(), "role": s.role_str(),
                "offset": s.offset(), "lag": p.offset().saturating_sub(s.offset()),
                "link": if s.is_link_up() { "up" } else { "down" },
            })
        })
        .collect();
    json!({ "role": p.role_str(), "offset": p.offset(), "replicas": replicas })
}
