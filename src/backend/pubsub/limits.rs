//! The `client-output-buffer-limit` parameter in Redis's text form:
//! `normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60`.
//! CONFIG SET takes any number of `class hard soft seconds` groups and
//! changes only the classes it names. The node acts on the `pubsub` class
//! (see `mailbox.rs`) and the `slave` class (replication's stream);
//! `normal` is kept and reported.
//!
//! Used by `backend/config/`; pure text, no I/O.

use super::mailbox::Limits;
use crate::backend::config::memory::parse_memory;

/// Redis's default.
pub(crate) const DEFAULT_TEXT: &str =
    "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

const CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// Validates `value` as Redis does (all groups or none) and returns the new
/// full text, `current` with the named classes replaced; or Redis's reason.
pub(crate) fn merge(current: &str, value: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(value);
    // Redis splits on single spaces: a doubled space is an empty argument.
    let words: Vec<&str> = if text.is_empty() {
        Vec::new()
    } else {
        text.split(' ').collect()
    };
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut table = parse(current);
    let mut updates = Vec::new();
    for group in words.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let bad = || "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
        let hard = parse_memory(group[1].as_bytes()).ok_or_else(bad)?;
        let soft = parse_memory(group[2].as_bytes()).ok_or_else(bad)?;
        let secs = crate::resp::parse_i64(group[3].as_bytes())
            .filter(|s| *s >= 0)
            .ok_or_else(bad)?;
        updates.push((class, [hard, soft, secs as u64]));
    }
    for (class, values) in updates {
        table[class] = values;
    }
    Ok(render(&table))
}

/// The `pubsub` class of a (valid) text.
pub(crate) fn pubsub(text: &str) -> Limits {
    let [hard, soft, soft_secs] = parse(text)[2];
    Limits {
        hard,
        soft,
        soft_secs,
    }
}

/// The `slave` (replica) class of a (valid) text: what a replica's
/// stream may hold unsent before it is disconnected (`backend::replication`).
pub(crate) fn replica(text: &str) -> Limits {
    let [hard, soft, soft_secs] = parse(text)[1];
    Limits {
        hard,
        soft,
        soft_secs,
    }
}

fn parse(text: &str) -> [[u64; 3]; 3] {
    let mut table = [[0; 3]; 3];
    let words: Vec<&str> = text.split(' ').collect();
    for group in words.chunks(4).filter(|g| g.len() == 4) {
        if let Some(class) = CLASSES.iter().position(|c| *c == group[0]) {
            for i in 0..3 {
                table[class][i] = group[i + 1].parse().unwrap_or(0);
            }
        }
    }
    table
}

fn render(table: &[[u64; 3]; 3]) -> String {
    CLASSES
        .iter()
        .zip(table)
        .map(|(c, [h, s, t])| format!("{c} {h} {s} {t}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replaces_only_the_named_classes() {
        assert_eq!(pubsub(DEFAULT_TEXT), Limits::DEFAULT);
        let t = merge(DEFAULT_TEXT, b"pubsub 1kb 2mb 3").unwrap();
        assert_eq!(
            t,
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 1024 2097152 3"
        );
        let t = merge(&t, b"REPLICA 1 2 3 normal 5 6 7").unwrap();
        assert_eq!(t, "normal 5 6 7 slave 1 2 3 pubsub 1024 2097152 3");
        assert_eq!(merge(&t, b"").unwrap(), t);
    }

    #[test]
    fn bad_values_get_redis_reasons() {
        let wrong = "Wrong number of arguments in buffer limit configuration.";
        let class = "Invalid client class specified in buffer limit configuration.";
        let value = "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
        for (v, why) in [
            ("pubsub 1 2", wrong),
            ("pubsub  1 2 3", wrong),
            ("pubsub 1 2 3 ", wrong),
            ("master 1 2 3", class),
            ("pubsub 1 2 x", value),
            ("pubsub -1 2 3", value),
            ("pubsub 1 2 1kb", value),
            ("pubsub 1 2 3 bad 1 2 3", class),
        ] {
            assert_eq!(merge(DEFAULT_TEXT, v.as_bytes()), Err(why.into()), "{v}");
        }
    }
}
