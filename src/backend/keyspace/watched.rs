//! The watched keys of one store shard, guarded by the shard's lock: the
//! store raises their watchers' flags whenever an entry leaves or enters
//! the table. The client side of WATCH is `watch.rs`.

use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// One client's watch on one key.
pub(crate) struct Watcher {
    pub(crate) flag: Arc<AtomicBool>,
    /// The key had already expired (still in the table) when WATCH ran:
    /// its deletion by expiry is then no change (Redis 7.0's rule).
    pub(crate) expired: bool,
}

/// A shard's watched keys. Guarded by the shard lock.
#[derive(Default)]
pub(crate) struct Watched(pub(crate) HashMap<Arc<[u8]>, SmallVec<[Watcher; 1]>>);

impl Watched {
    /// Whether nobody watches a key of this shard.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Raises the flag of every client watching `key`, which was just
    /// modified; `present` is whether the key is in the table now. A watch
    /// taken on an already-expired key is not raised by that key's removal.
    pub(crate) fn touch(&mut self, key: &[u8], present: bool) {
        let Some(ws) = self.0.get_mut(key) else {
            return;
        };
        for w in ws.iter_mut() {
            if w.expired && !present {
                w.expired = false;
                continue;
            }
            w.flag.store(true, Relaxed);
        }
    }

    /// FLUSHALL emptied the shard: touches the watched keys it held.
    pub(crate) fn touch_flushed(&mut self, had: impl Fn(&[u8]) -> bool) {
        let gone: Vec<Arc<[u8]>> = self.0.keys().filter(|k| had(k)).cloned().collect();
        for k in gone {
            self.touch(&k, false);
        }
    }
}
