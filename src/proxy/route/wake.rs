//! Wakes the proxy's own waiters on keys (blocking pops whose keys live on
//! several nodes, `commands::blocking_multi`) when a write this proxy
//! routed to one of their keys has been answered by its node: the write has
//! executed, so the waiter's next non-blocking pop sees its effect whatever
//! upstream connection it goes on.
//!
//! Routing calls [`Wake::after_write`] for every write it forwards; with no
//! waiter that is one atomic load. Must never delay the write's reply: the
//! wake runs in its own task, after the reply was handed on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::{oneshot, Notify};

/// Who waits on which key.
#[derive(Default)]
pub(crate) struct Wake {
    /// Waiters registered right now: the request path checks it first.
    waiting: AtomicUsize,
    /// A std mutex: held to register, deregister or look up, never across
    /// `.await`.
    keys: Mutex<HashMap<Bytes, Vec<Arc<Notify>>>>,
}

/// One waiter's registration on its keys; deregisters on drop.
pub(crate) struct Watch {
    wake: Arc<Wake>,
    keys: Vec<Bytes>,
    pub(crate) notify: Arc<Notify>,
}

impl Wake {
    /// Registers a waiter on `keys`: its `notify` gets a permit whenever a
    /// routed write to any of them is answered.
    pub(crate) fn watch(self: &Arc<Self>, keys: &[Bytes]) -> Watch {
        let notify = Arc::new(Notify::new());
        let mut map = lock(&self.keys);
        for k in keys {
            map.entry(k.clone()).or_default().push(notify.clone());
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Watch {
            wake: self.clone(),
            keys: keys.to_vec(),
            notify,
        }
    }

    /// Whether anyone waits on one of `keys`.
    fn is_watched<'k>(&self, mut keys: impl Iterator<Item = &'k Bytes>) -> bool {
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let map = lock(&self.keys);
        keys.any(|k| map.contains_key(k))
    }

    /// Wraps the reply of a write to `keys`: once it arrives, the waiters
    /// on those keys are woken. Unchanged when no one waits on them.
    pub(crate) fn after_write<'k>(
        self: &Arc<Self>,
        keys: impl Iterator<Item = &'k Bytes> + Clone,
        rx: oneshot::Receiver<Bytes>,
    ) -> oneshot::Receiver<Bytes> {
        if !self.is_watched(keys.clone()) {
            return rx;
        }
        let keys: Vec<Bytes> = keys.cloned().collect();
        let wake = self.clone();
        let (tx, out) = oneshot::channel();
        tokio::spawn(async move {
            if let Ok(r) = rx.await {
                let _ = tx.send(r);
            }
            wake.wake(&keys);
        });
        out
    }

    /// Gives every waiter on `keys` a permit.
    pub(crate) fn wake(&self, keys: &[Bytes]) {
        let map = lock(&self.keys);
        for n in keys.iter().filter_map(|k| map.get(k)).flatten() {
            n.notify_one();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut map = lock(&self.wake.keys);
        for k in &self.keys {
            if let Some(v) = map.get_mut(k) {
                v.retain(|n| !Arc::ptr_eq(n, &self.notify));
                if v.is_empty() {
                    map.remove(k);
                }
            }
        }
        self.wake.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A poisoned lock still holds a consistent map.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_write_to_a_watched_key_wakes_its_waiter_after_the_reply() {
        let wake = Arc::new(Wake::default());
        let keys = [Bytes::from_static(b"a"), Bytes::from_static(b"b")];
        let w = wake.watch(&keys);
        let (tx, rx) = oneshot::channel();
        let other = [Bytes::from_static(b"c")];
        let (tx2, rx2) = oneshot::channel::<Bytes>();
        let unwatched = wake.after_write(other.iter(), rx2);
        drop(tx2);
        assert!(unwatched.await.is_err());
        let out = wake.after_write(keys[1..].iter(), rx);
        tx.send(Bytes::from_static(b":1\r\n")).unwrap();
        assert_eq!(out.await.unwrap(), Bytes::from_static(b":1\r\n"));
        let woken = tokio::time::timeout(std::time::Duration::from_secs(5), w.notify.notified());
        assert!(woken.await.is_ok());
        drop(w);
        assert!(!wake.is_watched(keys.iter()));
        assert!(lock(&wake.keys).is_empty());
    }
}
