//! The proxy: listener, client sessions, routing, upstream connections,
//! multi-key split and merge, local and admin commands, topology state and
//! online migration.
//!
//! ```text
//!  client ─► session ─decode─► command table ─► route ──ring.locate(key)──► node's upstream ─► node
//!              ▲                                  │ (split / fan-out / local / admin)            │
//!              └──────── replies in request order ◄──────────── FIFO-matched replies ◄───────────┘
//! ```
//!
//! Entry point: [`run`]. Uses `resp` and `ring`; never clap or signals.

pub mod admin;
pub mod commands;
pub mod config;
pub(crate) mod conn;
pub(crate) mod dispatch;
pub(crate) mod ha;
pub mod ops;
pub mod policy;
pub(crate) mod pool;
pub mod route;
pub(crate) mod session;
mod slot;
mod stats;
pub mod twem;
pub(crate) mod upstream;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

/// Reads every proxy's config file again (`main.rs` calls it on SIGHUP,
/// as `CONFIG RELOAD` does for one proxy).
pub use admin::reload::request_reload as reload_config;
pub use config::Config;
/// Re-reads every TLS certificate and key (`main.rs` calls it on SIGHUP).
pub use conn::tls::request_reload as reload_certificates;
pub use pool::Pool;
use session::ClientSession;
pub(crate) use slot::ClientSlot;
pub(crate) use stats::Stats;
use upstream::shard::Shard;
use upstream::topology::{new_node, Node, Routing};

use crate::ring::{NodeSpec, Ring};

/// State shared by every session of one proxy.
pub(crate) struct Proxy {
    /// Swapped whole by a reload (`reload.rs`): read it with
    /// [`Proxy::config`] where the work starts, so new work sees the new
    /// limits while work in flight keeps the ones it began with.
    config: ArcSwap<Config>,
    /// The upstream timeouts every node's connections read live (a reload
    /// sets them; see `upstream::Timeouts`).
    pub(crate) timeouts: Arc<upstream::Timeouts>,
    /// The file the config came from, for `CONFIG RELOAD` and SIGHUP
    /// (`None`: built in memory; a reload is refused).
    pub(crate) config_path: Option<std::path::PathBuf>,
    /// Held while a reload applies its node changes, one at a time.
    pub(crate) reloading: tokio::sync::Mutex<()>,
    /// The port actually bound (config may say 0).
    pub(crate) port: u16,
    /// Read on every request; replaced whole on topology change.
    pub(crate) routing: ArcSwap<Routing>,
    pub(crate) stats: Stats,
    pub(crate) next_client_id: AtomicU64,
    pub(crate) started: Instant,
    /// Nodes by name, so a node keeps its connections across epochs. A std
    /// mutex: held only to look up or insert, never across `.await`.
    pool: Mutex<HashMap<String, Arc<Node>>>,
    /// One topology change at a time (held across the change's awaits).
    pub(crate) admin_lock: tokio::sync::Mutex<()>,
    pub(crate) migration: admin::migration::Tracker,
    /// Query buffer bytes of all clients, under `max_query_buffer_total`.
    pub(crate) query_buffers: conn::budget::QueryBuffers,
    /// Reply bytes owed to all clients, under `max_output_buffer_total`.
    pub(crate) reply_total: Arc<conn::owed::ReplyTotal>,
    /// Set when the proxy starts draining: sessions read no more requests,
    /// answer what they owe, and end.
    pub(crate) draining: AtomicBool,
    /// Each live session's entry: what CLIENT LIST shows, the budget through
    /// which the drain and CLIENT KILL wake it. A std mutex: taken when a
    /// session starts or ends, by the drain, and by CLIENT LIST / KILL to
    /// copy the entries out; never per request, never across `.await`.
    pub(crate) sessions: Mutex<HashMap<u64, Arc<commands::clients::ClientEntry>>>,
    /// The clients in MONITOR mode.
    pub(crate) monitors: commands::monitor::Monitors,
    /// Starts a new built-in node on request (`CLUSTER SPAWNNODE`); present
    /// only when the proxy runs under `shardis up`, which owns the processes.
    pub(crate) spawner: Option<Arc<dyn Spawner>>,
    /// Metrics, hot keys, hot-shard tripwire, slow log (the operator plane).
    pub(crate) ops: ops::Ops,
    /// Where the topology is kept between runs (`None`: nowhere).
    pub(crate) store: Option<Arc<dyn admin::store::TopologyStore>>,
    /// The step every request passes before dispatch.
    pub(crate) auth: conn::auth::Auth,
    /// The channels and patterns the proxy's subscribers hold (PUBSUB
    /// NUMPAT, INFO).
    pub(crate) subscriptions: commands::pubsub::Held,
    /// Keyspace notifications of every node for the subscribers of each.
    pub(crate) keyfeed: commands::pubsub::KeyFeed,
    /// Script bodies loaded on every node (`route::scripts`).
    pub(crate) scripts: route::scripts::ScriptCache,
    /// Blocking pops over several nodes, woken by the writes routed here.
    pub(crate) wake: Arc<route::wake::Wake>,
    /// Replicas, member status, failover (see `ha`).
    pub(crate) ha: Arc<ha::Ha>,
    /// `Some`: every ring of this proxy places keys as this twemproxy pool
    /// would (see [`Proxy::ring`]).
    pub(crate) placement: Option<crate::ring::Placement>,
    /// Servers `auto_eject_hosts` has taken out of the ring right now.
    pub(crate) ejected: twem::eject::Ejected,
}

/// Starts a node process and returns its address once it answers PING.
pub trait Spawner: Send + Sync {
    fn spawn(&self) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + '_>>;

    /// Stops the node process at `addr` if this spawner started it: called
    /// once the node is out of the ring and its keys were swept.
    fn retire(&self, _addr: &str) {}
}

/// Why [`Proxy::new`] could not build the proxy's state; `Display` is the
/// one place that words it (the start-up error the operator reads).
#[derive(Debug)]
pub(crate) enum StartError {
    /// The state file could not be read.
    State(admin::state::StateError),
    /// The nodes do not make a ring.
    Ring(crate::ring::RingError),
    /// The unfinished change the state file records could not be resumed.
    Resume(admin::migration::MigrationError),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::State(e) => write!(f, "{e}"),
            StartError::Ring(e) => write!(f, "nodes: {e}"),
            StartError::Resume(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

impl Proxy {
    /// Builds the proxy's state for a pool (and its persisted topology, if any).
    pub(crate) fn new(
        pool: Pool,
        port: u16,
        spawner: Option<Arc<dyn Spawner>>,
    ) -> Result<Arc<Proxy>, StartError> {
        let config = &pool.config;
        let host = config
            .listen
            .rsplit_once(':')
            .map_or("127.0.0.1", |(h, _)| h);
        let store = admin::store::open(
            &config.topology,
            config.state_file.as_deref(),
            format!("{host}:{port}"),
        )
        .map_err(StartError::State)?;
        let config_replicas = ha::replica_addrs(
            &pool
                .shards
                .iter()
                .filter(|s| !s.replicas.is_empty())
                .map(|s| (s.primary.name.clone(), s.replicas.clone()))
                .collect(),
        );
        let seed = admin::state::Saved {
            epoch: 1,
            nodes: pool.primaries(),
            migration: None,
            pending_sweep: Vec::new(),
            replicas: config_replicas.clone(),
        };
        let saved = match &store {
            Some(store) if seed.nodes.is_empty() => store.load().map_err(StartError::State)?,
            Some(store) => store.load_or_seed(&seed).map_err(StartError::State)?,
            None => None,
        };
        let (specs, epoch) = match &saved {
            Some(s) => (s.nodes.clone(), s.epoch),
            None => (seed.nodes, 1),
        };
        if let (Some(s), Some(store)) = (&saved, &store) {
            let path = store.name();
            let diff = admin::state::topology_difference(&config.nodes, &s.nodes);
            if diff.is_empty() {
                tracing::info!(store = %path, epoch = s.epoch, nodes = s.nodes.len(), "topology from the store, as the config lists it");
            } else {
                tracing::warn!(store = %path, epoch = s.epoch, nodes = s.nodes.len(), differences = %diff.join("; "), "topology from the store, which overrides the config's nodes");
            }
        }
        let ring = pool.ring(specs, epoch).map_err(StartError::Ring)?;
        // The saved replicas when there are any (a failover changed them),
        // else the config's.
        let replicas = match &saved {
            Some(s) if !s.replicas.is_empty() => s.replicas.clone(),
            _ => config_replicas,
        };
        let ha = Arc::new(ha::Ha::new(config.ha, replicas));
        let timeouts =
            upstream::Timeouts::new(config.connect_timeout_ms, config.request_timeout_ms);
        let nodes: HashMap<String, Arc<Node>> = ring
            .nodes()
            .iter()
            .map(|spec| {
                (
                    spec.name.clone(),
                    Arc::new(new_node(spec, config, &timeouts)),
                )
            })
            .collect();
        let shards = ring
            .nodes()
            .iter()
            .map(|spec| {
                let replicas = ha.replica_nodes(&spec.name, config, &timeouts);
                Arc::new(Shard::new(nodes[&spec.name].clone(), replicas))
            })
            .collect();
        let (config, auth, config_path) = (pool.config, pool.auth, pool.config_path);
        let proxy = Arc::new(Proxy {
            port,
            routing: ArcSwap::from_pointee(Routing::new(Arc::new(ring), shards, None, false)),
            stats: Stats::default(),
            next_client_id: AtomicU64::new(1),
            started: Instant::now(),
            pool: Mutex::new(nodes),
            admin_lock: tokio::sync::Mutex::new(()),
            migration: admin::migration::Tracker::default(),
            query_buffers: conn::budget::QueryBuffers::new(config.max_query_buffer_total),
            reply_total: conn::owed::ReplyTotal::new(config.max_output_buffer_total),
            draining: AtomicBool::new(false),
            sessions: Mutex::new(HashMap::new()),
            monitors: commands::monitor::Monitors::default(),
            spawner,
            ops: ops::Ops::new(&config.ops),
            store,
            auth,
            subscriptions: Default::default(),
            keyfeed: Default::default(),
            scripts: Default::default(),
            wake: Default::default(),
            ha,
            ejected: Default::default(),
            placement: pool.twemproxy,
            config: ArcSwap::from_pointee(config),
            timeouts,
            config_path,
            reloading: tokio::sync::Mutex::new(()),
        });
        match saved {
            // In a fleet the leader resumes a change; every proxy routes by it.
            Some(s) if admin::fleet::fleet(&proxy).is_some() => {
                admin::migration::follow::apply(&proxy, &s).map_err(StartError::Resume)?;
            }
            Some(s) => admin::migration::resume(&proxy, s).map_err(StartError::Resume)?,
            None => {}
        }
        if let (Some(f), Some(store)) = (admin::fleet::fleet(&proxy), &proxy.store) {
            // It routes by what it just read (or seeded) under its lease.
            f.routed_by(store.revision());
        }
        Ok(proxy)
    }

    /// The config as it is now: what new work starts with (a reload swaps
    /// it; work already started keeps the copy it took).
    pub(crate) fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// The ring over `nodes` at `epoch`, placed the pool's way (as
    /// [`Pool::ring`]): what a resumed change is rebuilt with.
    pub(crate) fn ring(
        &self,
        nodes: Vec<NodeSpec>,
        epoch: u64,
    ) -> Result<Ring, crate::ring::RingError> {
        pool::place(self.placement, self.config().ring, nodes, epoch)
    }

    /// The shard at each of `ring`'s entries, its primary the pooled node
    /// of that name (created if missing).
    pub(crate) fn shards_for(&self, ring: &Ring) -> Vec<Arc<Shard>> {
        let config = self.config();
        let mut pool = self.pool.lock().expect("pool lock");
        ring.nodes()
            .iter()
            .map(|spec| {
                let primary = pool
                    .entry(spec.name.clone())
                    .or_insert_with(|| Arc::new(new_node(spec, &config, &self.timeouts)))
                    .clone();
                let replicas = self.ha.replica_nodes(&spec.name, &config, &self.timeouts);
                Arc::new(Shard::new(primary, replicas))
            })
            .collect()
    }

    /// After a failover: the pooled primary of shard `name` is a new node
    /// at `addr` (fresh connections; the old primary's are dropped).
    pub(crate) fn replace_primary(&self, name: &str, addr: &str) {
        let mut pool = self.pool.lock().expect("pool lock");
        let weight = pool.get(name).map_or(1, |n| n.spec.weight);
        let spec = NodeSpec {
            name: name.to_string(),
            addr: addr.to_string(),
            weight,
        };
        let node = new_node(&spec, &self.config(), &self.timeouts);
        pool.insert(name.to_string(), Arc::new(node));
    }

    /// Every node this proxy has connections for: the ring's, in ring
    /// order, then any other (ejected, or leaving).
    pub(crate) fn known_nodes(&self) -> Vec<Arc<Node>> {
        let routing = self.routing.load();
        let mut out: Vec<Arc<Node>> = routing.primaries().cloned().collect();
        let pool = self.pool.lock().expect("pool lock");
        let mut rest: Vec<&Arc<Node>> = pool
            .values()
            .filter(|n| !out.iter().any(|o| Arc::ptr_eq(o, n)))
            .collect();
        rest.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        out.extend(rest.into_iter().cloned());
        out
    }

    /// Drops a node's pooled connections (after it left the ring and was
    /// swept), and stops its process if this proxy's `up` started it.
    pub(crate) fn release(&self, name: &str) {
        let node = self.pool.lock().expect("pool lock").remove(name);
        if let (Some(node), Some(spawner)) = (node, &self.spawner) {
            spawner.retire(&node.spec.addr);
        }
    }
}

/// Serves one pool's clients on `listener` until `shutdown` completes, then
/// drains: stops accepting, answers the replies clients are owed (at most
/// `drain_timeout_ms`), and returns.
pub async fn run(
    listener: TcpListener,
    pool: Pool,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    run_with(listener, pool, None, shutdown).await
}

/// [`run`], with a node spawner for `CLUSTER SPAWNNODE`.
pub async fn run_with(
    listener: TcpListener,
    pool: Pool,
    spawner: Option<Arc<dyn Spawner>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let proxy = Proxy::new(pool, port, spawner).map_err(|e| e.to_string())?;
    let routing = proxy.routing.load();
    tracing::info!(listen = %proxy.config().listen, nodes = routing.shards.len(), epoch = routing.ring.epoch(), "proxy ready");
    drop(routing);
    // Dropping `stop` ends the admin listener with the proxy.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some((listen, configured)) = proxy.config().ops.admin_listen() {
        let stop = async move {
            let _ = stopped.await;
        };
        match ops::http::start(proxy.clone(), &listen, stop).await {
            Ok(_) => {}
            Err(e) if configured => return Err(e),
            // The default port is taken (another `shardis up`, say): serve
            // without the admin API rather than not at all.
            Err(e) => tracing::warn!("{e}; the admin HTTP API is off (set [admin] listen)"),
        }
    }
    tokio::spawn(ops::hotkeys::run_ticker(Arc::downgrade(&proxy)));
    ha::monitor::start(&proxy);
    if proxy.config().ha.mode == config::ha::FailoverMode::Sentinel {
        ha::sentinel::start(&proxy);
    }
    admin::fleet::spawn(&proxy);
    admin::reload::follow_reloads(&proxy);
    // Dropping `tls_stop` ends the TLS listener with the proxy.
    let tls_stop = conn::tls::start(&proxy).await?;
    serve(listener, proxy, shutdown).await;
    drop((stop, tls_stop));
    Ok(())
}

/// Accept loop over an already-built proxy.
pub(crate) async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    // `[tls] plaintext = false`: only the TLS listener serves.
    if proxy.config().tls.as_ref().is_some_and(|t| !t.plaintext) {
        drop(listener);
        shutdown.await;
        return drain(&proxy).await;
    }
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let (mut sock, _) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        proxy.stats.connections.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = ClientSlot::take(&proxy) else {
            proxy.stats.rejected.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = sock
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
            });
            continue;
        };
        let p = proxy.clone();
        tokio::spawn(async move {
            let _slot = slot;
            ClientSession::run(p, sock).await;
        });
    }
    // From here new connections are refused.
    drop(listener);
    drain(&proxy).await;
}

/// Asks every session to stop reading and answer what it owes, then waits
/// until all have ended or `drain_timeout_ms` passed.
async fn drain(proxy: &Proxy) {
    proxy.draining.store(true, Ordering::SeqCst);
    for client in proxy
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
    {
        client.budget.wake();
    }
    let timeout = Duration::from_millis(proxy.config().drain_timeout_ms);
    let deadline = tokio::time::Instant::now() + timeout;
    let clients = || proxy.stats.clients.load(Ordering::Relaxed);
    tracing::info!(clients = clients(), "draining: answering owed replies");
    // Polled: sessions end at their own pace and a 10 ms tick costs nothing
    // next to a drain that may take seconds.
    while clients() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    match clients() {
        0 => tracing::info!("drained"),
        n => tracing::warn!(
            clients = n,
            timeout_ms = timeout.as_millis() as u64,
            "drain timed out; closing the remaining clients"
        ),
    }
}
