//! The script running now, as every connection of the node sees it:
//! whether one runs, since when, whether it wrote, and the kill request
//! SCRIPT KILL or FUNCTION KILL leaves for its Lua hook.
//!
//! A script runs on a thread of its own (`server/` hands it there), holding
//! the node's gate exclusively; the other connections read this state
//! without taking the gate. Before `busy-reply-threshold` they wait, as
//! Redis's clients wait while its one thread runs the script; past it
//! they get `-BUSY`, except the kill commands, answered from here. Atomics,
//! not a lock: the script thread and every connection read them at once.

use crate::backend::error::CmdError;
use crate::backend::keyspace::clock::now_ms;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::SeqCst};
use std::sync::Mutex;

/// What kind of script runs (0: none).
const NONE: u8 = 0;
const EVAL: u8 = 1;
const FUNCTION: u8 = 2;

/// `-BUSY` while an EVAL runs.
pub(crate) const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// `-BUSY` while a function runs.
pub(crate) const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// What the killed script's caller gets.
pub(crate) const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// The node's running script, if any.
#[derive(Default)]
pub(crate) struct Busy {
    kind: AtomicU8,
    started_ms: AtomicU64,
    wrote: AtomicBool,
    kill: AtomicBool,
    /// The running script's command and arguments (FUNCTION STATS shows a
    /// function's). A lock taken only when a script starts and by FUNCTION
    /// STATS, never while the script runs.
    call: Mutex<Vec<Vec<u8>>>,
}

impl Busy {
    /// Marks a script (`eval`: EVAL and its family, else FCALL) as running,
    /// before it takes the node's gate, until the guard drops (a panic
    /// included).
    pub(crate) fn begin(&self, eval: bool, args: &[&[u8]]) -> Running<'_> {
        *self.call.lock().unwrap_or_else(|e| e.into_inner()) =
            args.iter().map(|a| a.to_vec()).collect();
        self.wrote.store(false, SeqCst);
        self.kill.store(false, SeqCst);
        self.started_ms.store(now_ms(), SeqCst);
        self.kind.store(if eval { EVAL } else { FUNCTION }, SeqCst);
        Running(self)
    }

    /// The script has returned.
    fn end(&self) {
        self.kind.store(NONE, SeqCst);
        self.kill.store(false, SeqCst);
    }

    /// Whether a script runs now.
    pub(crate) fn is_running(&self) -> bool {
        self.kind.load(SeqCst) != NONE
    }

    /// Whether the script running now is an EVAL (or one of its family).
    pub(crate) fn is_eval(&self) -> bool {
        self.kind.load(SeqCst) == EVAL
    }

    /// The function running now, if one is: its command and arguments, and
    /// for how many milliseconds it has run.
    pub(crate) fn function(&self) -> Option<(Vec<Vec<u8>>, u64)> {
        if self.kind.load(SeqCst) != FUNCTION {
            return None;
        }
        let call = self.call.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let ms = now_ms().saturating_sub(self.started_ms.load(SeqCst));
        Some((call, ms))
    }

    /// Whether a script has run for more than `threshold_ms`: then other
    /// clients are answered `-BUSY`.
    pub(crate) fn is_past(&self, threshold_ms: u64) -> bool {
        self.is_running() && now_ms().saturating_sub(self.started_ms.load(SeqCst)) >= threshold_ms
    }

    /// The `-BUSY` line for the running script's kind.
    pub(crate) fn refusal(&self) -> &'static str {
        match self.kind.load(SeqCst) {
            FUNCTION => BUSY_FUNCTION,
            _ => BUSY_EVAL,
        }
    }

    /// The running script called a write command: it can no longer be
    /// killed.
    pub(crate) fn wrote(&self) {
        self.wrote.store(true, SeqCst);
    }

    /// Whether a kill was asked for (the Lua hook reads this).
    pub(crate) fn is_killed(&self) -> bool {
        self.kill.load(SeqCst)
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL, in Redis's order of checks.
    pub(crate) fn kill(&self, eval: bool) -> Result<(), CmdError> {
        let kind = self.kind.load(SeqCst);
        if kind == NONE {
            return Err(CmdError::Other(
                "NOTBUSY No scripts in execution right now.".into(),
            ));
        }
        if self.wrote.load(SeqCst) {
            return Err(CmdError::Other(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into(),
            ));
        }
        match (eval, kind) {
            (true, FUNCTION) => Err(CmdError::Other(BUSY_FUNCTION.into())),
            (false, EVAL) => Err(CmdError::Other(BUSY_EVAL.into())),
            _ => {
                self.kill.store(true, SeqCst);
                Ok(())
            }
        }
    }
}

/// A script marked as running; dropped when it returns.
pub(crate) struct Running<'a>(&'a Busy);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_follow_redis_order() {
        let b = Busy::default();
        assert!(matches!(b.kill(true), Err(CmdError::Other(m)) if m.starts_with("NOTBUSY")));
        let running = b.begin(false, &[]);
        assert!(matches!(b.kill(true), Err(CmdError::Other(m)) if m == BUSY_FUNCTION));
        assert!(b.kill(false).is_ok());
        assert!(b.is_killed());
        drop(running);
        let running = b.begin(true, &[]);
        assert!(!b.is_killed());
        b.wrote();
        assert!(matches!(b.kill(true), Err(CmdError::Other(m)) if m.starts_with("UNKILLABLE")));
        assert!(b.is_past(0));
        drop(running);
        assert!(!b.is_past(0));
    }
}
