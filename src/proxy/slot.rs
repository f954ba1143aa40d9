//! A client's place under `max_clients`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::proxy::Proxy;

/// One client's place under `max_clients`, given back when dropped — also
/// when the session's task ends by a panic, so a failing client can never
/// leak its slot and lock the others out.
pub(crate) struct ClientSlot(Arc<Proxy>);

impl ClientSlot {
    /// Takes a slot, or `None` when `max_clients` are connected. Only the
    /// accept loop calls this, so checking then adding cannot race.
    pub(crate) fn take(proxy: &Arc<Proxy>) -> Option<ClientSlot> {
        if proxy.stats.clients.load(Ordering::Relaxed) >= proxy.config().max_clients {
            return None;
        }
        proxy.stats.clients.fetch_add(1, Ordering::Relaxed);
        Some(ClientSlot(proxy.clone()))
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.stats.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::{Config, Pool};

    #[tokio::test]
    async fn a_client_slot_is_given_back_when_its_task_panics() {
        let config =
            Config::parse("[proxy]\nmax_clients = 1\n[[nodes]]\naddr = \"127.0.0.1:1\"\n").unwrap();
        let proxy = Proxy::new(Pool::from_config(config), 0, None).unwrap();
        let slot = ClientSlot::take(&proxy).expect("one slot free");
        assert!(ClientSlot::take(&proxy).is_none(), "max_clients = 1");
        // resume_unwind unwinds like a panic without running the panic hook.
        let ended = tokio::spawn(async move {
            let _slot = slot;
            std::panic::resume_unwind(Box::new("session task failed"));
        })
        .await;
        assert!(ended.unwrap_err().is_panic());
        assert_eq!(proxy.stats.clients.load(Ordering::Relaxed), 0);
        assert!(ClientSlot::take(&proxy).is_some(), "the slot came back");
    }
}
