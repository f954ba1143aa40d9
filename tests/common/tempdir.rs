//! Temporary directories for configs and state files, removed on drop, under
//! the checkout's `target/tmp` (Cargo's `CARGO_TARGET_TMPDIR`), so a test
//! killed before its drop leaves nothing outside the checkout.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

static N: AtomicUsize = AtomicUsize::new(0);

/// A temporary directory removed on drop.
pub struct Dir(PathBuf);

/// The checkout's scratch directory for tests: `target/tmp`.
pub fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

impl Dir {
    pub fn new() -> Dir {
        let p = scratch().join(format!(
            "shardis-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
