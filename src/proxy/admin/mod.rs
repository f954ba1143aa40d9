//! `CLUSTER …` on the proxy port: inspect and change the topology.
//!
//! | command | reply |
//! |---|---|
//! | `CLUSTER ADDNODE host:port [WEIGHT w] [NAME n]` | `+OK` once the new epoch routes |
//! | `CLUSTER REMOVENODE name-or-addr` | `+OK` once the new epoch routes |
//! | `CLUSTER RING` | one line per node of the ring |
//! | `CLUSTER RINGINFO` | `key:value` lines: the change state and its progress |
//! | `CLUSTER PROXIES` | one line per live proxy sharing the topology (fleet.rs) |
//! | `CLUSTER KEYNODE key` | the owner's name |
//! | `CLUSTER SLOTS` / `SHARDS` / `NODES` / `INFO` / `MYID` / `KEYSLOT` | the proxy as one Redis Cluster node owning every slot (cluster.rs) |
//!
//! Changes are validated before the ring changes, one at a time; a node that
//! is down can be removed at any time (see [`remove_node`]).

pub(crate) mod error;
pub(crate) mod etcd;
pub(crate) mod fleet;
pub(crate) mod migration;
pub(crate) mod plan;
pub(crate) mod reload;
pub(crate) mod scripts;
pub mod state;
pub(crate) mod store;
mod views;

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

pub(crate) use crate::proxy::admin::error::AdminError;
use crate::proxy::admin::migration::Change;
use crate::proxy::conn::client::ClientState;
use crate::proxy::conn::pending::Pending;
use crate::proxy::upstream::credentials;
use crate::proxy::Proxy;
use crate::resp::reply::integer;
use crate::resp::{encode, eq_ignore_case, Request};
use crate::ring::NodeSpec;
use views::{cluster_info, cluster_nodes};

pub(crate) async fn handle(proxy: &Arc<Proxy>, s: &ClientState, req: Request) -> Pending {
    let args = req.args;
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let proto = s.proto;
    let proxy = proxy.clone();
    let client = s.id;
    if let Some(p) = crate::proxy::commands::cluster::handle(s, &sub, &args) {
        return p;
    }
    match sub.as_str() {
        "failover" | "addreplica" | "removereplica" if args.len() >= 3 => {
            ha_command(&proxy, &sub, &args[2..])
        }
        "addslots" | "meet" | "reset" | "failover" | "replicate" => {
            Pending::error("ERR This instance has cluster support disabled")
        }
        "plan" => plan::command(&proxy, proto, args),
        "hotkeys" => crate::proxy::ops::cluster_hotkeys(&proxy, args),
        "keynode" if args.len() == 3 => {
            let routing = proxy.routing.load();
            let mut out = BytesMut::new();
            encode::bulk(&mut out, routing.owner(&args[2]).spec.name.as_bytes());
            Pending::ready(out)
        }
        "ringinfo" if args.len() == 2 => {
            let text = cluster_info(&proxy);
            let mut out = BytesMut::new();
            encode::verbatim(&mut out, text.as_bytes(), proto);
            Pending::ready(out)
        }
        "ring" if args.len() == 2 => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let _ = tx.send(cluster_nodes(&proxy, proto, client).await);
            });
            Pending::One(rx)
        }
        "addnode" if args.len() >= 3 => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let r = add_node(&proxy, &args[2..]).await;
                let _ = tx.send(ok_or_err(r));
            });
            Pending::One(rx)
        }
        "spawnnode" => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let _ = tx.send(match spawn_node(&proxy, &args[2..]).await {
                    Ok(line) => {
                        let mut out = BytesMut::new();
                        encode::bulk(&mut out, line.as_bytes());
                        out.freeze()
                    }
                    Err(e) => e.reply(),
                });
            });
            Pending::One(rx)
        }
        "removenode" if args.len() == 3 => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let r = remove_node(&proxy, &String::from_utf8_lossy(&args[2])).await;
                let _ = tx.send(ok_or_err(r));
            });
            Pending::One(rx)
        }
        "proxies" if args.len() == 2 => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let _ = tx.send(fleet::proxies(proxy, proto).await);
            });
            Pending::One(rx)
        }
        "keynode" | "ringinfo" | "ring" | "addnode" | "removenode" | "proxies" => {
            Pending::error(&format!("ERR wrong number of arguments for 'cluster|{sub}' command"))
        }
        _ => {
            Pending::error(&format!(
                "ERR unknown subcommand '{}'. Try CLUSTER ADDNODE, SPAWNNODE, REMOVENODE, RING, RINGINFO, PROXIES, KEYNODE, PLAN, HOTKEYS, SLOTS, SHARDS, NODES or INFO.",
                String::from_utf8_lossy(&args[1])
            ))
        }
    }
}

/// `CLUSTER FAILOVER <shard> [FORCE]`, `ADDREPLICA` and `REMOVEREPLICA
/// <shard> host:port` (`ha::admin`).
fn ha_command(proxy: &Arc<Proxy>, sub: &str, args: &[Bytes]) -> Pending {
    let text = |b: &Bytes| String::from_utf8_lossy(b).to_string();
    let shard = text(&args[0]);
    let force = match (sub, args.len()) {
        ("failover", 1) => false,
        ("failover", 2) if eq_ignore_case(&args[1], b"FORCE") => true,
        ("addreplica" | "removereplica", 2) => false,
        _ => {
            return Pending::error(&format!(
                "ERR wrong number of arguments for 'cluster|{sub}' command"
            ))
        }
    };
    let addr = args.get(1).map(text).unwrap_or_default();
    let (proxy, sub) = (proxy.clone(), sub.to_string());
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        use crate::proxy::ha::admin as ha;
        let r = match sub.as_str() {
            "failover" => ha::failover(&proxy, &shard, force).await,
            "addreplica" => ha::add_replica(&proxy, &shard, &addr)
                .await
                .map(|()| String::new()),
            _ => ha::remove_replica(&proxy, &shard, &addr)
                .await
                .map(|()| String::new()),
        };
        let mut out = BytesMut::new();
        match r {
            Ok(_) => encode::simple(&mut out, "OK"),
            Err(e) => encode::error(&mut out, &e),
        }
        let _ = tx.send(out.freeze());
    });
    Pending::One(rx)
}

fn ok_or_err(r: Result<(), AdminError>) -> Bytes {
    match r {
        Ok(()) => {
            let mut out = BytesMut::new();
            encode::simple(&mut out, "OK");
            out.freeze()
        }
        Err(e) => e.reply(),
    }
}

async fn add_node(
    proxy: &std::sync::Arc<crate::proxy::Proxy>,
    args: &[Bytes],
) -> Result<(), AdminError> {
    // `REPLICAS a,b` is taken off first; the rest parses, with the same
    // errors, as CLUSTER PLAN ADDNODE.
    let (args, replicas) = take_replicas(args)?;
    let NodeSpec { name, addr, weight } = crate::proxy::admin::plan::parse_add(&args)?;
    let (lock, routing) = start_change(proxy).await?;
    for n in routing.ring.nodes() {
        if n.addr == addr {
            return Err(AdminError::AddrPresent {
                addr,
                name: n.name.clone(),
            });
        }
        if n.name == name {
            return Err(AdminError::NamePresent(name));
        }
    }
    // A node this proxy left copies on (an aborted add, a removed node that
    // was down) holds only keys it does not own: delete them first.
    for which in [&name, &addr] {
        migration::sweep_before_readd(proxy, which)
            .await
            .map_err(AdminError::StraysRemain)?;
    }
    let timeout = Duration::from_millis(proxy.config().connect_timeout_ms.max(1000));
    let login = &proxy.config().node_auth;
    let size = credentials::probe(&addr, &name, login, &[b"DBSIZE"], timeout)
        .await
        .map_err(|e| AdminError::Unreachable {
            addr: addr.clone(),
            why: e.terse(),
        })?;
    match integer(&size) {
        Some(0) => {}
        Some(keys) => return Err(AdminError::NotEmpty { addr, keys }),
        None => {
            return Err(AdminError::BadDbsize {
                addr,
                reply: String::from_utf8_lossy(&size).trim_end().to_string(),
            })
        }
    }
    for r in &replicas {
        if routing.ring.nodes().iter().any(|n| &n.addr == r)
            || proxy.ha.shard_of_replica(r).is_some()
            || *r == addr
        {
            return Err(AdminError::AddrPresent {
                addr: r.clone(),
                name: name.clone(),
            });
        }
    }
    // Each replica answers, logged in as the shard's members are (AUTH with
    // the shard's credentials), before the shard joins.
    for r in &replicas {
        let pong = crate::proxy::upstream::credentials::probe(r, &name, login, &[b"PING"], timeout)
            .await
            .map_err(|e| AdminError::Unreachable {
                addr: r.clone(),
                why: e.terse(),
            })?;
        if crate::resp::reply::is_error(&pong) {
            return Err(AdminError::Unreachable {
                addr: r.clone(),
                why: String::from_utf8_lossy(&pong).trim_end().to_string(),
            });
        }
    }
    // The libraries and scripts every node has, before it serves a key.
    scripts::carry(proxy, &routing, &addr, &name, login, timeout).await?;
    // The shard's replicas are known before its first snapshot is built.
    if !replicas.is_empty() {
        proxy.ha.set_replicas(&name, replicas);
    }
    let begun = migration::begin(
        proxy,
        Change::Add(NodeSpec {
            name: name.clone(),
            addr,
            weight,
        }),
    )
    .await;
    if let Err(e) = begun {
        proxy.ha.set_replicas(&name, Vec::new());
        return Err(e.into());
    }
    crate::proxy::ha::monitor::start(proxy);
    drop(lock);
    await_fleet(proxy).await
}

/// On a proxy that does not drive the change it just started: waits until
/// the fleet's leader has cut it over (at once otherwise).
async fn await_fleet(proxy: &crate::proxy::Proxy) -> Result<(), AdminError> {
    let next = proxy
        .routing
        .load()
        .migration
        .as_ref()
        .map(|m| m.next.epoch());
    match next {
        Some(n) => fleet::await_change(proxy, n).await,
        None => Ok(()),
    }
}

/// Splits `REPLICAS a,b` off ADDNODE's arguments.
fn take_replicas(args: &[Bytes]) -> Result<(Vec<Bytes>, Vec<String>), AdminError> {
    let mut rest = Vec::with_capacity(args.len());
    let mut replicas = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if i > 0 && eq_ignore_case(&args[i], b"REPLICAS") {
            let list = args.get(i + 1).ok_or(AdminError::MissingValue)?;
            for r in String::from_utf8_lossy(list)
                .split(',')
                .filter(|r| !r.is_empty())
            {
                if r.parse::<std::net::SocketAddr>().is_err() {
                    return Err(AdminError::BadAddress(r.to_string()));
                }
                replicas.push(r.to_string());
            }
            i += 2;
        } else {
            rest.push(args[i].clone());
            i += 1;
        }
    }
    Ok((rest, replicas))
}

/// `CLUSTER SPAWNNODE [WEIGHT w] [NAME n]` under `shardis up`: starts a new
/// built-in node process and adds it; replies `name addr`.
async fn spawn_node(
    proxy: &std::sync::Arc<crate::proxy::Proxy>,
    opts: &[Bytes],
) -> Result<String, AdminError> {
    let spawner = proxy.spawner.clone().ok_or(AdminError::SpawnUnsupported)?;
    // Refuse before starting a process; ADDNODE below checks again under the lock.
    drop(start_change(proxy).await?);
    let addr = spawner.spawn().await.map_err(AdminError::Spawn)?;
    // Named after the nodes `up` started (node1…nodeN): the next number up.
    let last = proxy
        .routing
        .load()
        .ring
        .nodes()
        .iter()
        .filter_map(|n| n.name.strip_prefix("node")?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    let mut name = format!("node{}", last + 1);
    let mut args = vec![Bytes::from(addr.clone())];
    let mut i = 0;
    while i < opts.len() {
        if eq_ignore_case(&opts[i], b"NAME") && i + 1 < opts.len() {
            name = String::from_utf8_lossy(&opts[i + 1]).to_string();
            i += 2;
        } else if eq_ignore_case(&opts[i], b"WEIGHT") && i + 1 < opts.len() {
            args.push(opts[i].clone());
            args.push(opts[i + 1].clone());
            i += 2;
        } else {
            return Err(AdminError::SyntaxNear(
                String::from_utf8_lossy(&opts[i]).to_string(),
            ));
        }
    }
    args.push(Bytes::from_static(b"NAME"));
    args.push(Bytes::from(name.clone()));
    add_node(proxy, &args).await?;
    Ok(format!("{name} {addr}"))
}

/// How long a change request waits for the admin lock (held briefly by a
/// background sweep retry).
const ADMIN_LOCK_WAIT_MS: u64 = 10_000;

/// How long `REMOVENODE` of an unreachable node waits for a running change to
/// abort or finish.
const REMOVE_WAIT_MS: u64 = 60_000;

/// Takes the admin lock and checks no change is running; the lock is held
/// until the new change has started.
async fn start_change(
    proxy: &crate::proxy::Proxy,
) -> Result<
    (
        tokio::sync::MutexGuard<'_, ()>,
        std::sync::Arc<crate::proxy::upstream::topology::Routing>,
    ),
    AdminError,
> {
    let lock = tokio::time::timeout(
        Duration::from_millis(ADMIN_LOCK_WAIT_MS),
        proxy.admin_lock.lock(),
    )
    .await
    .map_err(|_| AdminError::LockBusy)?;
    let routing = proxy.routing.load_full();
    if routing.migration.is_some() || proxy.migration.is_changing() {
        return Err(AdminError::InProgress);
    }
    if proxy.ha.is_failing_over() {
        return Err(AdminError::FailingOver);
    }
    let ejected = proxy.ejected.names();
    if !ejected.is_empty() {
        return Err(AdminError::Ejected(ejected.join(", ")));
    }
    Ok((lock, routing))
}

/// `CLUSTER REMOVENODE`. A reachable node's keys move to their new owners
/// first (refused while another change runs). An unreachable node can be
/// removed at any time: a copy in progress is aborted (naming the node), a
/// cutover or sweep in progress is waited out (both are bounded by the
/// timeouts), then the ring drops the node at once — its keys are lost with
/// it. A node that is no longer in the ring but still has copies recorded
/// as pending is forgotten.
async fn remove_node(
    proxy: &std::sync::Arc<crate::proxy::Proxy>,
    which: &str,
) -> Result<(), AdminError> {
    let routing = proxy.routing.load_full();
    let Some(idx) = routing.ring.index_of(which) else {
        if migration::forget_pending(proxy, which).await? {
            return Ok(());
        }
        return Err(AdminError::NoSuchNode(which.to_string()));
    };
    if routing.ring.nodes().len() == 1 {
        return Err(AdminError::LastNode);
    }
    let spec = routing.ring.node(idx).clone();
    let timeout = Duration::from_millis(proxy.config().connect_timeout_ms.max(1000));
    let login = &proxy.config().node_auth;
    let alive = credentials::probe(&spec.addr, &spec.name, login, &[b"PING"], timeout);
    if alive.await.is_ok() {
        let (lock, _) = start_change(proxy).await?;
        migration::begin(proxy, Change::Remove(spec.name)).await?;
        drop(lock);
        return await_fleet(proxy).await;
    }
    if proxy.migration.is_copying() {
        proxy
            .migration
            .request_abort(&spec.name, "unreachable, removed by CLUSTER REMOVENODE");
    }
    if !migration::wait_idle(proxy, Duration::from_millis(REMOVE_WAIT_MS)).await {
        return Err(AdminError::WaitTimedOut);
    }
    let (_lock, routing) = start_change(proxy).await?;
    if routing.ring.index_of(&spec.name).is_none() {
        return Ok(());
    }
    if routing.ring.nodes().len() == 1 {
        return Err(AdminError::LastNode);
    }
    migration::remove_unreachable(proxy, &spec).await?;
    Ok(())
}
