//! Routing by a topology another proxy wrote to the shared store: the ring
//! and epoch it names, and during its change the same copy or sweep routing
//! the driving proxy has (old owners authoritative until the flip, moving
//! writes tracked as dirty). The change's state is mirrored for `CLUSTER
//! RINGINFO`, marked as followed so this proxy neither drives it nor starts
//! another. Called by the fleet follower (`admin::fleet`) and at start-up.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{new_route, MigrationError};
use crate::proxy::admin::state::{self, Saved};
use crate::proxy::upstream::topology::Routing;
use crate::proxy::Proxy;
use crate::ring::Ring;

/// Makes this proxy route as `saved` says; a no-op when it already does.
pub(crate) fn apply(proxy: &Proxy, saved: &Saved) -> Result<(), MigrationError> {
    let cur = proxy.routing.load_full();
    let same_ring = cur.ring.epoch() == saved.epoch && cur.ring.nodes() == &saved.nodes[..];
    let ring = if same_ring {
        cur.ring.clone()
    } else {
        Arc::new(Ring::new(
            saved.nodes.clone(),
            proxy.config.ring,
            saved.epoch,
        )?)
    };
    let shards = if same_ring {
        cur.shards.clone()
    } else {
        proxy.shards_for(&ring)
    };
    let label = state::change_label(saved);
    let routing = match &saved.migration {
        None => {
            let strays = !saved.pending_sweep.is_empty();
            if same_ring && cur.migration.is_none() && cur.filter_keys == strays {
                finish_following(proxy);
                return Ok(());
            }
            Routing::new(ring, shards, None, strays)
        }
        Some(m) if m.phase == "sweep" => {
            if same_ring && cur.migration.is_none() && cur.filter_keys {
                return Ok(());
            }
            mirror(proxy, &label, "sweeping");
            Routing::new(ring, shards, None, true)
        }
        Some(m) => {
            let keep = same_ring
                && cur
                    .migration
                    .as_ref()
                    .is_some_and(|r| r.next.epoch() == m.other_epoch);
            if keep {
                return Ok(());
            }
            let next = Ring::new(
                state::to_specs(&m.other_nodes),
                proxy.config.ring,
                m.other_epoch,
            )?;
            mirror(proxy, &label, "copying");
            Routing::new(ring, shards, Some(new_route(proxy, Arc::new(next))), true)
        }
    };
    let old = proxy.routing.swap(Arc::new(routing));
    if let Some(m) = &old.migration {
        // Requests paused on the old routing go on by the new one.
        m.resume.send_replace(true);
    }
    if saved.migration.is_none() {
        finish_following(proxy);
    }
    tracing::info!(epoch = saved.epoch, nodes = saved.nodes.len(), change = %label, "routing by the topology another proxy wrote");
    Ok(())
}

/// Shows another proxy's change as this proxy's state, marked as followed.
fn mirror(proxy: &Proxy, label: &str, state: &str) {
    let t = &proxy.migration;
    if !t.following.load(Ordering::Relaxed) || !t.is_changing() {
        t.reset(format!("{label} (driven by another proxy)"));
        t.following.store(true, Ordering::Relaxed);
    }
    t.state(state);
}

fn finish_following(proxy: &Proxy) {
    let t = &proxy.migration;
    if t.following.load(Ordering::Relaxed) && t.is_changing() {
        t.state("ok");
    }
}
