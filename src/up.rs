//! `shardis up`: decides which nodes to start (the state file's topology if
//! there is one, else the config's `[[nodes]]`, else `[up] nodes` generated
//! ones), starts them as child processes — built-in nodes or redis-server —
//! then runs the proxy over them until Ctrl-C / SIGTERM, and stops every
//! child on the way out.
//!
//! Called by `main.rs` only. Owns the node processes: a node the ring drops
//! (REMOVENODE, after its sweep) is stopped here, and no path leaves one
//! running — built-in nodes exit with their parent, and redis-server runs
//! under `shardis supervise`, which stops it when `up` goes away.

pub mod password;
mod restart;
mod spawner;

pub(crate) use spawner::stop;
pub use spawner::NodeSpawner;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Arc, Mutex};

use shardis::proxy::admin::state::{self, topology_difference};
use shardis::proxy::{self, Config};
use shardis::ring::NodeSpec;

use crate::fleet_up::FleetArgs;

/// What `up` runs as nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// `shardis node`, this executable.
    Builtin,
    /// `redis-server` from PATH, without persistence.
    RedisServer,
}

/// Errs with a clear message when the backend's program is missing.
pub fn check_backend(backend: Backend) -> Result<(), String> {
    if backend == Backend::RedisServer
        && std::process::Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
    {
        return Err("--backend redis-server: redis-server is not installed (not found on PATH); install it (e.g. `apt-get install redis-server`) or use the built-in nodes".into());
    }
    Ok(())
}

/// The port of a node `up` can start: its address must be on this machine.
fn local_port(n: &NodeSpec) -> Result<u16, String> {
    let (host, port) = n.addr.rsplit_once(':').unwrap_or(("", ""));
    let loopback = ["127.0.0.1", "localhost", "[::1]"].contains(&host);
    match port.parse::<u16>() {
        Ok(p) if loopback && p != 0 => Ok(p),
        _ => Err(format!(
            "node {} at {}: `shardis up` starts its nodes on 127.0.0.1; for nodes elsewhere run `shardis proxy --config FILE`",
            n.name, n.addr
        )),
    }
}

/// What `up` starts: the ring's nodes, and each shard's replicas with the
/// address of the primary they follow.
pub struct Topology {
    pub nodes: Vec<NodeSpec>,
    /// `(replica, its primary)`, both `host:port`.
    pub replicas: Vec<(String, String)>,
}

impl Topology {
    /// Every address `up` would listen on, nodes first.
    pub fn addrs(&self) -> impl Iterator<Item = &str> {
        let replicas = self.replicas.iter().map(|(r, _)| r.as_str());
        self.nodes.iter().map(|n| n.addr.as_str()).chain(replicas)
    }
}

/// The replicas to start: each shard's, paired with its primary's address.
fn pair_replicas(
    nodes: &[NodeSpec],
    replicas: &std::collections::BTreeMap<String, Vec<String>>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for n in nodes {
        for r in replicas.get(&n.name).into_iter().flatten() {
            out.push((r.clone(), n.addr.clone()));
        }
    }
    out
}

/// The nodes to start: the state file's ring (and, mid-change, the other
/// ring's nodes too) and replicas when there is one, else the config's.
/// Logs where the topology came from and how it differs from the config.
pub fn topology(config: &Config) -> Result<Topology, String> {
    let from_config = || Topology {
        nodes: config.nodes.clone(),
        replicas: pair_replicas(
            &config.nodes,
            &config
                .replicas
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().map(|n| n.addr.clone()).collect()))
                .collect(),
        ),
    };
    let Some(path) = &config.state_file else {
        return Ok(from_config());
    };
    let Some(saved) = state::load(path).map_err(|e| e.to_string())? else {
        return Ok(from_config());
    };
    let mut nodes = saved.nodes.clone();
    if let Some(m) = &saved.migration {
        for n in state::to_specs(&m.other_nodes) {
            if !nodes.iter().any(|x| x.name == n.name) {
                nodes.push(n);
            }
        }
    }
    let diff = topology_difference(&config.nodes, &saved.nodes);
    println!(
        "shardis: topology from the state file {path} (epoch {}, {} nodes){}",
        saved.epoch,
        saved.nodes.len(),
        if diff.is_empty() {
            String::new()
        } else {
            format!(", not the config: {}", diff.join("; "))
        }
    );
    let replicas = pair_replicas(&nodes, &saved.replicas);
    Ok(Topology { nodes, replicas })
}

/// Fills `config.nodes` when the config lists none: `nodes` nodes named
/// node1…nodeN on consecutive ports from `first`, and `replicas` built-in
/// replicas of each after them (node1's first replica on `first + nodes`,
/// its second on `first + 2 × nodes`). A config with `[[nodes]]` refuses the
/// flags: `up` starts exactly the nodes and replicas it lists.
pub fn generate_nodes(
    config: &mut Config,
    file: &std::path::Path,
    nodes: Option<usize>,
    first_port: Option<u16>,
    replicas: Option<usize>,
) -> Result<(), String> {
    if !config.nodes.is_empty() {
        if nodes.is_some() || first_port.is_some() || replicas.is_some() {
            return Err(format!(
                "--nodes / --first-node-port / --replicas: {} lists its own [[nodes]], and `up` starts exactly those (with their names, weights and replicas); drop the flags, or the [[nodes]] entries",
                file.display()
            ));
        }
        return Ok(());
    }
    let up = &mut config.up;
    up.nodes = nodes.unwrap_or(up.nodes);
    up.first_node_port = first_port.unwrap_or(up.first_node_port);
    up.replicas = replicas.unwrap_or(up.replicas);
    if up.nodes == 0 || up.nodes > 1000 {
        return Err("--nodes: expected 1..=1000".into());
    }
    if up.replicas > proxy::config::MAX_UP_REPLICAS {
        return Err(format!(
            "--replicas: expected 0..={}",
            proxy::config::MAX_UP_REPLICAS
        ));
    }
    let (n, first) = (up.nodes, up.first_node_port as usize);
    if first + n * (1 + up.replicas) > 65_536 {
        return Err("--first-node-port: the node ports would pass 65535".into());
    }
    let spec = |name: String, port: usize| NodeSpec {
        name,
        addr: format!("127.0.0.1:{port}"),
        weight: 1,
    };
    config.nodes = (0..n)
        .map(|i| spec(format!("node{}", i + 1), first + i))
        .collect();
    for i in 0..n {
        let copies: Vec<NodeSpec> = (1..=up.replicas)
            .map(|j| {
                let port = first + j * n + i;
                spec(format!("127.0.0.1:{port}"), port)
            })
            .collect();
        if !copies.is_empty() {
            config.replicas.insert(format!("node{}", i + 1), copies);
        }
    }
    Ok(())
}

/// Runs `shardis up` over `config.nodes` until Ctrl-C / SIGTERM.
pub async fn run(
    mut config: Config,
    backend: Backend,
    fleet: FleetArgs,
    config_path: Option<PathBuf>,
    stop_signal: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    // Bind the proxy first: if its port is taken, no node was started for nothing.
    let listener = shardis::listen::listen(&config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let top = topology(&config)?;
    let ports = top
        .nodes
        .iter()
        .map(local_port)
        .collect::<Result<Vec<_>, _>>()?;
    let mut replica_ports = Vec::with_capacity(top.replicas.len());
    for (r, _) in &top.replicas {
        replica_ports.push(local_port(&NodeSpec {
            name: r.clone(),
            addr: r.clone(),
            weight: 1,
        })?);
    }
    let node_password = password::resolve(&mut config)?;
    let password = password::for_nodes(
        node_password.as_ref(),
        backend == Backend::RedisServer,
        &config,
    )?;
    let highest = ports.iter().chain(&replica_ports).max();
    let spawner = Arc::new(NodeSpawner {
        exe: std::env::current_exe().map_err(|e| e.to_string())?,
        backend,
        maxmemory: config.up.node_maxmemory,
        next_port: AtomicU32::new(highest.map_or(7001, |&p| p as u32 + 1)),
        password,
        children: Mutex::new(Vec::new()),
        stopping: AtomicBool::new(false),
    });
    let starts = ports.iter().map(|&p| (p, None));
    let replica_starts = replica_ports
        .iter()
        .zip(&top.replicas)
        .map(|(&p, (_, primary))| (p, Some(primary.as_str())));
    for (port, replicaof) in starts.chain(replica_starts) {
        if let Err(e) = spawner.start(port, replicaof).await {
            spawner.stop_all().await;
            return Err(e);
        }
    }
    let kind = match backend {
        Backend::Builtin => "built-in nodes",
        Backend::RedisServer => "redis-server nodes",
    };
    let copies = match replica_ports.len() {
        0 => String::new(),
        n => format!(" and {n} replicas on {}", port_list(&replica_ports)),
    };
    println!(
        "shardis: {} {kind} on {}{copies}, proxy on {} ({} ring, {} points per node). Ctrl-C stops everything.",
        top.nodes.len(),
        port_list(&ports),
        config.listen,
        config.ring.scheme,
        config.ring.vnodes
    );
    password::announce(node_password.as_ref());
    println!(
        "try: redis-cli -p {} SET user:42 hello",
        listener.local_addr().map(|a| a.port()).unwrap_or(0)
    );
    let mut proxy_addr = listener.local_addr().map_err(|e| e.to_string())?;
    if proxy_addr.ip().is_unspecified() {
        proxy_addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    // With users configured the watcher must log in to read CLUSTER RING:
    // a view-only user whose secret never leaves this process.
    let login = if config.auth.has_users() {
        let secret = password::random_hex()?;
        config.auth.add_viewer(restart::USER, &secret);
        Some(secret)
    } else {
        None
    };
    tokio::spawn(restart::watch(
        spawner.clone(),
        proxy_addr.to_string(),
        login,
    ));
    let result = crate::fleet_up::serve(
        listener,
        config,
        fleet,
        spawner.clone(),
        config_path,
        stop_signal,
    )
    .await;
    let stopped = spawner.stop_all().await;
    println!("shardis: stopped the proxy and {stopped} nodes");
    result
}

/// `127.0.0.1:lo..hi` for consecutive ports, else every address.
fn port_list(ports: &[u16]) -> String {
    match (ports.iter().min(), ports.iter().max()) {
        (Some(lo), Some(hi)) if (*hi - *lo) as usize + 1 == ports.len() => {
            format!("127.0.0.1:{lo}..{hi}")
        }
        _ => ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// `shardis up`: the config, the nodes to start, `--check-config`, then the run.
pub(crate) fn run_up(a: crate::UpArgs) -> Result<(), String> {
    let (mut config, file) = match &a.config {
        Some(path) => (Config::load(path)?, path.clone()),
        None if std::path::Path::new(crate::DEFAULT_CONFIG).exists() => (
            Config::load(std::path::Path::new(crate::DEFAULT_CONFIG))?,
            crate::DEFAULT_CONFIG.into(),
        ),
        None => (Config::default(), "(built-in defaults)".into()),
    };
    config.ops.admin_default_on = true;
    if let Some(m) = a.node_maxmemory {
        config.up.node_maxmemory = m;
    }
    if let Some(p) = a.port {
        let host = config
            .listen
            .rsplit_once(':')
            .map(|(h, _)| h.to_string())
            .unwrap_or("127.0.0.1".into());
        config.listen = format!("{host}:{p}");
    }
    generate_nodes(&mut config, &file, a.nodes, a.first_node_port, a.replicas)?;
    check_backend(a.backend)?;
    let fleet = FleetArgs {
        proxies: a.proxies,
        etcd_port: a.etcd_port,
    };
    fleet.check(&config)?;
    if a.check_config {
        // What a start would run (the state file's ring, when it says
        // otherwise), and that it could listen on every port of it.
        let top = topology(&config)?;
        let ports = top
            .addrs()
            .map(|a| ("node", a.to_string()))
            .collect::<Vec<_>>();
        let fleet_ports = fleet.extra_addrs(&config)?;
        crate::check_binds(
            crate::listen_addrs(&config)
                .into_iter()
                .chain(ports)
                .chain(fleet_ports),
        )?;
        crate::print_config(&config);
        return Ok(());
    }
    let path = (file.as_os_str() != "(built-in defaults)").then_some(file);
    crate::runtime(config.threads)?.block_on(async move {
        crate::reload_on_hangup();
        run(config, a.backend, fleet, path, crate::stop_signal()).await
    })
}
