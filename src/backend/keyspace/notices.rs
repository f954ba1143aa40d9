//! The keyspace's side of keyspace notifications (`notify-keyspace-events`):
//! the event classes as Redis's bits, and a log of the events the keyspace
//! raises on its own — `expired` (lazy or active expiry), `evicted` and
//! `new` (a key added to the keyspace) — until `backend::notify` publishes
//! them after the command or the expiry tick that caused them.
//!
//! Used by `store.rs` and `evict.rs`. With no class enabled (the default)
//! every hook costs one relaxed atomic load and nothing else.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Mutex;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub(crate) const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub(crate) const KEYEVENT: u32 = 1 << 1;
/// `g`: DEL, EXPIRE, RENAME, …
pub(crate) const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub(crate) const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub(crate) const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub(crate) const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub(crate) const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub(crate) const ZSET: u32 = 1 << 7;
/// `x`: expired keys.
pub(crate) const EXPIRED: u32 = 1 << 8;
/// `e`: evicted keys.
pub(crate) const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub(crate) const STREAM: u32 = 1 << 10;
/// `m`: key misses (never part of `A`).
pub(crate) const KEY_MISS: u32 = 1 << 11;
/// `d`: module key types.
pub(crate) const MODULE: u32 = 1 << 12;
/// `n`: new keys (never part of `A`).
pub(crate) const NEW: u32 = 1 << 13;
/// `A`: `g$lshzxetd`.
pub(crate) const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// One event the keyspace raised.
pub(crate) struct Notice {
    /// Its class bit (`EXPIRED`, `EVICTED` or `NEW`).
    pub(crate) class: u32,
    pub(crate) event: &'static str,
    pub(crate) key: Box<[u8]>,
}

/// The enabled classes and the events not yet published.
#[derive(Default)]
pub(crate) struct Notices {
    /// `notify-keyspace-events` as bits; 0 turns every hook off.
    flags: AtomicU32,
    /// A std mutex: held to push or take, never across an `.await`.
    log: Mutex<Vec<Notice>>,
}

impl Notices {
    /// The classes enabled now.
    pub(crate) fn flags(&self) -> u32 {
        self.flags.load(Relaxed)
    }

    /// Sets the enabled classes (CONFIG SET notify-keyspace-events).
    pub(crate) fn set_flags(&self, flags: u32) {
        self.flags.store(flags, Relaxed);
        if flags == 0 {
            self.take();
        }
    }

    /// Whether events of `class` are wanted (and would reach a channel).
    pub(crate) fn wants(&self, class: u32) -> bool {
        let f = self.flags();
        f & class != 0 && f & (KEYSPACE | KEYEVENT) != 0
    }

    /// Logs `event` on `key` when its class is enabled.
    pub(crate) fn raise(&self, class: u32, event: &'static str, key: &[u8]) {
        if self.wants(class) {
            let n = Notice {
                class,
                event,
                key: key.into(),
            };
            self.log.lock().unwrap_or_else(|e| e.into_inner()).push(n);
        }
    }

    /// Takes the events logged so far, oldest first.
    pub(crate) fn take(&self) -> Vec<Notice> {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
