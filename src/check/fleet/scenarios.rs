//! The fleet checker's scripted changes, each under load on every proxy:
//! ADDNODE and REMOVENODE issued on one proxy, kill -9 of the leader
//! mid-copy, SIGSTOP of a non-leader across a whole change, etcd restarted
//! mid-change, and a CONFIG RELOAD that adds a node. Each returns what its
//! report line says beyond the load's counters; every wait is bounded.
//! Called by `fleet/mod.rs` in that order.

use std::time::{Duration, Instant};

use super::cluster::{FleetCluster, LEASE_TTL_S};
use crate::check::client::{Client, Reply};
use crate::check::cluster::rings;
use crate::check::{cluster_info, field};

/// Keys the stop scenario writes before and after the change.
const STOP_KEYS: usize = 500;
/// Bound on any one change reaching every proxy.
const CHANGE_MAX_SECS: u64 = 90;

/// What a scenario adds to its report line.
pub(crate) struct Outcome {
    /// Violations found by the scenario's own reads.
    pub violations: u64,
    /// The epoch the fleet ended at.
    pub epoch: u64,
    pub note: String,
}

/// Runs `args` on `proxy` in its own task (a follower's change answers
/// once the fleet is at the new epoch).
fn spawn_admin(proxy: String, args: Vec<String>) -> tokio::task::JoinHandle<Result<(), String>> {
    tokio::spawn(async move {
        let mut c = Client::new(&proxy, Duration::from_secs(CHANGE_MAX_SECS));
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        match c.call(&raw).await? {
            Reply::Simple(s) if s == "OK" => Ok(()),
            other => Err(format!("{} -> {}", args.join(" "), other.text())),
        }
    })
}

async fn epoch_of(proxy: &str) -> u64 {
    let info = cluster_info(proxy).await.unwrap_or_default();
    field(&info, "epoch").parse().unwrap_or(0)
}

/// Waits until every one of `proxies` routes by `epoch` with no change running.
pub(crate) async fn wait_settled(
    proxies: &[String],
    epoch: u64,
    max_secs: u64,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(max_secs);
    for p in proxies {
        loop {
            let info = cluster_info(p).await.unwrap_or_default();
            let e: u64 = field(&info, "epoch").parse().unwrap_or(0);
            if e >= epoch && field(&info, "state") == "ok" && field(&info, "serving") != "0" {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "proxy {p} not at epoch {epoch} within {max_secs} s (epoch {e}, state {})",
                    field(&info, "state")
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// Waits until `proxy` copies keys for the change to `epoch` (the change
/// may not have started yet when this is called).
async fn wait_copying(proxy: &str, epoch: u64) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = cluster_info(proxy).await.unwrap_or_default();
        let copied: u64 = field(&info, "migration_keys_copied").parse().unwrap_or(0);
        if field(&info, "state") == "copying" && copied > 0 {
            return Ok(());
        }
        if field(&info, "epoch").parse::<u64>().unwrap_or(0) >= epoch {
            return Err("the copy ended before it could be interrupted; lower --copy-rate or raise --preload".into());
        }
        if Instant::now() > deadline {
            return Err(format!("no copy progress on {proxy} within 60 s"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The index of the fleet's leader, asked of proxy `ask`.
async fn leader(fleet: &FleetCluster, ask: usize) -> Result<usize, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = cluster_info(&fleet.addr(ask)).await.unwrap_or_default();
        let id = field(&info, "leader");
        if let Some(i) = (0..fleet.members.len()).find(|&i| id == fleet.addr(i)) {
            return Ok(i);
        }
        if Instant::now() > deadline {
            return Err(format!("no leader within 20 s (asked {})", fleet.addr(ask)));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn finish(admin: tokio::task::JoinHandle<Result<(), String>>) -> Result<(), String> {
    admin.await.map_err(|e| e.to_string())?
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// ADDNODE issued on proxy `on`.
pub(crate) async fn add_node(fleet: &mut FleetCluster, on: usize) -> Result<Outcome, String> {
    let epoch = epoch_of(&fleet.addr(on)).await + 1;
    let (name, addr) = fleet.start_node()?;
    let t0 = Instant::now();
    let args = vec![
        "CLUSTER".into(),
        "ADDNODE".into(),
        addr,
        "NAME".into(),
        name.clone(),
    ];
    let asked = spawn_admin(fleet.addr(on), args);
    wait_settled(&fleet.addrs(), epoch, CHANGE_MAX_SECS).await?;
    finish(asked).await?;
    let note = format!(
        "{name} added through proxy {on}, every proxy at the epoch after {}",
        secs(t0.elapsed())
    );
    Ok(Outcome {
        violations: 0,
        epoch,
        note,
    })
}

/// REMOVENODE of `victim` issued on proxy `on`.
pub(crate) async fn remove_node(
    fleet: &FleetCluster,
    on: usize,
    victim: &str,
) -> Result<Outcome, String> {
    let epoch = epoch_of(&fleet.addr(on)).await + 1;
    let t0 = Instant::now();
    let args = vec!["CLUSTER".into(), "REMOVENODE".into(), victim.to_string()];
    let asked = spawn_admin(fleet.addr(on), args);
    wait_settled(&fleet.addrs(), epoch, CHANGE_MAX_SECS).await?;
    finish(asked).await?;
    let note = format!(
        "{victim} removed through proxy {on}, every proxy at the epoch after {}",
        secs(t0.elapsed())
    );
    Ok(Outcome {
        violations: 0,
        epoch,
        note,
    })
}

/// kill -9 of the leader once its copy has copied something; another
/// proxy must finish the change. The killed proxy is then started again.
pub(crate) async fn kill_leader(fleet: &mut FleetCluster) -> Result<Outcome, String> {
    let li = leader(fleet, 0).await?;
    let epoch = epoch_of(&fleet.addr(li)).await + 1;
    let (name, addr) = fleet.start_node()?;
    let args = vec![
        "CLUSTER".into(),
        "ADDNODE".into(),
        addr,
        "NAME".into(),
        name,
    ];
    let asked = spawn_admin(fleet.addr(li), args);
    wait_copying(&fleet.addr(li), epoch).await?;
    fleet.kill_proxy(li);
    let t0 = Instant::now();
    let _ = asked.await;
    let survivors: Vec<String> = (0..fleet.members.len())
        .filter(|&i| i != li)
        .map(|i| fleet.addr(i))
        .collect();
    wait_settled(&survivors, epoch, CHANGE_MAX_SECS).await?;
    let took = t0.elapsed();
    let ask = (li + 1) % fleet.members.len();
    let new_leader = leader(fleet, ask).await?;
    fleet.restart_proxy(li)?;
    wait_settled(&[fleet.addr(li)], epoch, CHANGE_MAX_SECS).await?;
    let note = format!(
        "leader proxy {li} killed mid-copy; proxy {new_leader} finished the change {} after the kill; proxy {li} restarted and rejoined",
        secs(took)
    );
    Ok(Outcome {
        violations: 0,
        epoch,
        note,
    })
}

/// SIGSTOP of a non-leader across a whole ADDNODE, then SIGCONT: the
/// change completes once its lease expires, and the continued proxy then
/// serves no key by the ring it was stopped with.
pub(crate) async fn stop_follower(fleet: &mut FleetCluster) -> Result<Outcome, String> {
    let li = leader(fleet, 0).await?;
    let vi = (li + 1) % fleet.members.len();
    let (leader_addr, victim_addr) = (fleet.addr(li), fleet.addr(vi));
    write_keys(&leader_addr, "old").await?;
    let epoch = epoch_of(&leader_addr).await + 1;
    let (name, addr) = fleet.start_node()?;
    fleet.signal_proxy(vi, "-STOP")?;
    let t0 = Instant::now();
    let args = vec![
        "CLUSTER".into(),
        "ADDNODE".into(),
        addr,
        "NAME".into(),
        name,
    ];
    let asked = spawn_admin(leader_addr.clone(), args);
    let running: Vec<String> = (0..fleet.members.len())
        .filter(|&i| i != vi)
        .map(|i| fleet.addr(i))
        .collect();
    let settled = wait_settled(&running, epoch, CHANGE_MAX_SECS).await;
    let took = t0.elapsed();
    let written = match settled {
        Ok(()) => write_keys(&leader_addr, "new").await,
        Err(e) => Err(e),
    };
    // Continued whatever happened, so the process is never left stopped.
    fleet.signal_proxy(vi, "-CONT")?;
    written?;
    finish(asked).await?;
    let (mut right, mut stale, mut refused) = (0, 0, 0);
    let mut c = Client::new(&victim_addr, Duration::from_secs(3));
    for i in 0..STOP_KEYS {
        match c
            .call(&[b"GET", format!("fleet:stop:{i}").as_bytes()])
            .await
        {
            Ok(Reply::Bulk(Some(v))) if v == format!("new{i}").as_bytes() => right += 1,
            Ok(Reply::Error(_)) | Err(_) => refused += 1,
            Ok(_) => stale += 1,
        }
    }
    wait_settled(std::slice::from_ref(&victim_addr), epoch, CHANGE_MAX_SECS).await?;
    let after = read_new(&victim_addr).await?;
    let note = format!(
        "proxy {vi} stopped; the change completed {} after the stop (lease {LEASE_TTL_S} s); after SIGCONT {right} right, {refused} refused, {stale} stale of {STOP_KEYS}; once caught up {after} of {STOP_KEYS} right",
        secs(took)
    );
    let violations = stale + (STOP_KEYS - after) as u64;
    Ok(Outcome {
        violations,
        epoch,
        note,
    })
}

async fn write_keys(proxy: &str, value: &str) -> Result<(), String> {
    let mut c = Client::new(proxy, Duration::from_secs(10));
    for i in 0..STOP_KEYS {
        let (k, v) = (format!("fleet:stop:{i}"), format!("{value}{i}"));
        match c.call(&[b"SET", k.as_bytes(), v.as_bytes()]).await? {
            Reply::Simple(_) => {}
            other => return Err(format!("SET {k} through {proxy}: {}", other.text())),
        }
    }
    Ok(())
}

/// How many of the stop keys read back new through `proxy`.
async fn read_new(proxy: &str) -> Result<usize, String> {
    let mut c = Client::new(proxy, Duration::from_secs(10));
    let mut right = 0;
    for i in 0..STOP_KEYS {
        let r = c
            .call(&[b"GET", format!("fleet:stop:{i}").as_bytes()])
            .await?;
        if r == Reply::Bulk(Some(format!("new{i}").into_bytes())) {
            right += 1;
        }
    }
    Ok(right)
}

/// etcd killed once the copy is under way and started again a second
/// later: the change pauses, then resumes and completes.
pub(crate) async fn restart_etcd(fleet: &mut FleetCluster) -> Result<Outcome, String> {
    let li = leader(fleet, 0).await?;
    let epoch = epoch_of(&fleet.addr(li)).await + 1;
    let (name, addr) = fleet.start_node()?;
    let args = vec![
        "CLUSTER".into(),
        "ADDNODE".into(),
        addr,
        "NAME".into(),
        name,
    ];
    let asked = spawn_admin(fleet.addr(li), args);
    wait_copying(&fleet.addr(li), epoch).await?;
    tokio::task::block_in_place(|| fleet.etcd.stop());
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::block_in_place(|| fleet.etcd.restart())?;
    let t0 = Instant::now();
    wait_settled(&fleet.addrs(), epoch, CHANGE_MAX_SECS).await?;
    let reply = match asked.await.map_err(|e| e.to_string())? {
        Ok(()) => "OK".to_string(),
        Err(e) => e,
    };
    let note = format!(
        "etcd killed mid-copy, restarted 1 s later; every proxy at the epoch {} after the restart; the ADDNODE answered: {reply}",
        secs(t0.elapsed())
    );
    Ok(Outcome {
        violations: 0,
        epoch,
        note,
    })
}

/// CONFIG RELOAD on proxy `on` of a config listing the ring and one more node.
pub(crate) async fn reload_add(
    fleet: &mut FleetCluster,
    on: usize,
    threads: usize,
) -> Result<Outcome, String> {
    let proxy = fleet.addr(on);
    let epoch = epoch_of(&proxy).await + 1;
    let (now, _) = rings(&proxy).await?;
    let mut listed: Vec<(String, String)> = now
        .nodes()
        .iter()
        .map(|n| (n.name.clone(), n.addr.clone()))
        .collect();
    let (name, addr) = fleet.start_node()?;
    listed.push((name.clone(), addr));
    fleet.write_config(on, &listed, threads)?;
    let t0 = Instant::now();
    let asked = spawn_admin(proxy.clone(), vec!["CONFIG".into(), "RELOAD".into()]);
    wait_settled(&fleet.addrs(), epoch, CHANGE_MAX_SECS).await?;
    finish(asked).await?;
    let note = format!("CONFIG RELOAD on proxy {on} of a file listing {name} too; every proxy at the epoch after {}", secs(t0.elapsed()));
    Ok(Outcome {
        violations: 0,
        epoch,
        note,
    })
}
