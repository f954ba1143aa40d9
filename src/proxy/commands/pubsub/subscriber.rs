//! Pub/sub state as plain data: one client's subscriber connection and
//! message channel ([`Subscriber`], held in the client's state), and the
//! names all subscribers hold ([`Held`], for PUBSUB NUMPAT and INFO).

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::proxy::commands::pubsub::handle::SubConn;
use crate::proxy::commands::pubsub::message::Push;

/// Every channel and pattern the proxy's subscribers hold, with how many
/// hold each: PUBSUB NUMPAT and INFO's `pubsub_channels` / `pubsub_patterns`
/// count distinct names (as Redis 7 does), which a sum of the nodes' counts
/// would not (two subscribers of one pattern on two nodes count twice
/// there). Shard channels are not counted (Redis counts them apart too).
#[derive(Default)]
pub(crate) struct Held {
    pub(crate) channels: Counted,
    pub(crate) patterns: Counted,
}

/// Names with a holder count. A std Mutex: held for one map update, never
/// across `.await`.
#[derive(Default)]
pub(crate) struct Counted(std::sync::Mutex<std::collections::HashMap<Bytes, usize>>);

impl Counted {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Bytes, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn add(&self, p: &Bytes) {
        *self.lock().entry(p.clone()).or_default() += 1;
    }

    pub(crate) fn remove(&self, p: &Bytes) {
        let mut m = self.lock();
        if let Some(n) = m.get_mut(p) {
            *n -= 1;
            if *n == 0 {
                m.remove(p);
            }
        }
    }

    /// Distinct names held now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One client's pub/sub state: its subscriber connection, if any, and the
/// channel its messages reach the session on (made on first use).
#[derive(Default)]
pub(crate) struct Subscriber {
    pub(super) conn: Option<SubConn>,
    pub(super) tx: Option<mpsc::UnboundedSender<Push>>,
    pub(super) rx: Option<mpsc::UnboundedReceiver<Push>>,
}

impl Subscriber {
    /// True while the client holds (or is being given) subscriptions.
    pub(crate) fn is_active(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.is_open())
    }

    /// True once the client subscribed at least once (the session listens).
    pub(crate) fn is_listening(&self) -> bool {
        self.rx.is_some()
    }

    /// The next message for the client (never resolves before the first
    /// subscription).
    pub(crate) async fn next(&mut self) -> Option<Push> {
        match &mut self.rx {
            Some(rx) => rx.recv().await,
            None => std::future::pending().await,
        }
    }

    /// A message already waiting, without waiting.
    pub(crate) fn try_next(&mut self) -> Option<Push> {
        self.rx.as_mut()?.try_recv().ok()
    }

    /// RESET: every subscription is dropped with its connection.
    pub(crate) fn reset(&mut self) {
        self.conn = None;
    }

    pub(super) fn sender(&mut self) -> mpsc::UnboundedSender<Push> {
        if self.tx.is_none() {
            let (tx, rx) = mpsc::unbounded_channel();
            self.tx = Some(tx);
            self.rx = Some(rx);
        }
        self.tx.clone().expect("made above")
    }
}
