//! The fleet's barrier: each proxy acknowledges the topology revision it
//! routes by (`{prefix}/acks/{id}`, under its lease), once it is ready for
//! it: for a change's copy, tracking its writes to moving keys with every
//! write routed before answered; for its cutover, moving keys paused, its
//! writes answered and its dirty keys re-synced. The leader goes past a
//! phase only when every registered proxy has acknowledged it or has lost
//! its lease — the registration and the acknowledgement go with the lease,
//! and a proxy without a lease serves nothing (`Fleet::is_serving`).
//!
//! Blocking, like the rest of the store: called from `spawn_blocking`.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use etcd_client::{GetOptions, PutOptions};

use super::{block, EtcdStore};
use crate::proxy::admin::state::StateError;

/// How often the leader looks at the acknowledgements while it waits.
const POLL_MS: u64 = 50;

/// A proxy the leader waits for: registered, not yet acknowledged.
struct Member {
    lease: i64,
    acked: i64,
}

impl EtcdStore {
    /// Acknowledges `rev` under this proxy's current lease (never lowering
    /// what it acknowledged under that lease).
    pub(super) fn acknowledge(&self, rev: i64) -> Result<(), StateError> {
        let lease = self.fleet.lease_id.load(Ordering::SeqCst);
        // Held across the write: two acknowledgements never overtake.
        let mut acked = self.acked.lock().expect("acked lock");
        if acked.1 == lease && acked.0 >= rev {
            return Ok(());
        }
        let mut c = self.client.clone();
        let key = format!("{}{}", self.keys.acks, self.id);
        let opts = Some(PutOptions::new().with_lease(lease));
        block(
            &self.rt,
            async move { c.put(key, rev.to_string(), opts).await },
        )
        .ok_or_else(|| self.error("no answer in time"))?
        .map_err(|e| self.error(e))?;
        *acked = (rev, lease);
        Ok(())
    }

    /// The other registered proxies, with their leases and acknowledgements.
    fn members(&self) -> Result<HashMap<String, Member>, StateError> {
        let mut c = self.client.clone();
        let (proxies, acks) = (self.keys.proxies.clone(), self.keys.acks.clone());
        let (regs, acks) = block(&self.rt, async move {
            let all = || Some(GetOptions::new().with_prefix());
            let regs = c.get(proxies, all()).await?;
            let acks = c.get(acks, all()).await?;
            Ok::<_, etcd_client::Error>((regs, acks))
        })
        .ok_or_else(|| self.error("no answer in time"))?
        .map_err(|e| self.error(e))?;
        let id_of = |key: &[u8], prefix: &str| {
            String::from_utf8_lossy(key)
                .strip_prefix(prefix)
                .map(str::to_string)
        };
        let mut out: HashMap<String, Member> = regs
            .kvs()
            .iter()
            .filter_map(|kv| {
                let id = id_of(kv.key(), &self.keys.proxies)?;
                (id != self.id).then_some((
                    id,
                    Member {
                        lease: kv.lease(),
                        acked: 0,
                    },
                ))
            })
            .collect();
        for kv in acks.kvs() {
            let Some(id) = id_of(kv.key(), &self.keys.acks) else {
                continue;
            };
            if let Some(m) = out.get_mut(&id) {
                if kv.lease() == m.lease {
                    m.acked = String::from_utf8_lossy(kv.value()).parse().unwrap_or(0);
                }
            }
        }
        Ok(out)
    }

    /// Waits until every other live proxy has acknowledged `rev` or lost its
    /// lease (at most `max`, and only while this proxy leads); returns the
    /// proxies that acknowledged, each with its lease.
    pub(super) fn await_acks(
        &self,
        rev: i64,
        max: Duration,
    ) -> Result<Vec<(String, i64)>, StateError> {
        let deadline = Instant::now() + max;
        loop {
            if self
                .fleet
                .leader_key
                .lock()
                .expect("leader key lock")
                .is_none()
            {
                return Err(
                    self.busy("this proxy no longer leads the fleet (its lease lapsed)".into())
                );
            }
            let members = self.members()?;
            let mut waiting: Vec<&String> = members
                .iter()
                .filter(|(_, m)| m.acked < rev)
                .map(|(id, _)| id)
                .collect();
            if waiting.is_empty() {
                let mut done: Vec<(String, i64)> =
                    members.into_iter().map(|(id, m)| (id, m.lease)).collect();
                done.sort();
                return Ok(done);
            }
            if Instant::now() >= deadline {
                waiting.sort();
                let names: Vec<&str> = waiting.iter().map(|s| s.as_str()).collect();
                return Err(self.busy(format!(
                    "proxies {} neither acknowledged the change's phase nor lost their lease within {} ms",
                    names.join(", "),
                    max.as_millis()
                )));
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
    }
}
