//! The node processes of `shardis up`: started, restarted, stopped, and
//! grown by `CLUSTER SPAWNNODE` (the proxy's [`proxy::Spawner`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::process::{Child, Command};

use shardis::proxy;

use super::{password, Backend};

/// How long a node may take to answer its first PING.
const START_TIMEOUT_MS: u64 = 10_000;
/// How long a supervised redis-server gets to stop before it is killed.
const STOP_GRACE_MS: u64 = 2_000;

/// Starts and owns the node processes of `shardis up` — the first ones and
/// any added later with `CLUSTER SPAWNNODE`. Children are killed on drop too.
pub struct NodeSpawner {
    pub(super) exe: PathBuf,
    pub(super) backend: Backend,
    pub(super) maxmemory: u64,
    pub(super) next_port: AtomicU32,
    /// The nodes' `requirepass` (and replicas' `masterauth`), and for
    /// redis-server the 0600 config file that holds it.
    pub(super) password: Option<(String, Option<PathBuf>)>,
    /// (address, process). A std mutex: held only to push or take, never
    /// across `.await`.
    pub(super) children: Mutex<Vec<(String, Child)>>,
    /// Set by [`NodeSpawner::stop_all`]: no node is started after it.
    pub(super) stopping: AtomicBool,
}

impl NodeSpawner {
    /// The command line of a node on `port`; a replica's names its primary.
    pub(super) fn command(&self, port: u16, replicaof: Option<&str>) -> Command {
        let port = port.to_string();
        match self.backend {
            Backend::Builtin => {
                let mut c = Command::new(&self.exe);
                c.args(["node", "--port", &port, "--exit-with-parent"])
                    .args(["--maxmemory", &self.maxmemory.to_string()]);
                if let Some((pw, _)) = &self.password {
                    c.env(password::ENV_REQUIREPASS, pw)
                        .env(password::ENV_MASTERAUTH, pw);
                }
                if let Some(primary) = replicaof {
                    c.args(["--replicaof", primary]);
                }
                c
            }
            Backend::RedisServer => {
                let mut c = Command::new(&self.exe);
                c.args(["supervise", "--", "redis-server"]);
                if let Some((_, Some(conf))) = &self.password {
                    c.arg(conf);
                }
                c.args(["--port", &port])
                    .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                    // A burst of pinned connections (clients blocking at
                    // once) must not overflow the accept queue (src/listen.rs).
                    .args(["--tcp-backlog", "4096"]);
                if self.maxmemory > 0 {
                    c.args(["--maxmemory", &self.maxmemory.to_string()])
                        .args(["--maxmemory-policy", "allkeys-lru"]);
                }
                if let Some((host, port)) = replicaof.and_then(|p| p.rsplit_once(':')) {
                    // Diskless: a full sync writes no RDB file in `up`'s directory.
                    c.args(["--replicaof", host, port])
                        .args(["--repl-diskless-sync", "yes"])
                        .args(["--repl-diskless-load", "on-empty-db"]);
                }
                // Closing this pipe (or `up` dying) tells `supervise` to stop.
                c.stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null());
                c
            }
        }
    }

    /// Starts a node on `port` (a replica of `replicaof`) and waits
    /// (bounded) until it answers PING.
    pub(super) async fn start(&self, port: u16, replicaof: Option<&str>) -> Result<String, String> {
        if self.is_stopping() {
            return Err("up is stopping".into());
        }
        let mut proc = self
            .command(port, replicaof)
            // Its own process group: a terminal's Ctrl-C reaches `up` alone,
            // which drains the proxy before it stops the nodes.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start node on port {port}: {e}"))?;
        let addr = format!("127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + Duration::from_millis(START_TIMEOUT_MS);
        loop {
            if let Ok(Some(status)) = proc.try_wait() {
                return Err(format!(
                    "node on port {port} exited during start-up ({status}); is the port in use?"
                ));
            }
            if self.answers_ping(&addr).await {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "node on port {port} did not answer PING within {} s",
                    START_TIMEOUT_MS / 1000
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.children
            .lock()
            .expect("children lock")
            .push((addr.clone(), proc));
        Ok(addr)
    }

    /// Whether the node at `addr` answers PING (after AUTH when it wants a
    /// password) within half a second.
    pub(super) async fn answers_ping(&self, addr: &str) -> bool {
        let t = Duration::from_millis(500);
        let ping = async {
            let mut c = shardis::client::Conn::connect(addr, t).await.ok()?;
            if let Some((pw, _)) = &self.password {
                c.call_str(&["AUTH", pw]).await.ok()?;
            }
            c.call_str(&["PING"]).await.ok()
        };
        let reply = tokio::time::timeout(t, ping).await.ok().flatten();
        reply.is_some_and(|r| r.starts_with(b"+PONG"))
    }

    pub(super) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// The addresses of the node processes that exited, taken off the list.
    pub(super) fn take_exited(&self) -> Vec<String> {
        let mut children = self.children.lock().expect("children lock");
        let mut out = Vec::new();
        children.retain_mut(|(addr, c)| match c.try_wait() {
            Ok(None) => true,
            _ => {
                out.push(addr.clone());
                false
            }
        });
        out
    }

    /// Stops every node; returns how many there were.
    pub(super) async fn stop_all(&self) -> usize {
        self.stopping.store(true, Ordering::Relaxed);
        let children = std::mem::take(&mut *self.children.lock().expect("children lock"));
        let n = children.len();
        futures::future::join_all(children.into_iter().map(|(_, c)| stop(c))).await;
        n
    }
}

/// Stops one node: a supervised redis-server is asked to stop (its pipe
/// closed) and killed if it has not within the grace period; a built-in node
/// holds nothing to save and is killed at once.
pub(crate) async fn stop(mut child: Child) {
    if child.stdin.take().is_some() {
        let grace = Duration::from_millis(STOP_GRACE_MS);
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

impl proxy::Spawner for NodeSpawner {
    fn spawn(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + '_>>
    {
        Box::pin(async move {
            // The next port that is free on loopback.
            for _ in 0..100 {
                let p = self.next_port.fetch_add(1, Ordering::Relaxed);
                let Ok(port) = u16::try_from(p) else { break };
                if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                    return self.start(port, None).await;
                }
            }
            Err("no free port for a new node".into())
        })
    }

    fn retire(&self, addr: &str) {
        let mut children = self.children.lock().expect("children lock");
        let Some(i) = children.iter().position(|(a, _)| a == addr) else {
            return;
        };
        let (addr, child) = children.swap_remove(i);
        drop(children);
        tracing::info!(node = %addr, "stopping the node process: it left the ring and its keys were swept");
        tokio::spawn(stop(child));
    }
}
