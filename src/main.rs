//! The `shardis` binary: command line, signals, logging, and the process
//! supervision of `shardis up`. Everything else lives in the library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use shardis::proxy::{self, Config};

mod fleet_up;
mod twem_cli;
mod up;

/// The config `shardis up` reads when given none, if it exists.
const DEFAULT_CONFIG: &str = "config/default.toml";

/// A Redis-protocol sharding proxy: consistent hashing over many cache nodes,
/// with nodes added and removed at runtime while clients keep being served.
#[derive(Parser)]
#[command(name = "shardis", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the whole cluster in the foreground: N built-in cache nodes (separate
    /// processes on 127.0.0.1:7001…) and the proxy on 127.0.0.1:7000. Ctrl-C or
    /// SIGTERM stops all of them.
    Up(UpArgs),
    /// Run the proxy alone, over the backends listed in the config file
    /// (built-in nodes or redis-server / valkey).
    Proxy(ProxyArgs),
    /// Run one built-in in-memory cache node.
    Node(NodeArgs),
    /// Distribution science without storing data: up to 10^9 synthetic keys,
    /// imbalance, movement on join/leave, strategies side by side.
    Sim(shardis::sim::SimArgs),
    /// Consistency checker: starts its own cluster and proxy, runs concurrent
    /// clients through ADDNODE, REMOVENODE, a joining node killed mid-copy and a
    /// proxy restarted mid-copy, then verifies every acknowledged operation.
    Check(shardis::check::CheckArgs),
    /// The scripted tour: starts a cluster and a proxy, loads keys, shows the
    /// distribution, adds and removes a node while reading, measures latency,
    /// then stops everything.
    Demo(shardis::demo::DemoArgs),
    /// Print the command table as markdown (the README's list).
    #[command(hide = true)]
    Commands,
    /// Run a program until stdin closes or the parent exits (how `up` keeps
    /// redis-server nodes from outliving it).
    #[command(hide = true)]
    Supervise {
        #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
        cmd: Vec<String>,
    },
}

#[derive(Args)]
pub(crate) struct UpArgs {
    /// Number of built-in nodes to start [default: up.nodes in the config, 10].
    #[arg(long)]
    nodes: Option<usize>,
    /// Proxy port on 127.0.0.1 [default: from proxy.listen, 7000].
    #[arg(long)]
    port: Option<u16>,
    /// First node port; nodes take consecutive ports [default: up.first_node_port, 7001].
    #[arg(long)]
    first_node_port: Option<u16>,
    /// Built-in replicas of each node, 0–2, on the ports after the nodes'
    /// (node1's on first-node-port + nodes) [default: up.replicas, 0].
    #[arg(long)]
    replicas: Option<usize>,
    /// Memory limit of each node in bytes, 0 = unlimited [default: up.node_maxmemory].
    #[arg(long)]
    node_maxmemory: Option<u64>,
    /// Configuration file (TOML); it must exist. Without this flag, up reads
    /// config/default.toml if there is one, else uses built-in defaults. Its
    /// [[nodes]], if any, are the nodes up starts (names, ports, weights).
    #[arg(long)]
    config: Option<PathBuf>,
    /// What to run as nodes: the built-in node, or redis-server (must be installed).
    #[arg(long, value_enum, default_value = "builtin")]
    backend: up::Backend,
    /// Proxies sharing the topology through etcd (a local etcd `up` starts
    /// when the config names none): on --port, --port + 100, … [default: 1].
    #[arg(long, default_value_t = 1)]
    proxies: usize,
    /// Client port of the local etcd under --proxies (its peer port is the next).
    #[arg(long, default_value_t = fleet_up::DEFAULT_ETCD_PORT)]
    etcd_port: u16,
    /// Validate the configuration, print a summary and exit.
    #[arg(long)]
    check_config: bool,
}

#[derive(Args)]
struct ProxyArgs {
    /// Configuration file: shardis TOML listing the backend nodes, or
    /// twemproxy's nutcracker.yml (by extension .yml / .yaml, or content).
    #[arg(long, short = 'c', required_unless_present = "describe_stats")]
    config: Option<PathBuf>,
    /// Override proxy.listen (host:port).
    #[arg(long)]
    listen: Option<String>,
    /// Validate the configuration, print a summary and exit.
    #[arg(long)]
    check_config: bool,
    /// Exit when the parent process exits (used by `shardis demo`).
    #[arg(long, hide = true)]
    exit_with_parent: bool,
    #[command(flatten)]
    twem: twem_cli::TwemArgs,
}

#[derive(Args)]
struct NodeArgs {
    /// TCP port to listen on.
    #[arg(long)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Memory limit in bytes for keys and values; past it, approximately
    /// least-recently-used keys are evicted. 0 = unlimited.
    #[arg(long, default_value_t = 0)]
    maxmemory: u64,
    /// Runtime worker threads. 1 (the default) is a current-thread runtime:
    /// `up` runs ten nodes on two cores. More threads serve clients in
    /// parallel; transactions stay atomic either way.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    /// Replicate from this built-in node (host:port) from the start, as
    /// `REPLICAOF host port` does.
    #[arg(long, value_name = "HOST:PORT")]
    replicaof: Option<String>,
    /// Exit when the parent process exits (used by `shardis up`, so nodes never outlive it).
    #[arg(long, hide = true)]
    exit_with_parent: bool,
    /// Clients must AUTH with this password first (as Redis's `requirepass`).
    #[arg(long)]
    requirepass: Option<String>,
    /// The password a replica sends its primary (`AUTH`), as Redis's
    /// `masterauth`; CONFIG SET masterauth changes it at run time.
    #[arg(long)]
    masterauth: Option<String>,
    /// The user `--masterauth` is for [default: default].
    #[arg(long, requires = "masterauth")]
    masteruser: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (level, log_file) = match &cli.cmd {
        Cmd::Proxy(a) => (a.twem.log_filter(), a.twem.output.as_deref()),
        _ => ("info", None),
    };
    if let Err(e) = init_logging(level, log_file) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    log_panics();
    let result = match cli.cmd {
        Cmd::Up(a) => up::run_up(a),
        Cmd::Supervise { cmd } => shardis::procs::supervise(&cmd),
        Cmd::Proxy(a) => run_proxy(a),
        Cmd::Node(a) => node(a),
        Cmd::Sim(a) => shardis::sim::run(&a, &mut std::io::stdout().lock()),
        Cmd::Commands => {
            print!("{}", shardis::proxy::policy::markdown_table());
            Ok(())
        }
        Cmd::Check(a) => match shardis::check::run(&a) {
            Ok(true) => Ok(()),
            Ok(false) => Err("consistency violations found (see the report above)".into()),
            Err(e) => Err(e),
        },
        Cmd::Demo(a) => shardis::demo::run(&a),
    };
    // A child (node or proxy of `check` or `demo`) that panicked fails the run.
    let panics = shardis::procs::child_panics();
    let result = match result {
        Ok(()) if !panics.is_empty() => Err(format!(
            "{} child process(es) panicked:\n{}",
            panics.len(),
            panics.join("\n")
        )),
        r => r,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr, or appended to `file`, at `level` unless RUST_LOG says.
fn init_logging(level: &str, file: Option<&Path>) -> Result<(), String> {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match file {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("-o {}: {e}", path.display()))?;
            builder
                .with_writer(std::sync::Mutex::new(f))
                .with_ansi(false)
                .init();
        }
        None => builder
            .with_writer(std::io::stderr)
            // Colour only on a terminal: a log file or a test's capture gets plain text.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
    Ok(())
}

/// Logs every panic through tracing (so it reaches the log with the rest),
/// then prints Rust's own message as usual: both say `panicked at`, which the
/// test harness and `check` look for in a child's stderr.
fn log_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        tracing::error!("thread '{}' {info}", thread.name().unwrap_or("<unnamed>"));
        default(info);
    }));
}

/// The proxy's runtime: `threads` workers; 1 is a current-thread runtime,
/// which avoids cross-thread wake-ups entirely. 0 = automatic: one thread on
/// machines of up to 2 cores (measured faster there: the benchmark clients and
/// the nodes need the other core), one per core above that.
fn runtime(threads: usize) -> Result<tokio::runtime::Runtime, String> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let threads = match threads {
        0 if cores <= 2 => 1,
        0 => cores,
        n => n,
    };
    let mut b = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    if threads > 1 {
        b.worker_threads(threads);
    }
    // A node's scripts run on the runtime's blocking threads, and turning a
    // script's deeply nested table into a reply recurses once per level (up
    // to the 1000 levels the reply allows): room for that in any build.
    b.thread_stack_size(THREAD_STACK_BYTES);
    b.enable_all().build().map_err(|e| e.to_string())
}

/// Stack of every runtime thread (tokio's default is 2 MiB).
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

/// On every SIGHUP, the config file and the TLS certificates and keys are
/// read again (clients already connected keep their sessions).
fn reload_on_hangup() {
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            proxy::reload_certificates();
            proxy::reload_config();
        }
    });
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}

fn print_config(c: &Config) {
    println!(
        "config ok: listen {}, ring {} with {} points per node",
        c.listen, c.ring.scheme, c.ring.vnodes
    );
    for n in &c.nodes {
        println!("  node {} at {} weight {}", n.name, n.addr, n.weight);
        for r in c.replicas.get(&n.name).into_iter().flatten() {
            println!("    replica at {}", r.addr);
        }
    }
}

/// For `--check-config`: every address the start would listen on can be
/// bound now (bound, then let go), so a port already taken is reported
/// here rather than by the real start.
fn check_binds<'a>(addrs: impl IntoIterator<Item = (&'a str, String)>) -> Result<(), String> {
    for (what, addr) in addrs {
        if let Err(e) = std::net::TcpListener::bind(addr.as_str()) {
            return Err(format!(
                "{what} {addr}: cannot listen there: {e} (is another shardis or redis-server running?)"
            ));
        }
    }
    Ok(())
}

/// The listen addresses of `config`: the proxy's, and the admin listener's
/// when configured (a defaulted one that is taken is only skipped, by `up`).
fn listen_addrs(config: &Config) -> Vec<(&'static str, String)> {
    let mut addrs = vec![("proxy listen", config.listen.clone())];
    if let Some((admin, true)) = config.ops.admin_listen() {
        addrs.push(("admin listen", admin));
    }
    addrs
}

fn run_proxy(a: ProxyArgs) -> Result<(), String> {
    if a.twem.describe_stats {
        print!("{}", proxy::twem::stats::describe());
        return Ok(());
    }
    let Some(path) = a.config.clone() else {
        return Err("--config: a configuration file is required".into());
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if proxy::twem::is_yaml(&path, &text) {
        return run_nutcracker(a, &path);
    }
    let t = &a.twem;
    if t.stats_port.is_some()
        || t.stats_addr.is_some()
        || t.daemonize
        || t.pid_file.is_some()
        || t.state_dir.is_some()
    {
        return Err(format!(
            "{}: -s, -a, -d, -p and --state-dir are for a nutcracker.yml; a TOML config sets proxy.state_file and [admin]",
            path.display()
        ));
    }
    let mut config = Config::load(&path)?;
    if let Some(l) = a.listen {
        proxy::config::check_host_port("--listen", &l)?;
        config.auth.check_protected("--listen", &l)?;
        config.listen = l;
    }
    let saved = match &config.state_file {
        Some(path) => proxy::admin::state::load(path)
            .map_err(|e| e.to_string())?
            .is_some(),
        None => false,
    };
    if config.nodes.is_empty() && !saved && config.topology.etcd().is_none() {
        return Err(format!(
            "{}: nodes: at least one [[nodes]] entry is required; this file lists none, like config/default.toml, which is for `shardis up` (it starts its own nodes). For `shardis proxy`, list the backends as config/redis-servers.toml does",
            path.display()
        ));
    }
    if a.check_config || a.twem.test_conf {
        check_binds(listen_addrs(&config))?;
        print_config(&config);
        return Ok(());
    }
    if a.exit_with_parent {
        exit_with_parent();
    }
    runtime(config.threads)?.block_on(async move {
        reload_on_hangup();
        let listener = shardis::listen::listen(&config.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let pool = proxy::Pool::from_config(config).reloadable_from(path);
        proxy::run(listener, pool, stop_signal()).await
    })
}

/// `shardis proxy --config nutcracker.yml`: every pool of the file.
fn run_nutcracker(a: ProxyArgs, path: &Path) -> Result<(), String> {
    if a.listen.is_some() {
        return Err("--listen: a nutcracker.yml gives each pool its own listen:".into());
    }
    let opts = proxy::twem::Options {
        state_dir: a.twem.state_dir.clone(),
        stats: a.twem.stats(),
    };
    if a.check_config || a.twem.test_conf {
        return twem_cli::test_conf(path, &opts);
    }
    if a.exit_with_parent {
        exit_with_parent();
    }
    twem_cli::run(path, &opts, &a.twem, stop_signal, || runtime(0))
}

/// Exits this process soon after its parent exits (polled: portable, and
/// 200 ms is quick enough for a supervisor that died without cleaning up).
fn exit_with_parent() {
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(200));
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(0);
        }
    });
}

fn node(a: NodeArgs) -> Result<(), String> {
    if a.exit_with_parent {
        exit_with_parent();
    }
    let replicaof = match &a.replicaof {
        None => None,
        Some(addr) => {
            let (host, port) = addr
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
                .ok_or_else(|| format!("--replicaof {addr}: expected host:port"))?;
            Some((host, port))
        }
    };
    // One thread per node by default: `up` runs ten of them on two cores,
    // and a current-thread runtime avoids cross-thread wakeups on every request.
    runtime(a.threads as usize)?.block_on(async move {
        let addr = format!("{}:{}", a.bind, a.port);
        let listener = shardis::listen::listen(&addr)
            .await
            .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let config = shardis::backend::NodeConfig {
            maxmemory: a.maxmemory,
            replicaof,
            requirepass: a
                .requirepass
                .or_else(|| std::env::var(up::password::ENV_REQUIREPASS).ok())
                .as_deref()
                .filter(|p| !p.is_empty())
                .map(shardis::backend::NodeConfig::password_digest),
            masterauth: a
                .masterauth
                .or_else(|| std::env::var(up::password::ENV_MASTERAUTH).ok())
                .filter(|p| !p.is_empty())
                .map(|password| shardis::backend::MasterAuth {
                    user: a.masteruser.filter(|u| !u.is_empty()),
                    password,
                }),
            ..Default::default()
        };
        shardis::backend::run(listener, config, stop_signal())
            .await
            .map_err(|e| e.to_string())
    })
}
