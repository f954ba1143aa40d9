//! The copy phase: copy every key whose owner changes from its old owner to
//! its new one, while the current ring keeps routing every request. Also the
//! restart step (`reconcile`). Called by `drive` in `mod.rs`; never swaps the
//! routing snapshot.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::proxy::admin::migration::mover::{
    copy_keys, delete_keys, group_moves, scan_node, AsyncBatch, Conns, NodeError,
};
use crate::proxy::admin::migration::pacer::Pacer;
use crate::proxy::upstream::topology::{MigrationRoute, Node, Routing};
use crate::proxy::Proxy;
use crate::resp::reply::integer;
use crate::ring::losing_nodes;

/// Most keys remembered as dirty; past it the change is aborted rather than
/// letting the proxy's memory grow without bound.
const MAX_DIRTY_KEYS: usize = 10_000_000;

/// The old owners that lose keys in the change.
pub(crate) fn sources(routing: &Routing, m: &MigrationRoute) -> Vec<Arc<Node>> {
    let losing = losing_nodes(&routing.ring, &m.next);
    routing
        .primaries()
        .zip(&losing)
        .filter(|(_, l)| **l)
        .map(|(n, _)| n.clone())
        .collect()
}

/// The nodes that gain keys in the change (the joining node, or the removed
/// node's heirs). Those that "lose" going back from next to now; `next_shards`
/// is aligned with `next.nodes()`.
pub(crate) fn targets(routing: &Routing, m: &MigrationRoute) -> Vec<Arc<Node>> {
    let gains = losing_nodes(&m.next, &routing.ring);
    m.next_shards
        .iter()
        .map(|s| s.primary())
        .zip(&gains)
        .filter(|(_, g)| **g)
        .map(|(n, _)| n.clone())
        .collect()
}

/// Moving keys gathered across SCAN calls of one source, copied in batches.
struct Gathered<'a> {
    proxy: &'a Proxy,
    routing: &'a Routing,
    m: &'a MigrationRoute,
    pacer: &'a Pacer<'a>,
    /// By (old owner, new owner).
    pending: Vec<(Arc<Node>, Arc<Node>, Vec<Bytes>)>,
}

impl Gathered<'_> {
    /// Copies gathered keys in MIGRATEs of at most `batch` keys (a MIGRATE
    /// blocks its source while it runs, so batches stay small), pacing each
    /// (`pacer/`); a group keeps fewer than `min` keys for later.
    async fn flush(&mut self, conns: &mut Conns, min: usize) -> Result<(), NodeError> {
        let batch = self.proxy.config().migration.batch.max(1);
        for i in 0..self.pending.len() {
            while !self.pending[i].2.is_empty() && self.pending[i].2.len() >= min.max(1) {
                let n = self.pending[i].2.len().min(batch);
                let keys: Vec<Bytes> = self.pending[i].2.drain(..n).collect();
                let (from, to) = (&self.pending[i].0, &self.pending[i].1);
                if copy_keys(conns, &from.spec, &to.spec, &keys).await? {
                    self.proxy
                        .migration
                        .keys_copied
                        .fetch_add(n as u64, Ordering::Relaxed);
                }
                self.pacer.after(n).await;
            }
        }
        Ok(())
    }
}

impl AsyncBatch for Gathered<'_> {
    async fn batch(&mut self, conns: &mut Conns, keys: Vec<Bytes>) -> Result<(), NodeError> {
        self.proxy
            .migration
            .keys_scanned
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        for (from, to, keys) in group_moves(self.routing, self.m, keys) {
            match self
                .pending
                .iter_mut()
                .find(|(f, t, _)| Arc::ptr_eq(f, &from) && Arc::ptr_eq(t, &to))
            {
                Some((_, _, v)) => v.extend(keys),
                None => self.pending.push((from, to, keys)),
            }
        }
        self.flush(conns, self.proxy.config().migration.batch)
            .await?;
        if self.m.dirty.len() > MAX_DIRTY_KEYS {
            return Err(NodeError {
                node: "proxy".into(),
                why: "too many keys written during the copy".into(),
            });
        }
        Ok(())
    }

    async fn finish(&mut self, conns: &mut Conns) -> Result<(), NodeError> {
        self.flush(conns, 1).await
    }
}

/// Copies every key that changes owner from each old owner that loses keys.
pub(crate) async fn copy_walk(
    proxy: &Proxy,
    routing: &Routing,
    m: &MigrationRoute,
    conns: &mut Conns,
) -> Result<(), NodeError> {
    let sources = sources(routing, m);
    for s in &sources {
        if let Ok(r) = conns.call(&s.spec, &[b"DBSIZE"]).await {
            proxy
                .migration
                .keys_to_scan
                .fetch_add(integer(&r).unwrap_or(0).max(0) as u64, Ordering::Relaxed);
        }
    }
    // Every source is walked at once, each over its own connections: the
    // copy is bound by round trips, not by any one node.
    let batch = proxy.config().migration.batch;
    let timeout = conns.timeout;
    let pacer = &Pacer::start(proxy).await;
    let walks = sources.iter().map(|s| async move {
        let step = Gathered {
            proxy,
            routing,
            m,
            pacer,
            pending: Vec::new(),
        };
        scan_node(&mut Conns::new(proxy, timeout), &s.spec, batch, step).await
    });
    futures::future::try_join_all(walks).await?;
    Ok(())
}

/// After a restart mid-copy: delete copies at targets whose key no longer
/// exists at its source (it was deleted there while this proxy was down).
pub(crate) async fn reconcile(
    proxy: &Proxy,
    routing: &Routing,
    m: &MigrationRoute,
    conns: &mut Conns,
) -> Result<(), NodeError> {
    struct Check<'a> {
        routing: &'a Routing,
        m: &'a MigrationRoute,
        target: Arc<Node>,
    }
    impl AsyncBatch for Check<'_> {
        async fn batch(&mut self, conns: &mut Conns, keys: Vec<Bytes>) -> Result<(), NodeError> {
            for k in keys {
                let source = self.routing.owner(&k).clone();
                let next = self.m.next_shards[self.m.next.locate(&k)].primary();
                if Arc::ptr_eq(&source, &self.target) || !Arc::ptr_eq(next, &self.target) {
                    continue;
                }
                let r = conns.call(&source.spec, &[b"EXISTS", &k]).await?;
                if integer(&r) == Some(0) {
                    delete_keys(conns, &self.target.spec, std::slice::from_ref(&k)).await?;
                }
            }
            Ok(())
        }
    }
    for target in targets(routing, m) {
        let step = Check {
            routing,
            m,
            target: target.clone(),
        };
        scan_node(conns, &target.spec, proxy.config().migration.batch, step).await?;
    }
    Ok(())
}
