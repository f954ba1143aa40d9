//! The collection workloads' model: what a hash, list, set or sorted set
//! holds (`Content`), the writes (`Op`) applied to it the way a node applies
//! them, the read and write commands, parsing of the replies, and naming how
//! a read or a reply disagrees with the model. Pure: used by
//! `collections.rs`, it never talks to a node.

use std::collections::{BTreeMap, VecDeque};

use super::client::Reply;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Hash,
    List,
    Set,
    Zset,
}

pub(super) const KINDS: [Kind; 4] = [Kind::Hash, Kind::List, Kind::Set, Kind::Zset];

impl Kind {
    pub(super) fn tag(self) -> &'static str {
        match self {
            Kind::Hash => "h",
            Kind::List => "l",
            Kind::Set => "e",
            Kind::Zset => "z",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// One key's content: fields (hash), members (set, value ""), members and
/// scores (sorted set), or elements in order (list). Empty = no key.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub(super) struct Content {
    pub map: BTreeMap<String, String>,
    pub list: VecDeque<u64>,
}

/// One write, applied to the model the way the node applies it.
#[derive(Clone, Debug)]
pub(super) enum Op {
    Put(String, String),
    Incr(String, i64),
    Remove(String),
    Push(u64),
    Pop,
}

impl Content {
    pub(super) fn apply(&self, op: &Op) -> Content {
        let mut c = self.clone();
        match op {
            Op::Put(f, v) => {
                c.map.insert(f.clone(), v.clone());
            }
            Op::Incr(f, by) => {
                let v = c.map.get(f).and_then(|v| v.parse::<i64>().ok());
                c.map.insert(f.clone(), (v.unwrap_or(0) + by).to_string());
            }
            Op::Remove(f) => {
                c.map.remove(f);
            }
            Op::Push(n) => c.list.push_back(*n),
            Op::Pop => {
                c.list.pop_front();
            }
        }
        c
    }
}

/// How a read disagreed with the model.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Violation {
    Lost,
    Stale,
    Resurrected,
    Counter,
}

pub(super) fn is_counter(field: &str) -> bool {
    field.starts_with('n') || field.starts_with('c')
}

/// Names the disagreement between the model `want` and the read `got`.
pub(super) fn classify(kind: Kind, want: &Content, got: &Content) -> Violation {
    if kind == Kind::List {
        return if got.list.len() < want.list.len() {
            Violation::Lost
        } else {
            Violation::Stale
        };
    }
    for (f, v) in &want.map {
        match got.map.get(f) {
            None => return Violation::Lost,
            Some(g) if g != v && is_counter(f) => return Violation::Counter,
            Some(g) if g != v => return Violation::Stale,
            Some(_) => {}
        }
    }
    Violation::Resurrected
}

/// The read that returns a key's whole content.
pub(super) fn read_cmd(kind: Kind) -> Vec<&'static [u8]> {
    match kind {
        Kind::Hash => vec![b"HGETALL"],
        Kind::List => vec![b"LRANGE", b"0", b"-1"],
        Kind::Set => vec![b"SMEMBERS"],
        Kind::Zset => vec![b"ZRANGE", b"0", b"-1", b"WITHSCORES"],
    }
}

/// The content a read reply describes; `None` for anything unexpected.
pub(super) fn parse(kind: Kind, r: &Reply) -> Option<Content> {
    let Reply::Array(items) = r else {
        return None;
    };
    let texts: Vec<String> = items
        .iter()
        .map(|i| match i {
            Reply::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let mut c = Content::default();
    match kind {
        Kind::List => {
            for t in &texts {
                c.list.push_back(t.parse().ok()?);
            }
        }
        Kind::Set => c.map = texts.into_iter().map(|m| (m, String::new())).collect(),
        Kind::Hash | Kind::Zset => {
            for pair in texts.chunks(2) {
                let [f, v] = pair else { return None };
                // Scores are integers here; a node may print them as floats.
                let v = if kind == Kind::Zset {
                    (v.parse::<f64>().ok()? as i64).to_string()
                } else {
                    v.clone()
                };
                c.map.insert(f.clone(), v);
            }
        }
    }
    Some(c)
}

/// The reply is data too: RPUSH's new length, LPOP's element, the counter's
/// new value (read-modify-write must act on the latest value), and whether
/// a field or member was new or present.
pub(super) fn check_reply(kind: Kind, cur: &Content, op: &Op, r: &Reply) -> Option<Violation> {
    let next = cur.apply(op);
    let flag = |b: bool| Reply::Int(b as i64);
    let (want, v) = match op {
        Op::Push(_) => (Reply::Int(next.list.len() as i64), Violation::Lost),
        Op::Pop => {
            let front = cur.list.front().map(|f| f.to_string().into_bytes());
            (Reply::Bulk(front), Violation::Stale)
        }
        Op::Incr(f, _) => {
            let n: i64 = next.map.get(f).and_then(|v| v.parse().ok()).unwrap_or(0);
            let got = match r {
                Reply::Bulk(Some(b)) => std::str::from_utf8(b)
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .map(|x| x as i64),
                other => other.as_int(),
            };
            return (got != Some(n)).then_some(Violation::Counter);
        }
        // HSET answers 1 for a new field; SADD and ZADD are only sent for
        // an absent member. Told "already there": it came back.
        Op::Put(f, _) => {
            let new = kind != Kind::Hash || !cur.map.contains_key(f);
            let v = if new {
                Violation::Resurrected
            } else {
                Violation::Lost
            };
            (flag(new), v)
        }
        // Only sent for a present field or member: told "absent", it was lost.
        Op::Remove(_) => (flag(true), Violation::Lost),
    };
    (*r != want).then_some(v)
}

pub(super) fn write_args(kind: Kind, k: &[u8], op: &Op) -> Vec<Vec<u8>> {
    let s = |x: &str| x.as_bytes().to_vec();
    let (cmd, rest): (&str, Vec<Vec<u8>>) = match (kind, op) {
        (Kind::Hash, Op::Put(f, v)) => ("HSET", vec![s(f), s(v)]),
        (Kind::Hash, Op::Incr(f, by)) => ("HINCRBY", vec![s(f), s(&by.to_string())]),
        (Kind::Hash, _) => ("HDEL", vec![s(op_field(op))]),
        (Kind::List, Op::Push(n)) => ("RPUSH", vec![s(&n.to_string())]),
        (Kind::List, _) => ("LPOP", vec![]),
        (Kind::Set, Op::Put(m, _)) => ("SADD", vec![s(m)]),
        (Kind::Set, _) => ("SREM", vec![s(op_field(op))]),
        (Kind::Zset, Op::Incr(m, by)) => ("ZINCRBY", vec![s(&by.to_string()), s(m)]),
        (Kind::Zset, Op::Put(m, score)) => ("ZADD", vec![s(score), s(m)]),
        (Kind::Zset, _) => ("ZREM", vec![s(op_field(op))]),
    };
    let mut out = vec![s(cmd), k.to_vec()];
    out.extend(rest);
    out
}

pub(super) fn op_field(op: &Op) -> &str {
    match op {
        Op::Put(f, _) | Op::Incr(f, _) | Op::Remove(f) => f,
        Op::Push(_) | Op::Pop => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::client::bulk;

    #[test]
    fn hash_and_zset_disagreements_are_named() {
        let want = Content::default()
            .apply(&Op::Put("v0".into(), "5".into()))
            .apply(&Op::Incr("n0".into(), 3));
        let older = want.apply(&Op::Put("v0".into(), "4".into()));
        assert_eq!(classify(Kind::Hash, &want, &older), Violation::Stale);
        let counter = want.apply(&Op::Incr("n0".into(), 1));
        assert_eq!(classify(Kind::Hash, &want, &counter), Violation::Counter);
        let back = want.apply(&Op::Put("d7".into(), "1".into()));
        assert_eq!(classify(Kind::Hash, &want, &back), Violation::Resurrected);
        let gone = want.apply(&Op::Remove("v0".into()));
        assert_eq!(classify(Kind::Hash, &want, &gone), Violation::Lost);
        // Replies: an increment acting on an old value, a pop of the wrong
        // element, a member that was already there.
        let r = check_reply(Kind::Hash, &want, &Op::Incr("n0".into(), 2), &Reply::Int(2));
        assert_eq!(r, Some(Violation::Counter));
        let list = Content::default().apply(&Op::Push(4)).apply(&Op::Push(5));
        assert_eq!(check_reply(Kind::List, &list, &Op::Pop, &bulk("4")), None);
        assert_eq!(
            check_reply(Kind::List, &list, &Op::Pop, &bulk("5")),
            Some(Violation::Stale)
        );
        let add = Op::Put("m3".into(), "3".into());
        assert_eq!(
            check_reply(Kind::Zset, &want, &add, &Reply::Int(0)),
            Some(Violation::Resurrected)
        );
        let z = Reply::Array(vec![bulk("c0"), bulk("3"), bulk("m2"), bulk("2.0")]);
        let got = parse(Kind::Zset, &z).expect("parses");
        assert_eq!(got.map.get("m2").map(String::as_str), Some("2"));
    }
}
