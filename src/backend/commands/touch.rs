//! WATCH's view of write commands: every key a write command names is
//! touched after it ran. Called by `run` in `mod.rs`.

use super::Command;
use crate::backend::keyspace::store::Store;
use std::sync::atomic::Ordering::Relaxed;

/// Touches, for WATCH, every key a write command names (after it ran, so
/// a watch taken before the change cannot miss it). Conservative: a write
/// command that left its key unchanged (SADD of a present member, an error)
/// touches it too. Removals and creations are also touched by the store.
pub(crate) fn touch_written(store: &Store, cmd: &Command, args: &[&[u8]], now: u64) {
    if store.counters.watching.load(Relaxed) == 0 {
        return;
    }
    if cmd.name == "smove" {
        // Touches what it changed itself: the destination only when the
        // member was added there.
        return;
    }
    if matches!(cmd.name, "lmpop" | "zmpop") {
        // numkeys key [key ...] …
        let n = args
            .get(1)
            .and_then(|a| crate::resp::parse_i64(a))
            .unwrap_or(0)
            .clamp(0, args.len() as i64) as usize;
        for key in args.iter().skip(2).take(n) {
            store.touch(key, now);
        }
        return;
    }
    let (first, last, step) = cmd.key_range();
    if first <= 0 || step <= 0 {
        return;
    }
    let n = args.len() as i32;
    let last = if last < 0 { n + last } else { last.min(n - 1) };
    let mut i = first;
    while i <= last && i < n {
        store.touch(args[i as usize], now);
        i += step;
    }
}
