//! The mover's I/O: dedicated node connections, SCAN walks, `MIGRATE … COPY
//! REPLACE` batches and `DEL` batches, each attributed to the node that failed.
//! Used by the phases and the sweeper; never touches the routing snapshot or
//! the shared upstream connections (long batches must not sit in front of
//! client requests).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::client::{ClientError, Conn};
use crate::proxy::upstream::topology::{MigrationRoute, Node, Routing};
use crate::resp::parse_i64;
use crate::resp::reply::{elements, integer};
use crate::ring::NodeSpec;

/// Keys per SCAN call: larger than a MIGRATE batch, since only ~1/N of the
/// scanned keys move.
const SCAN_COUNT: usize = 1_000;

/// The most a MIGRATE may block its source. A redis-server executes MIGRATE
/// synchronously: while the target does not answer, every client of the
/// source waits, for up to this timeout. The target is pinged first (see
/// [`copy_keys`]), so only a target that stops in between costs this much.
pub(crate) const MIGRATE_TIMEOUT_MS: u64 = 500;

/// How long the target's PING before each batch may take.
pub(crate) const TARGET_CHECK_MS: u64 = 500;

fn host_port(addr: &str) -> (&str, &str) {
    addr.rsplit_once(':').unwrap_or((addr, "6379"))
}

/// The mover's wording for a failure on one of its connections.
fn why(e: ClientError, timeout: Duration) -> String {
    match e {
        ClientError::ConnectTimeout { addr } => format!("connect to {addr} timed out"),
        ClientError::Connect { addr, err } => format!("{addr}: {err}"),
        ClientError::ReadTimeout | ClientError::WriteTimeout => {
            format!("no reply within {} ms", timeout.as_millis())
        }
        other => other.terse(),
    }
}

/// Connections by node name, opened on first use.
pub(crate) struct Conns {
    by_name: HashMap<String, Conn>,
    pub(crate) timeout: Duration,
    /// What each node is told first, and MIGRATE's target database and
    /// login (see `upstream::credentials`).
    login: crate::proxy::upstream::credentials::NodeCredentials,
    /// The proxy's topology store: in a fleet, a proxy whose lease lapsed
    /// (a leader stopped past it, another leading since) moves no key.
    store: Option<std::sync::Arc<dyn crate::proxy::admin::store::TopologyStore>>,
}

/// A failure attributed to one node.
#[derive(Debug)]
pub(crate) struct NodeError {
    pub(crate) node: String,
    pub(crate) why: String,
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {}: {}", self.node, self.why)
    }
}

impl Conns {
    pub(crate) fn new(proxy: &crate::proxy::Proxy, timeout: Duration) -> Conns {
        Conns {
            by_name: HashMap::new(),
            timeout,
            login: proxy.config().node_auth.clone(),
            store: proxy.store.clone(),
        }
    }

    pub(crate) async fn call(
        &mut self,
        node: &NodeSpec,
        args: &[&[u8]],
    ) -> Result<Bytes, NodeError> {
        self.call_within(node, args, self.timeout).await
    }

    async fn call_within(
        &mut self,
        node: &NodeSpec,
        args: &[&[u8]],
        timeout: Duration,
    ) -> Result<Bytes, NodeError> {
        let err = |why: String| NodeError {
            node: node.name.clone(),
            why,
        };
        if !crate::proxy::admin::store::is_serving(self.store.as_deref()) {
            return Err(NodeError {
                node: "fleet".into(),
                why: "this proxy's etcd lease lapsed: it moves no key".into(),
            });
        }
        if !self.by_name.contains_key(&node.name) {
            let mut c = (self.login.connect(&node.addr, &node.name, timeout))
                .await
                .map_err(|e| err(why(e, timeout)))?;
            let opened = tokio::time::timeout(timeout, self.login.open(&node.name, &mut c))
                .await
                .unwrap_or(Err(ClientError::ReadTimeout))
                .map_err(|e| err(why(e, timeout)))?;
            if let Some(r) = opened {
                let r = String::from_utf8_lossy(&r).trim_end().to_string();
                return Err(err(format!("AUTH or SELECT refused: {r}")));
            }
            self.by_name.insert(node.name.clone(), c);
        }
        let conn = self.by_name.get_mut(&node.name).expect("just inserted");
        // One bound for the whole call, write and reply together.
        conn.set_timeout(timeout);
        let r = tokio::time::timeout(timeout, conn.call(args))
            .await
            .unwrap_or(Err(ClientError::ReadTimeout));
        r.map_err(|e| {
            self.by_name.remove(&node.name);
            err(why(e, timeout))
        })
    }

    /// PINGs `node` within [`TARGET_CHECK_MS`].
    async fn check(&mut self, node: &NodeSpec) -> Result<(), NodeError> {
        let t = Duration::from_millis(TARGET_CHECK_MS).min(self.timeout);
        self.call_within(node, &[b"PING"], t).await.map(|_| ())
    }
}

/// The payload of a `$n\r\n…\r\n` element.
fn bulk_value(el: &[u8]) -> Option<&[u8]> {
    if el.first() != Some(&b'$') {
        return None;
    }
    let nl = el.iter().position(|&b| b == b'\n')?;
    let n = parse_i64(&el[1..nl - 1])?;
    if n < 0 {
        return None;
    }
    el.get(nl + 1..nl + 1 + n as usize)
}

/// A step run on each SCAN batch (a trait so the step can borrow `conns`).
pub(crate) trait AsyncBatch {
    async fn batch(&mut self, conns: &mut Conns, keys: Vec<Bytes>) -> Result<(), NodeError>;

    /// Runs once after the last batch.
    async fn finish(&mut self, _conns: &mut Conns) -> Result<(), NodeError> {
        Ok(())
    }
}

/// Walks `node` with SCAN, calling `f` with each batch of keys.
pub(crate) async fn scan_node<F: AsyncBatch>(
    conns: &mut Conns,
    node: &NodeSpec,
    batch: usize,
    mut f: F,
) -> Result<(), NodeError> {
    let count = batch.max(SCAN_COUNT).to_string();
    let mut cursor = b"0".to_vec();
    loop {
        let r = conns
            .call(node, &[b"SCAN", &cursor, b"COUNT", count.as_bytes()])
            .await?;
        let bad = || NodeError {
            node: node.name.clone(),
            why: format!("bad SCAN reply {:?}", String::from_utf8_lossy(&r)),
        };
        let els = elements(&r).filter(|e| e.len() == 2).ok_or_else(bad)?;
        let next = bulk_value(&r[els[0].clone()]).ok_or_else(bad)?.to_vec();
        let keys_reply = &r[els[1].clone()];
        let keys: Vec<Bytes> = elements(keys_reply)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| bulk_value(&keys_reply[e]).map(Bytes::copy_from_slice))
            .collect();
        f.batch(conns, keys).await?;
        if next == b"0" {
            return f.finish(conns).await;
        }
        cursor = next;
    }
}

/// Copies `keys` from `source` to `target` (COPY REPLACE: the source keeps
/// them). The target is pinged first: a stopped target then fails the batch
/// here instead of blocking the source inside MIGRATE. A failure names the
/// node that did not answer: on a MIGRATE error both are probed, target first.
pub(crate) async fn copy_keys(
    conns: &mut Conns,
    source: &NodeSpec,
    target: &NodeSpec,
    keys: &[Bytes],
) -> Result<bool, NodeError> {
    conns.check(target).await?;
    let (host, port) = host_port(&target.addr);
    let timeout_ms = MIGRATE_TIMEOUT_MS
        .min(conns.timeout.as_millis() as u64)
        .to_string();
    // The keys land in the database every connection selects.
    let db = conns.login.db.to_string();
    let mut args: Vec<&[u8]> = vec![
        b"MIGRATE",
        host.as_bytes(),
        port.as_bytes(),
        b"",
        db.as_bytes(),
        timeout_ms.as_bytes(),
        b"COPY",
        b"REPLACE",
    ];
    let creds = conns.login.for_node(&target.name);
    if let Some(c) = &creds {
        args.extend(c.migrate_args());
    }
    args.push(b"KEYS");
    args.extend(keys.iter().map(|k| k.as_ref()));
    let failed = match conns.call(source, &args).await {
        Ok(r) if r.starts_with(b"+OK") => return Ok(true),
        Ok(r) if r.starts_with(b"+NOKEY") => return Ok(false),
        // MIGRATE's own errors are about the target (IOERR, refused RESTORE).
        Ok(r) => NodeError {
            node: target.name.clone(),
            why: String::from_utf8_lossy(&r).trim_end().to_string(),
        },
        Err(e) => e,
    };
    Err(blame(conns, source, target, failed).await)
}

/// Which node a failed MIGRATE should be blamed on: the target if it does not
/// answer a PING now, else the source if it does not, else what MIGRATE said.
async fn blame(conns: &mut Conns, source: &NodeSpec, target: &NodeSpec, e: NodeError) -> NodeError {
    for n in [target, source] {
        if let Err(down) = conns.check(n).await {
            return NodeError {
                node: down.node,
                why: format!("{} (while copying from {})", down.why, source.name),
            };
        }
    }
    e
}

/// Deletes `keys` on `node`.
pub(crate) async fn delete_keys(
    conns: &mut Conns,
    node: &NodeSpec,
    keys: &[Bytes],
) -> Result<i64, NodeError> {
    let mut args: Vec<&[u8]> = vec![b"DEL"];
    args.extend(keys.iter().map(|k| k.as_ref()));
    let r = conns.call(node, &args).await?;
    integer(&r).ok_or_else(|| NodeError {
        node: node.name.clone(),
        why: String::from_utf8_lossy(&r).trim_end().to_string(),
    })
}

/// Groups keys by (current owner, next owner) for those that move.
pub(crate) fn group_moves(
    routing: &Routing,
    m: &MigrationRoute,
    keys: impl IntoIterator<Item = Bytes>,
) -> Vec<(Arc<Node>, Arc<Node>, Vec<Bytes>)> {
    let mut groups: Vec<(Arc<Node>, Arc<Node>, Vec<Bytes>)> = Vec::new();
    for k in keys {
        // Both rings share their scheme, so one key hash serves both lookups.
        let h = routing.ring.key_hash(&k);
        let from = routing.node(routing.ring.locate_hash(h));
        let to = m.next_shards[m.next.locate_hash(h)].primary();
        if Arc::ptr_eq(from, to) {
            continue;
        }
        match groups
            .iter_mut()
            .find(|(f, t, _)| Arc::ptr_eq(f, from) && Arc::ptr_eq(t, to))
        {
            Some((_, _, v)) => v.push(k),
            None => groups.push((from.clone(), to.clone(), vec![k])),
        }
    }
    groups
}
