//! A child process's stderr, drained on a thread of its own so the child
//! never blocks on a full pipe: the last lines are kept for failure reports,
//! every `panicked at` line (Rust's panic message, which the binary's panic
//! hook also logs) is kept apart, and all of it can be copied to a log file.
//!
//! Used by [`super::Proc`] (for `check` and `demo`) and by the integration
//! tests' harness. It never kills or waits for the child: its owner does that,
//! then calls [`StderrCapture::finish`] to read what was left in the pipe.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::process::Child;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Lines of stderr kept for a report.
const TAIL_LINES: usize = 200;
/// Panic lines kept (a panicking loop must not grow memory without bound).
const MAX_PANIC_LINES: usize = 50;
/// Longest line kept, in bytes; the rest of a line is dropped.
const MAX_LINE_BYTES: usize = 4096;
/// How long [`StderrCapture::finish`] waits for the pipe to close: a
/// grandchild that inherited the pipe may hold it open after the child died.
const FINISH_TIMEOUT: Duration = Duration::from_secs(2);
/// What marks a panic in a Rust program's stderr.
const PANIC_MARK: &str = "panicked at";

/// Panic reports of every child dropped so far (by [`StderrCapture::record_panics`]).
/// A std mutex: pushed to on drop, read once at the end; never held long.
static CHILD_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[derive(Default)]
struct Captured {
    tail: VecDeque<String>,
    panics: Vec<String>,
}

/// The captured stderr of one child.
pub struct StderrCapture {
    /// A std mutex: the drain thread appends a line at a time; readers copy.
    captured: Arc<Mutex<Captured>>,
    /// Fires when the drain thread has read to the end of the pipe.
    done: Option<mpsc::Receiver<()>>,
}

impl StderrCapture {
    /// Takes `child.stderr` (which must have been `Stdio::piped()`; without
    /// it nothing is captured) and drains it on a thread, copying every byte
    /// to `tee` when given.
    pub fn attach(child: &mut Child, tee: Option<File>) -> StderrCapture {
        let captured = Arc::new(Mutex::new(Captured::default()));
        let (tx, rx) = mpsc::channel();
        if let Some(pipe) = child.stderr.take() {
            let sink = captured.clone();
            let spawned = std::thread::Builder::new()
                .name("child-stderr".into())
                .spawn(move || {
                    drain(BufReader::new(pipe), tee, &sink);
                    let _ = tx.send(());
                });
            // Without the thread, the pipe is dropped: the child's writes to
            // stderr then fail, and `finish` returns at once.
            drop(spawned);
        }
        StderrCapture {
            captured,
            done: Some(rx),
        }
    }

    /// Waits (at most 2 s) until everything the child wrote has been read;
    /// call it after the child exited.
    pub fn finish(&mut self) {
        if let Some(rx) = self.done.take() {
            let _ = rx.recv_timeout(FINISH_TIMEOUT);
        }
    }

    /// The `panicked at` lines seen so far.
    pub(crate) fn panics(&self) -> Vec<String> {
        self.lock().panics.clone()
    }

    /// The last `n` lines seen so far, one per line.
    pub fn tail(&self, n: usize) -> String {
        let c = self.lock();
        let skip = c.tail.len().saturating_sub(n);
        c.tail
            .iter()
            .skip(skip)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// When `what` panicked: a report with its panic lines and the tail of
    /// its stderr, for a failure message.
    pub fn panic_report(&self, what: &str) -> Option<String> {
        let panics = self.panics();
        if panics.is_empty() {
            return None;
        }
        Some(format!(
            "{what} panicked ({} panic line(s)):\n  {}\n--- last lines of its stderr ---\n{}",
            panics.len(),
            panics.join("\n  "),
            self.tail(60)
        ))
    }

    /// Prints the panic report of `what`, if any, and keeps it for
    /// [`child_panics`].
    pub(crate) fn record_panics(&self, what: &str) {
        if let Some(report) = self.panic_report(what) {
            eprintln!("{report}");
            CHILD_PANICS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(report);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Captured> {
        // A poisoned lock only means a reader panicked; the lines are intact.
        self.captured.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Panic reports of the children dropped so far in this process.
pub fn child_panics() -> Vec<String> {
    CHILD_PANICS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

fn drain(mut pipe: impl BufRead, mut tee: Option<File>, sink: &Mutex<Captured>) {
    let mut line = Vec::new();
    loop {
        line.clear();
        match pipe.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if let Some(f) = &mut tee {
            // A full disk must not stop the capture.
            let _ = f.write_all(&line);
        }
        let end = line.len().min(MAX_LINE_BYTES);
        let text = String::from_utf8_lossy(&line[..end]);
        let text = text.trim_end_matches(['\r', '\n']).to_string();
        let mut c = sink.lock().unwrap_or_else(|e| e.into_inner());
        if text.contains(PANIC_MARK) && c.panics.len() < MAX_PANIC_LINES {
            c.panics.push(text.clone());
        }
        if c.tail.len() == TAIL_LINES {
            c.tail.pop_front();
        }
        c.tail.push_back(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn run_sh(script: &str) -> StderrCapture {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut cap = StderrCapture::attach(&mut child, None);
        child.wait().unwrap();
        cap.finish();
        cap
    }

    #[test]
    fn a_panic_line_is_reported_with_the_tail() {
        let cap = run_sh(
            "echo starting >&2; echo \"thread 'main' panicked at src/x.rs:1:1:\" >&2; echo boom >&2",
        );
        let report = cap.panic_report("thing").expect("a panic was printed");
        assert!(
            report.starts_with("thing panicked (1 panic line(s))"),
            "{report}"
        );
        assert!(
            report.contains("src/x.rs:1:1") && report.contains("boom"),
            "{report}"
        );
    }

    #[test]
    fn clean_stderr_reports_nothing_and_keeps_only_the_tail() {
        let cap = run_sh("i=0; while [ $i -lt 300 ]; do echo line$i >&2; i=$((i+1)); done");
        assert!(cap.panic_report("thing").is_none());
        assert_eq!(cap.tail(2), "line298\nline299");
        assert_eq!(cap.lock().tail.len(), TAIL_LINES);
    }
}
