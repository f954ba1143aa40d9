//! `shardis supervise`: how `up` keeps a program it did not write (redis-server,
//! etcd) from outliving it. Called by `main.rs` only.

use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// `shardis supervise -- PROGRAM ARGS…`: runs PROGRAM and stops it when
/// this process's stdin closes or its parent exits — so a redis-server
/// started by `up` never outlives `up`, even one killed with SIGKILL.
pub fn supervise(cmd: &[String]) -> Result<(), String> {
    let (prog, args) = cmd.split_first().ok_or("supervise: no program given")?;
    let parent = std::os::unix::process::parent_id();
    let mut child = std::process::Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {prog}: {e}"))?;
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = closed.clone();
    std::thread::spawn(move || {
        // Blocks until the writer (`up`) closes the pipe or dies.
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        flag.store(true, Ordering::Relaxed);
    });
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return match status.success() {
                true => Ok(()),
                false => Err(format!("{prog} exited: {status}")),
            };
        }
        if closed.load(Ordering::Relaxed) || std::os::unix::process::parent_id() != parent {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
