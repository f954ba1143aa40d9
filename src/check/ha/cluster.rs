//! The high-availability checker's cluster: shards of one primary and R
//! replicas (built-in nodes or redis-server, each its own process on a free
//! loopback port), a proxy over them with `[failover]` settings, and the
//! waits on what its `CLUSTER RING` says. A member can be killed (SIGKILL)
//! and started again at its address; with `aof`, a redis-server member
//! keeps an append-only file, so it comes back with its old data. A member
//! can also be stopped (SIGSTOP) and continued.
//! Everything is killed on drop (see [`crate::procs`]).

use std::time::{Duration, Instant};

use crate::check::client::{Client, Reply};
use crate::procs::{self, NodeKind, Proc, WorkDir};

/// One member process.
pub(crate) struct Member {
    pub addr: String,
    pub port: u16,
    /// None once killed.
    proc: Option<Proc>,
    /// Started with `--replicaof 127.0.0.1 <follow>`.
    follow: Option<u16>,
}

/// Fields drop in order: the proxy, the members, then their directory.
pub(crate) struct HaCluster {
    proxy: Option<Proc>,
    /// Shard i's primary is `members[i * (1 + replicas)]`, its replicas the
    /// ones after it (as configured; a failover changes who is primary).
    pub members: Vec<Member>,
    pub proxy_addr: String,
    kind: NodeKind,
    aof: bool,
    dir: WorkDir,
}

/// The shape of a cluster.
pub(crate) struct Shape<'a> {
    pub shards: usize,
    pub replicas: usize,
    /// Added to the proxy's config (`[failover]` and the like).
    pub extra: &'a str,
    /// redis-server members keep an append-only file (fsync always).
    pub aof: bool,
    /// Sentinel mode: replicas start as replicas of their primary
    /// (`--replicaof`; the proxy never repoints them), and shard i is
    /// Sentinel's master `m{i+1}`.
    pub sentinel: bool,
}

impl HaCluster {
    /// The members and the proxy over them.
    pub(crate) fn start(kind: NodeKind, shape: &Shape) -> Result<HaCluster, String> {
        let mut c = HaCluster::members(kind, shape)?;
        c.start_proxy(shape)?;
        Ok(c)
    }

    /// The members only ([`HaCluster::start_proxy`] adds the proxy).
    pub(crate) fn members(kind: NodeKind, shape: &Shape) -> Result<HaCluster, String> {
        let dir = WorkDir::create(&format!(
            "shardis-check-ha-{}-{}",
            std::process::id(),
            procs::free_port()?
        ))?;
        let mut c = HaCluster {
            proxy: None,
            members: Vec::new(),
            proxy_addr: String::new(),
            kind,
            aof: shape.aof,
            dir,
        };
        let per = 1 + shape.replicas;
        for i in 0..shape.shards * per {
            let port = procs::free_port()?;
            let follow = match (shape.sentinel, i % per) {
                (true, j) if j > 0 => Some(c.members[i - j].port),
                _ => None,
            };
            c.members.push(Member {
                addr: format!("127.0.0.1:{port}"),
                port,
                proc: None,
                follow,
            });
            c.members[i].proc = Some(c.spawn_member(i)?);
        }
        Ok(c)
    }

    /// Starts the proxy over the members, with the shape's config.
    pub(crate) fn start_proxy(&mut self, shape: &Shape) -> Result<(), String> {
        let c = self;
        let per = 1 + shape.replicas;
        let port = procs::free_port()?;
        let mut cfg = format!(
            "[proxy]\nlisten = \"127.0.0.1:{port}\"\nconnect_timeout_ms = 300\nrequest_timeout_ms = 2000\n{}\n",
            shape.extra
        );
        for s in 0..shape.shards {
            let rs: Vec<String> = (1..per)
                .map(|j| format!("\"{}\"", c.members[s * per + j].addr))
                .collect();
            cfg.push_str(&format!(
                "[[nodes]]\naddr = \"{}\"\nname = \"node{}\"\nreplicas = [{}]\n",
                c.members[s * per].addr,
                s + 1,
                rs.join(", ")
            ));
            if shape.sentinel {
                cfg.push_str(&format!("master_name = \"m{}\"\n", s + 1));
            }
        }
        let path = c.dir.join("proxy.toml");
        std::fs::write(&path, cfg).map_err(|e| e.to_string())?;
        c.proxy = Some(procs::start_proxy(
            &path,
            port,
            &c.dir.join("proxy.log"),
            &[],
        )?);
        c.proxy_addr = format!("127.0.0.1:{port}");
        Ok(())
    }

    /// A file in the cluster's own directory.
    pub(crate) fn path(&self, file: &str) -> std::path::PathBuf {
        self.dir.join(file)
    }

    /// Where member `i` keeps its files.
    fn member_dir(&self, i: usize) -> std::path::PathBuf {
        self.path(&format!("m{i}"))
    }

    fn spawn_member(&self, i: usize) -> Result<Proc, String> {
        let port = self.members[i].port;
        let follow = self.members[i].follow.map(|p| p.to_string());
        let dir = self.member_dir(i);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let d = dir.to_string_lossy().into_owned();
        let mut extra: Vec<&str> = match (self.kind, self.aof) {
            (NodeKind::Builtin, _) => vec![],
            (NodeKind::Redis, true) => {
                vec![
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--dir",
                    &d,
                ]
            }
            // A full sync streams its snapshot instead of writing a file.
            (NodeKind::Redis, false) => vec![
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
                "--dir",
                &d,
            ],
        };
        if let Some(p) = &follow {
            extra.extend(["--replicaof", "127.0.0.1", p]);
        }
        procs::start_node_at(self.kind, port, &format!("member{i}"), &extra)
    }

    /// kill -9 of the member at `addr`.
    pub(crate) fn kill(&mut self, addr: &str) {
        if let Some(m) = self.members.iter_mut().find(|m| m.addr == addr) {
            m.proc = None;
        }
    }

    /// Sends `sig` (`-STOP`, `-CONT`) to the member at `addr` with kill(1).
    pub(crate) fn signal(&self, addr: &str, sig: &str) -> Result<(), String> {
        self.members
            .iter()
            .find(|m| m.addr == addr)
            .and_then(|m| m.proc.as_ref())
            .ok_or_else(|| format!("no running member {addr}"))?
            .signal(sig)
    }

    /// Starts the killed member at `addr` again, at the same address (with
    /// its append-only file, if it kept one).
    pub(crate) fn restart(&mut self, addr: &str) -> Result<(), String> {
        let i = self
            .members
            .iter()
            .position(|m| m.addr == addr)
            .ok_or_else(|| format!("no member {addr}"))?;
        let proc = self.spawn_member(i)?;
        self.members[i].proc = Some(proc);
        Ok(())
    }

    /// `CLUSTER RING` as text.
    pub(crate) async fn ring(&self) -> Result<String, String> {
        let mut c = Client::new(&self.proxy_addr, Duration::from_secs(5));
        Ok(c.call(&[b"CLUSTER", b"RING"]).await?.text())
    }

    /// The routed primary of shard `name`.
    pub(crate) async fn primary_of(&self, name: &str) -> Result<String, String> {
        let ring = self.ring().await?;
        primary_in(&ring, name).ok_or_else(|| format!("{name} is not in CLUSTER RING:\n{ring}"))
    }

    /// The configured replicas of shard `s` (0-based).
    pub(crate) fn replicas_of(&self, s: usize, replicas: usize) -> Vec<String> {
        let per = 1 + replicas;
        (1..per)
            .map(|j| self.members[s * per + j].addr.clone())
            .collect()
    }

    /// Waits (at most `secs`) until `ok` holds of `CLUSTER RING`.
    pub(crate) async fn wait_ring(
        &self,
        secs: u64,
        what: &str,
        ok: impl Fn(&str) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let ring = self.ring().await.unwrap_or_default();
            if ok(&ring) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("{what} within {secs} s; CLUSTER RING:\n{ring}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every member but the shards' primaries is a replica in sync.
    pub(crate) async fn wait_synced(&self, shards: usize, replicas: usize) -> Result<(), String> {
        let all: Vec<String> = (0..shards)
            .flat_map(|s| self.replicas_of(s, replicas))
            .collect();
        self.wait_ring(20, "every replica follows its primary", |r| {
            all.iter().all(|a| is_synced_replica(r, a))
        })
        .await
    }

    /// A `CLUSTER RINGINFO` field.
    pub(crate) async fn info_field(&self, key: &str) -> Result<String, String> {
        let info = crate::check::cluster_info(&self.proxy_addr).await?;
        Ok(crate::check::field(&info, key).to_string())
    }

    /// A hash tag whose keys live on shard `name`.
    pub(crate) async fn tag_on(&self, name: &str, skip: usize) -> Result<String, String> {
        let mut c = Client::new(&self.proxy_addr, Duration::from_secs(5));
        let mut found = 0;
        for t in 0..10_000 {
            let tag = format!("{{h{t}}}");
            let key = format!("{tag}:0");
            let r = c.call(&[b"CLUSTER", b"KEYNODE", key.as_bytes()]).await?;
            if let Reply::Error(e) = r {
                return Err(format!("CLUSTER KEYNODE: {e}"));
            }
            if r.text() == name {
                if found == skip {
                    return Ok(tag);
                }
                found += 1;
            }
        }
        Err(format!("no hash tag found on {name}"))
    }
}

/// The primary `ring` (CLUSTER RING) routes shard `name` to.
pub(crate) fn primary_in(ring: &str, name: &str) -> Option<String> {
    ring.lines().find_map(|l| {
        let mut parts = l.split_whitespace();
        (parts.next() == Some(name))
            .then(|| parts.next().map(str::to_string))
            .flatten()
    })
}

/// True when `ring` lists `addr` as a replica whose link to its primary is up.
pub(crate) fn is_synced_replica(ring: &str, addr: &str) -> bool {
    ring.lines().any(|l| {
        l.starts_with(&format!("{addr} "))
            && l.contains("role=replica repl=replica")
            && l.contains("link=up")
    })
}
