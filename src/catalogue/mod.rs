//! The command catalogue: every command shardis knows, stated once — its
//! name, arity, key positions (with the keyword searches some commands
//! need) and flags, under a command [`Id`]. The proxy's policy for each
//! command (`proxy::policy`) and the built-in node's handler
//! (`backend::commands::table`) are columns joined to it by that id.
//!
//! Looked up once per request, case-insensitively and without allocating.
//! Knows nothing of sockets, routing or execution.

mod keywords;
mod table;

use std::sync::OnceLock;

use bytes::Bytes;

pub(crate) use keywords::is_blocking_stream_read;
pub use keywords::Keywords;
pub use table::{Id, TABLE};

use crate::resp::parse_i64;

/// May grow memory: make room under `maxmemory` first (Redis `denyoom`).
pub const DENYOOM: u8 = 1;
/// Changes data (relevant to migration, the hot-GET cache and replicas).
pub const WRITE: u8 = 2;
/// Only reads the keyspace.
pub const READONLY: u8 = 4;
/// O(1) or O(log n).
pub const FAST: u8 = 8;
/// May block the connection.
pub const BLOCKING: u8 = 16;
const RW: u8 = WRITE | DENYOOM;

/// One row of the catalogue.
#[derive(Debug)]
pub struct Command {
    /// Its place in [`TABLE`].
    pub id: Id,
    /// Lower-case name, as Redis prints it in errors.
    pub name: &'static str,
    /// Redis arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    pub keys: KeySpec,
    /// `DENYOOM | WRITE | READONLY | FAST | BLOCKING`, as Redis's COMMAND
    /// reports them.
    pub flags: u8,
}

/// Where a command's keys are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpec {
    /// No keys.
    None,
    /// Keys at `first`, `first + step`, … up to `last` (negative counts from the end).
    Range { first: u8, last: i8, step: u8 },
    /// A count of keys at `count_at`, the keys right after it, plus an
    /// optional destination key at `dest` (ZUNIONSTORE dest numkeys k1 k2).
    NumKeys { count_at: u8, dest: Option<u8> },
    /// Found by keyword (SORT … STORE dest, XREAD … STREAMS k1 k2 id1 id2).
    Keyword(Keywords),
}

impl Command {
    /// True when `argc` (name included) fits the arity.
    pub(crate) fn is_arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// Changes data.
    pub fn is_write(&self) -> bool {
        self.flags & WRITE != 0
    }

    /// Positions of the keys in `args`, or an error text when a key count is
    /// malformed (Redis's wording). Every position returned indexes `args`,
    /// whatever the argument count: a form shorter than the key position
    /// (`OBJECT HELP`, `OBJECT ENCODING` without its key) has no keys.
    pub fn key_positions(&self, args: &[Bytes]) -> Result<Vec<usize>, String> {
        match self.keys {
            KeySpec::None => Ok(Vec::new()),
            KeySpec::Range { first, last, step } => {
                let first = first as i64;
                let end = args.len() as i64 - 1;
                let last = if last < 0 {
                    args.len() as i64 + last as i64
                } else {
                    (last as i64).min(end)
                };
                if first > last {
                    return Ok(Vec::new());
                }
                // A zero step would never advance; the table has none, but a
                // row must not be able to hang or panic a client's task.
                let step = (step as usize).max(1);
                Ok((first as usize..=last as usize).step_by(step).collect())
            }
            KeySpec::NumKeys { count_at, dest } => {
                let count_at = count_at as usize;
                let n = args
                    .get(count_at)
                    .and_then(|a| parse_i64(a))
                    .ok_or_else(|| "ERR value is not an integer or out of range".to_string())?;
                if n < 0 {
                    return Err("ERR Number of keys can't be negative".into());
                }
                if n as usize > args.len().saturating_sub(count_at + 1) {
                    return Err("ERR Number of keys can't be greater than number of args".into());
                }
                let mut pos: Vec<usize> = dest.map(|d| d as usize).into_iter().collect();
                pos.extend(count_at + 1..count_at + 1 + n as usize);
                Ok(pos)
            }
            // A form shorter than its first key has none (the arity check
            // refuses it before anything is routed).
            KeySpec::Keyword(_) if args.len() < 2 => Ok(Vec::new()),
            KeySpec::Keyword(k) => k.positions(self.name, args),
        }
    }
}

impl KeySpec {
    /// The key positions as Redis's COMMAND reports them for the built-in
    /// node: first, last (negative counts from the end), step; a key-count
    /// command reports only its destination, a keyword search its first key.
    pub fn first_last_step(&self) -> (i32, i32, i32) {
        match *self {
            KeySpec::None => (0, 0, 0),
            KeySpec::Range { first, last, step } => (first as i32, last as i32, step as i32),
            KeySpec::NumKeys { dest: Some(d), .. } => (d as i32, d as i32, 1),
            KeySpec::NumKeys { dest: None, .. } => (0, 0, 0),
            KeySpec::Keyword(_) => (1, 1, 1),
        }
    }
}

const K1: KeySpec = KeySpec::Range {
    first: 1,
    last: 1,
    step: 1,
};
const K12: KeySpec = KeySpec::Range {
    first: 1,
    last: 2,
    step: 1,
};
const KALL: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};
const KALL2: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 2,
};
const K2ALL: KeySpec = KeySpec::Range {
    first: 2,
    last: -1,
    step: 1,
};
const NK1: KeySpec = KeySpec::NumKeys {
    count_at: 1,
    dest: None,
};
const NK2: KeySpec = KeySpec::NumKeys {
    count_at: 2,
    dest: None,
};
const NK2D: KeySpec = KeySpec::NumKeys {
    count_at: 2,
    dest: Some(1),
};
const K2: KeySpec = KeySpec::Range {
    first: 2,
    last: 2,
    step: 1,
};
const NONE: KeySpec = KeySpec::None;

const K3: KeySpec = KeySpec::Range {
    first: 3,
    last: 3,
    step: 1,
};

/// Longest command name in the table, so lookups can upper-case on the stack.
const MAX_NAME: usize = 24;

/// A command name, lower-cased and zero-padded, as three words: hashed and
/// compared a word at a time.
type Name = [u64; MAX_NAME / 8];

/// A table of commands by name, case-insensitive: open addressing over a
/// power-of-two size at least four times the table's length, linear probing.
/// A lookup hashes three words and usually compares one slot. The proxy's
/// command table and the built-in node's both use it.
pub(crate) struct NameIndex<T: 'static> {
    slots: Vec<Option<(Name, &'static T)>>,
    mask: usize,
}

impl<T> NameIndex<T> {
    /// Indexes `items` by `name(item)`; names must be at most 24 bytes and unique.
    pub(crate) fn new(items: &'static [T], name: impl Fn(&T) -> &str) -> NameIndex<T> {
        let size = (items.len() * 4).next_power_of_two();
        let mut index = NameIndex {
            slots: (0..size).map(|_| None).collect(),
            mask: size - 1,
        };
        for item in items {
            let key = fold(name(item).as_bytes()).expect("command names are short");
            let mut i = index.slot(&key);
            while index.slots[i].is_some() {
                i = (i + 1) & index.mask;
            }
            index.slots[i] = Some((key, item));
        }
        index
    }

    fn slot(&self, name: &Name) -> usize {
        let h = (name[0] ^ name[1].rotate_left(21) ^ name[2].rotate_left(42))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize & self.mask
    }

    /// The item named `name` in any case, without allocating.
    pub(crate) fn get(&self, name: &[u8]) -> Option<&'static T> {
        let name = fold(name)?;
        let mut i = self.slot(&name);
        loop {
            match &self.slots[i] {
                Some((n, item)) if *n == name => return Some(item),
                Some(_) => i = (i + 1) & self.mask,
                None => return None,
            }
        }
    }
}

fn index() -> &'static NameIndex<Command> {
    static INDEX: OnceLock<NameIndex<Command>> = OnceLock::new();
    INDEX.get_or_init(|| NameIndex::new(TABLE, |c| c.name))
}

fn fold(name: &[u8]) -> Option<Name> {
    if name.len() > MAX_NAME {
        return None;
    }
    let mut key = [0u8; MAX_NAME];
    for (k, &c) in key.iter_mut().zip(name) {
        // Zero pads the name: a NUL inside one would alias a shorter name.
        if c == 0 {
            return None;
        }
        *k = c.to_ascii_lowercase();
    }
    let word = |i: usize| u64::from_le_bytes(key[i * 8..i * 8 + 8].try_into().unwrap());
    Some([word(0), word(1), word(2)])
}

/// Finds a command by name, case-insensitively, without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    index().get(name)
}

/// Redis 7's reply text for an unknown command (without the leading '-').
pub(crate) fn unknown_command_error(args: &[Bytes]) -> String {
    let name = String::from_utf8_lossy(&args[0]);
    let name: String = name.chars().take(128).collect();
    let mut rest = String::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        let a = String::from_utf8_lossy(a);
        let a: String = a.chars().take(room).collect();
        rest.push('\'');
        rest.push_str(&a);
        rest.push_str("' ");
    }
    format!("ERR unknown command '{name}', with args beginning with: {rest}")
}

/// Redis's arity error text for `spec`.
pub(crate) fn arity_error(spec: &Command) -> String {
    format!("ERR wrong number of arguments for '{}' command", spec.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn lookup_ignores_case_and_rejects_unknown() {
        assert_eq!(lookup(b"GET").unwrap().name, "get");
        assert_eq!(lookup(b"gEt").unwrap().name, "get");
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(&[b'a'; 100]).is_none());
        assert!(lookup(b"get\0").is_none());
        assert!(lookup(b"").is_none());
        // Every name in the table is found, in either case.
        for spec in TABLE {
            assert_eq!(lookup(spec.name.as_bytes()).unwrap().name, spec.name);
            let upper = spec.name.to_ascii_uppercase();
            assert_eq!(lookup(upper.as_bytes()).unwrap().name, spec.name);
        }
    }

    #[test]
    fn table_has_no_duplicates_and_names_fit() {
        let mut seen = std::collections::HashSet::new();
        for spec in TABLE {
            assert!(seen.insert(spec.name), "duplicate {}", spec.name);
            assert!(spec.name.len() <= MAX_NAME);
            assert_eq!(spec.name, spec.name.to_lowercase());
        }
    }

    #[test]
    fn key_positions_follow_each_spec() {
        type Case<'a> = (&'a [&'a str], Result<Vec<usize>, &'a str>);
        let cases: &[Case] = &[
            (&["get", "k"], Ok(vec![1])),
            (&["mset", "a", "1", "b", "2"], Ok(vec![1, 3])),
            (&["del", "a", "b", "c"], Ok(vec![1, 2, 3])),
            (&["bitop", "and", "d", "s1", "s2"], Ok(vec![2, 3, 4])),
            (
                &["zunionstore", "d", "2", "a", "b", "weights", "1", "2"],
                Ok(vec![1, 3, 4]),
            ),
            (&["eval", "return 1", "0"], Ok(vec![])),
            (&["eval", "return 1", "1", "k", "arg"], Ok(vec![3])),
            (
                &["eval", "s", "3", "k"],
                Err("ERR Number of keys can't be greater than number of args"),
            ),
            (
                &["eval", "s", "-1"],
                Err("ERR Number of keys can't be negative"),
            ),
            (
                &["eval", "s", "x"],
                Err("ERR value is not an integer or out of range"),
            ),
            (&["object", "encoding", "k"], Ok(vec![2])),
            (&["object", "help"], Ok(vec![])),
            (&["xgroup", "create", "s", "g", "$"], Ok(vec![2])),
            (&["xinfo", "stream", "s", "full"], Ok(vec![2])),
            (&["xgroup", "help"], Ok(vec![])),
            (&["sort", "k"], Ok(vec![1])),
            (&["sort", "k", "limit", "0", "store", "store", "d"], Ok(vec![1, 6])),
            (&["sort", "k", "STORE", "d1", "alpha", "store", "d2"], Ok(vec![1, 6])),
            (&["sort", "k", "by", "nosort", "get", "#", "get", "x"], Ok(vec![1])),
            (&["sort", "{u}k", "by", "{u}w_*", "get", "{u}:*->f", "store", "{u}d"], Ok(vec![1, 3, 5, 7])),
            (
                &["sort", "k", "by", "w_*"],
                Err("ERR BY option of SORT denied by shardis when keys formed by the pattern may be on different nodes: put a {hash tag} before the '*' that keeps them with the sorted key"),
            ),
            (
                &["sort_ro", "k", "get", "*{u}"],
                Err("ERR GET option of SORT denied by shardis when keys formed by the pattern may be on different nodes: put a {hash tag} before the '*' that keeps them with the sorted key"),
            ),
            (
                &["sort", "k", "get", "{}*"],
                Err("ERR GET option of SORT denied by shardis when keys formed by the pattern may be on different nodes: put a {hash tag} before the '*' that keeps them with the sorted key"),
            ),
            (&["georadius", "g", "0", "0", "1", "km", "store", "d"], Ok(vec![1, 7])),
            (
                &["georadius", "g", "0", "0", "1", "km", "store", "d", "storedist", "e"],
                Ok(vec![1, 9]),
            ),
            (&["georadiusbymember", "g", "m", "1", "km", "STOREDIST", "d"], Ok(vec![1, 6])),
            (&["georadius", "g", "0", "0", "1", "km", "count", "3"], Ok(vec![1])),
            (&["geosearchstore", "d", "s", "frommember", "m", "byradius", "1", "km"], Ok(vec![1, 2])),
            (&["xread", "count", "2", "streams", "a", "b", "0", "0"], Ok(vec![4, 5])),
            (
                &["xreadgroup", "group", "streams", "c", "noack", "streams", "streams", ">"],
                Ok(vec![6]),
            ),
            (
                &["xread", "block", "0", "streams", "a", "$"],
                Ok(vec![4]),
            ),
            (
                &["xread", "streams", "a", "b", "0"],
                Err("ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified."),
            ),
            (
                &["xreadgroup", "group", "g", "c", "streams", "a"],
                Err("ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."),
            ),
            (&["xread", "count", "1", "a", "0"], Err("ERR syntax error")),
            (&["object"], Ok(vec![])),
            (&["get"], Ok(vec![])),
            (&["mset"], Ok(vec![])),
            (&["ping"], Ok(vec![])),
        ];
        for (a, want) in cases {
            let spec = lookup(a[0].as_bytes()).unwrap();
            let got = spec.key_positions(&args(a));
            assert_eq!(got, want.clone().map_err(|e| e.to_string()), "{a:?}");
        }
    }

    /// Every row, at every argument count a client can send (arity
    /// checks come after routing for some paths, and a row's key positions
    /// may exceed its minimum arity), yields only positions inside the
    /// arguments, with or without a parsable key count.
    #[test]
    fn key_positions_stay_inside_the_arguments_for_every_row_and_count() {
        for spec in TABLE {
            for argc in 0..spec.arity.unsigned_abs() as usize + 4 {
                for fill in ["k", "1", "0", "-1", "99999999999999999999", "2"] {
                    let mut a = vec![Bytes::from(spec.name)];
                    a.extend((1..argc).map(|_| Bytes::from(fill)));
                    a.truncate(argc);
                    if let Ok(ps) = spec.key_positions(&a) {
                        assert!(
                            ps.iter().all(|&p| p < a.len() && p > 0),
                            "{} with {argc} args of {fill:?}: {ps:?}",
                            spec.name
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn arity_follows_redis_rules() {
        let get = lookup(b"get").unwrap();
        assert!(get.is_arity_ok(2) && !get.is_arity_ok(1) && !get.is_arity_ok(3));
        let set = lookup(b"set").unwrap();
        assert!(set.is_arity_ok(3) && set.is_arity_ok(6) && !set.is_arity_ok(2));
        assert_eq!(
            arity_error(get),
            "ERR wrong number of arguments for 'get' command"
        );
    }

    #[test]
    fn unknown_command_text_matches_redis_7() {
        assert_eq!(
            unknown_command_error(&args(&["FOO", "a", "b"])),
            "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            unknown_command_error(&args(&["x"])),
            "ERR unknown command 'x', with args beginning with: "
        );
    }
}
