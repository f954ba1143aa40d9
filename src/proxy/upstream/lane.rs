//! Script lanes: each node's connections of their own for scripts (EVAL,
//! FCALL and their forms), so a long script holds only its connection. The
//! node's shared connections stay free: other clients' requests reach the
//! node, which answers `-BUSY` past `busy-reply-threshold`, as redis-server
//! answers every other client while its one thread runs a script.
//!
//! A client takes a lane (an idle one of the node's few: a script that runs
//! on holds its own, so another client's script or FUNCTION STATS reaches
//! the node and is answered as Redis would) only with nothing owed (no
//! request of its own in flight anywhere); while it holds a node's lane
//! every request of its to that node goes there too, behind the script, so
//! its requests to one node keep their order. It gives the lanes back once
//! nothing is owed again. SCRIPT LOAD and FUNCTION LOAD, sent to every
//! node, take a lane of every node the same way (a load then the script
//! that uses it, in one pipeline, keep their order). A script sent while
//! other replies are owed goes on the shared connection, in order with
//! them: a pipeline of short scripts costs nothing more than before.
//!
//! The lanes a client holds are `conn::lane::Lane`: `route::keyed` claims
//! one for a script, and every send on a client's behalf goes through
//! `ClientState::upstream_to`; the lane's in-flight count lets PING ask a
//! node that runs a script (`commands::local`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::proxy::upstream::{Health, Upstream, UpstreamOptions};

/// Script connections per node and protocol.
const LANES: usize = 4;

/// One script connection, opened on first use.
#[derive(Default)]
struct Slot {
    up: OnceLock<Upstream>,
    /// Requests in flight on it, published by its connection task.
    in_flight: Arc<AtomicUsize>,
}

/// One node's script connections: [`LANES`] per protocol.
#[derive(Default)]
pub(crate) struct ScriptLane {
    resp2: [Slot; LANES],
    resp3: [Slot; LANES],
}

impl ScriptLane {
    /// A script connection speaking `proto`, with the node's settings: an
    /// idle one, else one not opened yet, else the least busy.
    pub(crate) fn pick(&self, proto: u8, opts: &UpstreamOptions, health: &Arc<Health>) -> Upstream {
        let (slots, proto) = if proto >= 3 {
            (&self.resp3, 3)
        } else {
            (&self.resp2, 2)
        };
        let load = |s: &Slot| s.in_flight.load(Ordering::Relaxed);
        let slot = slots
            .iter()
            .find(|s| s.up.get().is_some() && load(s) == 0)
            .or_else(|| slots.iter().find(|s| s.up.get().is_none()))
            .unwrap_or_else(|| slots.iter().min_by_key(|s| load(s)).unwrap_or(&slots[0]));
        slot.up
            .get_or_init(|| {
                let opts = UpstreamOptions {
                    proto,
                    script_lane: Some(slot.in_flight.clone()),
                    ..opts.clone()
                };
                Upstream::spawn(opts, health.clone())
            })
            .clone()
    }

    /// Whether a script (or a request queued behind one) is in flight now.
    pub(crate) fn is_running(&self) -> bool {
        self.resp2
            .iter()
            .chain(&self.resp3)
            .any(|s| s.in_flight.load(Ordering::Relaxed) > 0)
    }
}
