//! Lua scripting on the built-in node: EVAL and its family, SCRIPT, and
//! the Redis 7 functions (FUNCTION, FCALL), with Lua 5.1 as Redis runs
//! it (the `mlua` crate, vendored Lua 5.1).
//!
//! ```text
//!  EVAL body n k.. a..  ──► take the node's gate exclusively (Node::hold)
//!                        ──► compile once per SHA-1 (the node's cache) ──► run in the node's Lua state
//!  redis.call(...)      ──► the node's dispatcher table, the script's own client ──► reply as a Lua value
//!  return value         ──► Redis's Lua-to-RESP rules ──► the caller's reply
//! ```
//!
//! A script runs atomically: the dispatcher holds the node's gate
//! exclusively for it (as EXEC does, see `commands/multi.rs`), so no other
//! client's command interleaves with the commands it calls. It runs on a
//! thread of its own, so the node's connections go on: they wait while
//! it runs, and past `busy-reply-threshold` get `-BUSY` and may SCRIPT
//! KILL or FUNCTION KILL it (`busy.rs`). Inside EXEC the gate is already
//! held and the script runs in place; no other client can be served
//! then, so past the threshold the script is stopped with an error.

mod bridge;
pub(crate) mod busy;
mod convert;
mod engine;
mod eval;
mod functions;
mod library;
mod libs;
mod raising;
pub(crate) mod stats;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

pub(crate) use eval::{eval, eval_ro, evalsha, evalsha_ro, script};
pub(crate) use functions::{fcall, fcall_ro, function};

/// The node's scripting state: the Lua state EVAL runs in with its script
/// cache, created at the first script.
#[derive(Default)]
pub(crate) struct Scripting {
    eval: Mutex<Option<eval::Scripts>>,
    /// The Lua state FCALL runs in, with the loaded libraries.
    functions: Mutex<Option<library::Libraries>>,
    /// The script running now, read by every connection without a lock.
    pub(crate) busy: Arc<busy::Busy>,
    /// Libraries (high half) and functions loaded when the last FCALL
    /// started: FUNCTION STATS's counts while a function runs, since its
    /// FCALL holds the libraries.
    counts: AtomicU64,
    /// Scripts in the EVAL cache, for INFO's `number_of_cached_scripts`
    /// (read without the lock a running script holds).
    pub(crate) cached: std::sync::atomic::AtomicUsize,
    /// What the commands scripts and functions run counted (INFO
    /// `shardis_scriptstats`).
    pub(crate) stats: stats::ScriptStats,
}

impl Scripting {
    /// Libraries and functions loaded, for FUNCTION STATS.
    pub(crate) fn function_counts(&self) -> (u64, u64) {
        let count = |l: &Option<library::Libraries>| {
            l.as_ref().map_or((0, 0), |l| {
                let fns = l.libs.values().map(|l| l.functions.len()).sum::<usize>();
                (l.libs.len() as u64, fns as u64)
            })
        };
        match self.functions.try_lock() {
            Ok(g) => count(&g),
            Err(TryLockError::Poisoned(e)) => count(&e.into_inner()),
            Err(TryLockError::WouldBlock) => {
                let n = self.counts.load(Ordering::Relaxed);
                (n >> 32, n & 0xffff_ffff)
            }
        }
    }

    /// Notes the counts as a function starts (see `counts`).
    fn note_counts(&self, libs: &library::Libraries) {
        let fns = libs.libs.values().map(|l| l.functions.len()).sum::<usize>() as u64;
        let n = ((libs.libs.len() as u64) << 32) | (fns & 0xffff_ffff);
        self.counts.store(n, Ordering::Relaxed);
    }

    fn scripts(&self) -> MutexGuard<'_, Option<eval::Scripts>> {
        self.eval.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn functions(&self) -> MutexGuard<'_, Option<library::Libraries>> {
        self.functions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// FUNCTION DUMP's payload of the loaded libraries, if any (a full
    /// sync sends it to the replica).
    pub(crate) fn dump_functions(&self) -> Option<Vec<u8>> {
        let libs = self.functions();
        libs.as_ref()
            .filter(|l| !l.libs.is_empty())
            .map(|l| l.dump())
    }
}
