//! The summary of tests that did not run, printed at the very end of
//! `cargo test`: cargo runs test binaries in name order, so this one (no
//! libtest harness, so nothing captures its output) comes last. It reads the
//! skip ledger the other binaries of the same run appended to
//! (`tests/common/ledger.rs`) and names each skipped group with the one
//! command that enables it.

#[path = "common/ledger.rs"]
mod ledger;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    print!("{}", ledger::summary(&ledger::run_id()));
}
