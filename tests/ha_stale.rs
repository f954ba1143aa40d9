//! `shardis check --ha --scenarios stale`: stale reads under `read_from =
//! "replica"`, on built-in nodes and on redis-server. No read returns a
//! value never written, no reader sees a key's versions go backwards, and a
//! replica stopped (SIGSTOP) while its failure detector still calls it up
//! is no longer read from once one poll interval has passed since the
//! proxy's `CLUSTER RING` showed its lag above `max_lag_bytes`: the lag
//! bound alone takes it out of reads. The table is printed.

mod common;
mod ha;

use ha::*;

fn check_stale(backend: &str) -> String {
    check_ha_with(&[
        "--scenarios",
        "stale",
        "--backend",
        backend,
        "--max-secs",
        "50",
    ])
}

/// The cells of the table's row for `scenario`, by column name.
fn cells<'a>(table: &'a str, scenario: &str) -> Vec<(&'a str, &'a str)> {
    let header = table
        .lines()
        .find(|l| l.starts_with("| scenario | max_lag_bytes |"))
        .unwrap_or_else(|| panic!("no stale-read table in {table}"));
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("| {scenario} |")))
        .unwrap_or_else(|| panic!("{scenario} in {table}"));
    let split = |l: &'a str| l.split('|').map(str::trim).collect::<Vec<_>>();
    split(header).into_iter().zip(split(row)).collect()
}

fn cell<'a>(cells: &[(&str, &'a str)], column: &str) -> &'a str {
    cells
        .iter()
        .find(|(c, _)| *c == column)
        .unwrap_or_else(|| panic!("no column {column} in {cells:?}"))
        .1
}

fn number(cells: &[(&str, &str)], column: &str) -> u64 {
    let v = cell(cells, column);
    v.parse()
        .unwrap_or_else(|_| panic!("{column} = {v:?} in {cells:?}"))
}

fn assert_stale_reads_keep_their_promises(table: &str) {
    for s in [
        "small max_lag_bytes, replica in sync",
        "replica paused (SIGSTOP), lag bound only",
    ] {
        let row = cells(table, s);
        assert_eq!(number(&row, "never written"), 0, "{row:?}");
        assert_eq!(number(&row, "backwards"), 0, "{row:?}");
        assert!(number(&row, "reads") > 100, "the readers read: {row:?}");
    }
    let paused = cells(table, "replica paused (SIGSTOP), lag bound only");
    assert!(
        cell(&paused, "notes").contains("lag shown above the bound"),
        "{paused:?}"
    );
    let after = cell(&paused, "paused replica read after the bound");
    let (sent, all) = after
        .split_once(" of ")
        .and_then(|(s, a)| Some((s.parse::<u64>().ok()?, a.parse::<u64>().ok()?)))
        .unwrap_or_else(|| panic!("{after:?} in {paused:?}"));
    assert!(all > 0, "reads started after the bound: {paused:?}");
    assert_eq!(
        sent, 0,
        "the stopped replica was read from after its lag showed above max_lag_bytes: {paused:?}"
    );
    assert!(
        number(&paused, "refused") > 0,
        "reads were refused while the replica lagged: {paused:?}"
    );
}

#[test]
fn stale_reads_stay_within_the_lag_bound_on_builtin_nodes() {
    assert_stale_reads_keep_their_promises(&check_stale("builtin"));
}

#[test]
fn stale_reads_stay_within_the_lag_bound_on_redis_server() {
    if !need_redis("ha_stale") {
        return;
    }
    assert_stale_reads_keep_their_promises(&check_stale("redis"));
}
