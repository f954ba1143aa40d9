//! Serving a twemproxy `nutcracker.yml`: every pool of the file at once,
//! each on its own listener (TCP `host:port` or a unix socket), each with a
//! ring placing keys exactly as twemproxy would.
//!
//! Called by `main.rs` for `shardis proxy --config nutcracker.yml`. The file
//! is read by [`crate::nutcracker`] (pure); this module maps each pool to a
//! proxy [`Pool`], binds the listeners, and runs the pools side by side
//! until shutdown. It never writes the YAML: topology changes go to each
//! pool's state file.

pub(crate) mod eject;
mod pool;
pub mod stats;
mod stats_table;
mod unix;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::nutcracker::{self, Listen};
use crate::proxy::{Pool, Proxy};

/// One pool of the file, ready to serve.
pub struct Served {
    pub name: String,
    pub listen: Listen,
    pub pool: Pool,
}

/// How the pools of a file are started.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Where each pool keeps its state file (`{pool}.state`); `None`: in
    /// memory only.
    pub state_dir: Option<PathBuf>,
    /// The stats port's `host:port`, and whether it was asked for (a
    /// default one that is taken is only skipped, with a warning).
    pub stats: Option<(String, bool)>,
}

/// Whether `text` (from `path`) is a `nutcracker.yml` rather than TOML: by
/// its extension, else by its first directive line (`name:` opens a YAML
/// mapping; TOML has `[section]` or `key = value`).
pub fn is_yaml(path: &Path, text: &str) -> bool {
    match path.extension().and_then(|e| e.to_str()) {
        Some("yml" | "yaml") => return true,
        Some("toml") => return false,
        _ => {}
    }
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    match first {
        Some("---") => true,
        Some(l) => {
            let colon = l.find(':');
            !l.starts_with('[') && colon.is_some_and(|c| l.find('=').is_none_or(|e| c < e))
        }
        None => false,
    }
}

/// Reads `path` into the pools to serve, and the warnings to print.
pub fn load(path: &Path, opts: &Options) -> Result<(Vec<Served>, Vec<String>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = path.display().to_string();
    let parsed = nutcracker::parse(&file, &text).map_err(|e| e.to_string())?;
    let mut warnings = parsed.warnings;
    let mut served = Vec::with_capacity(parsed.pools.len());
    for p in &parsed.pools {
        let pool = pool::pool_of(&file, p, opts.state_dir.as_deref(), &mut warnings)?;
        served.push(Served {
            name: p.name.clone(),
            listen: p.listen.clone(),
            pool,
        });
    }
    Ok((served, warnings))
}

/// What a listener of a pool is, for logs and `-t`.
pub fn describe(listen: &Listen) -> String {
    match listen {
        Listen::Tcp { host, port } => format!("{host}:{port}"),
        Listen::Unix { path, .. } => path.clone(),
    }
}

/// Binds every pool's listener (all or none) and the stats port, then
/// serves them all until `shutdown` completes, and drains each.
pub async fn run(
    served: Vec<Served>,
    opts: &Options,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let stats = match &opts.stats {
        Some((addr, asked)) => match crate::listen::listen(addr).await {
            Ok(l) => Some(l),
            Err(e) if *asked => return Err(format!("stats port {addr}: {e}")),
            Err(e) => {
                tracing::warn!("stats port {addr}: {e}; serving without it (set -s)");
                None
            }
        },
        None => None,
    };
    let mut bound = Vec::with_capacity(served.len());
    for s in served {
        let what = format!("pool '{}': listen {}", s.name, describe(&s.listen));
        let backlog = s.pool.config.backlog;
        let tcp = crate::listen::listen_with(&s.pool.config.listen, backlog)
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        let socket = match &s.listen {
            Listen::Unix { path, perm } => {
                Some(unix::Socket::bind(path, *perm).map_err(|e| format!("{what}: {e}"))?)
            }
            Listen::Tcp { .. } => None,
        };
        bound.push((s, tcp, socket));
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::with_capacity(bound.len());
    let mut board = stats::Board {
        started: std::time::Instant::now(),
        pools: Vec::new(),
    };
    for (s, tcp, socket) in bound {
        let port = tcp.local_addr().map(|a| a.port()).unwrap_or(0);
        let local = tcp.local_addr().map_err(|e| e.to_string())?;
        let proxy =
            Proxy::new(s.pool, port, None).map_err(|e| format!("pool '{}': {e}", s.name))?;
        start(&proxy);
        board.pools.push((s.name.clone(), proxy.clone()));
        tracing::info!(pool = %s.name, listen = %describe(&s.listen), nodes = proxy.routing.load().shards.len(), "pool ready");
        let mut stopped = stopped.clone();
        let bridge = socket.map(|sock| {
            tracing::debug!(path = %sock.path().display(), "unix socket bridged");
            tokio::spawn(sock.bridge(local))
        });
        tasks.push(tokio::spawn(async move {
            let until = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            crate::proxy::serve(tcp, proxy, until).await;
            if let Some(b) = bridge {
                b.abort();
            }
        }));
    }
    let stats = stats.map(|l| tokio::spawn(stats::serve(l, Arc::new(board))));
    shutdown.await;
    if let Some(s) = stats {
        s.abort();
    }
    let _ = stop.send(true);
    for t in tasks {
        let _ = t.await;
    }
    Ok(())
}

/// What a pool starts beside its accept loop: the hot-key ticker, and its
/// connections when `preconnect` asks for them.
fn start(proxy: &Arc<Proxy>) {
    tokio::spawn(crate::proxy::ops::hotkeys::run_ticker(Arc::downgrade(
        proxy,
    )));
    if let Some(policy) = proxy.config().eject {
        tokio::spawn(eject::run(Arc::downgrade(proxy), policy));
    }
    if proxy.config().preconnect {
        for shard in proxy.routing.load().shards.iter() {
            shard.primary().preconnect();
        }
    }
}
