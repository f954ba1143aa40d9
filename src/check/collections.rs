//! The checker's collection workloads: hashes, lists, sets and sorted sets,
//! each key written by one worker only, so the worker knows its exact content.
//!
//! - `h` keys: HSET of fields `v0..v3` to ever-increasing values, HINCRBY
//!   counters `n0`/`n1`, and `d*` fields set then HDEL'd (they must never
//!   come back).
//! - `l` keys: RPUSH of increasing sequence numbers and LPOP by the same
//!   worker; the list must be exactly the acknowledged pushes minus the
//!   acknowledged pops, in order.
//! - `e` keys (sets): SADD/SREM; membership must equal the acknowledged history.
//! - `z` keys: ZINCRBY counters `c0`/`c1` and ZADD/ZREM of members `m*`.
//! - `T*` keys: one of each type created with a one-hour TTL, which must
//!   survive every move.
//!
//! Every read compares the whole content with the model, and every write's
//! reply is checked against it (new length, popped element, the counter's
//! new value, whether a member was present). A request whose
//! reply is lost makes that one operation unknown: the model then holds two
//! candidate contents (without and with it), the next operation on that key
//! is a read, and the read must match one candidate, which becomes the
//! model. So an unknown write never causes a false violation, and a real
//! loss, stale copy, resurrected member or wrong counter is still seen. Keys
//! a killed node held gain the empty content as a candidate (see
//! [`super::workload::Amnesty`]). Called by `workload::Worker::run` and
//! `workload::verify`; it never touches keys other workers own.

use std::sync::atomic::Ordering;

use super::client::{Client, Reply};
use super::coll_model::{
    check_reply, classify, parse, read_cmd, write_args, Content, Kind, Op, Violation, KINDS,
};
use super::workload::{key, Amnesty, Shared, Worker};

/// Keys per type per worker.
const KEYS: usize = 8;
/// TTL'd keys per type per worker, reused round-robin.
const T_KEYS: u64 = 16;
const TTL_MS: i64 = 3_600_000;

/// What a worker knows about one key: the contents it may have (none: a
/// violation was just counted, and the next read is taken as the truth).
#[derive(Clone, Debug)]
struct Model {
    cands: Vec<Content>,
    /// Next value / sequence number / member number to write.
    seq: u64,
}

/// A worker's collection keys.
#[derive(Clone, Debug)]
pub struct Coll {
    keys: Vec<Vec<Model>>,
    /// TTL'd keys per type whose TTL was acknowledged.
    ttl: Vec<Vec<u64>>,
    next_t: u64,
}

impl Default for Coll {
    fn default() -> Coll {
        let m = Model {
            cands: vec![Content::default()],
            seq: 1,
        };
        Coll {
            keys: vec![vec![m; KEYS]; KINDS.len()],
            ttl: vec![Vec::new(); KINDS.len()],
            next_t: 0,
        }
    }
}

/// Counts a violation under its kind and under the collection type.
fn record(shared: &Shared, kind: Kind, v: Violation) {
    let counter = match v {
        Violation::Lost => &shared.lost,
        Violation::Stale => &shared.stale,
        Violation::Resurrected => &shared.resurrected,
        Violation::Counter => &shared.wrong_counters,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    shared.by_type[kind.index()].fetch_add(1, Ordering::Relaxed);
}

impl Coll {
    /// Keys a killed node held may now be empty.
    pub fn excuse(&mut self, w: usize, a: &Amnesty) {
        for kind in KINDS {
            for (i, m) in self.keys[kind.index()].iter_mut().enumerate() {
                if !m.cands.is_empty() && a.covers(&key(w, kind.tag(), i as u64)) {
                    let empty = Content::default();
                    if !m.cands.contains(&empty) {
                        m.cands.push(empty);
                    }
                }
            }
            self.ttl[kind.index()].retain(|&n| !a.covers(&ttl_key(w, kind, n)));
        }
    }

    /// Compares a read of key `i` with the model; on a match the model
    /// becomes that content, on a mismatch the violation is counted and the
    /// model follows the node (so one fault is counted once).
    fn check_read(&mut self, kind: Kind, i: usize, r: &Reply, shared: &Shared) {
        let Some(got) = parse(kind, r) else { return };
        let m = &mut self.keys[kind.index()][i];
        if !m.cands.is_empty() && !m.cands.contains(&got) {
            record(shared, kind, classify(kind, &m.cands[0], &got));
        }
        m.cands = vec![got];
    }
}

fn ttl_key(w: usize, kind: Kind, n: u64) -> Vec<u8> {
    key(w, &format!("T{}", kind.tag()), n)
}

impl Worker {
    /// One collection operation: a write, or a read checked against the model.
    pub(super) async fn coll_step(&mut self) {
        let w = self.st.id;
        let roll = self.rand(20);
        if roll == 0 {
            return self.coll_ttl().await;
        }
        let kind = KINDS[self.rand(4) as usize];
        let i = self.rand(KEYS as u64) as usize;
        let k = key(w, kind.tag(), i as u64);
        let m = &self.st.coll.keys[kind.index()][i];
        // An unknown outcome is settled by a read before the next write.
        if m.cands.len() != 1 || roll < 8 {
            let mut args = read_cmd(kind);
            args.insert(1, &k);
            if let Some(r) = self.call(&args).await {
                self.st.coll.check_read(kind, i, &r, &self.shared);
            }
            return;
        }
        let cur = m.cands[0].clone();
        let seq = m.seq;
        let pick = self.rand(4);
        let op = match kind {
            Kind::Hash => match pick {
                0 | 1 => Op::Put(format!("v{}", self.rand(4)), seq.to_string()),
                2 => Op::Incr(format!("n{}", self.rand(2)), 1 + self.rand(3) as i64),
                _ => match cur.map.keys().find(|f| f.starts_with('d')) {
                    Some(f) => Op::Remove(f.clone()),
                    None => Op::Put(format!("d{seq}"), "1".into()),
                },
            },
            Kind::List if cur.list.len() > 8 || (pick == 0 && !cur.list.is_empty()) => Op::Pop,
            Kind::List => Op::Push(seq),
            Kind::Set => {
                let member = self.rand(12).to_string();
                if cur.map.contains_key(&member) {
                    Op::Remove(member)
                } else {
                    Op::Put(member, String::new())
                }
            }
            Kind::Zset if pick < 2 => {
                Op::Incr(format!("c{}", self.rand(2)), 1 + self.rand(3) as i64)
            }
            Kind::Zset => {
                let n = self.rand(12);
                let member = format!("m{n}");
                if cur.map.contains_key(&member) {
                    Op::Remove(member)
                } else {
                    Op::Put(member, n.to_string())
                }
            }
        };
        self.st.coll.keys[kind.index()][i].seq += 1;
        let args = write_args(kind, &k, &op);
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let reply = self.call(&argv).await;
        let m = &mut self.st.coll.keys[kind.index()][i];
        match reply {
            Some(r) => {
                let next = cur.apply(&op);
                match check_reply(kind, &cur, &op, &r) {
                    None => m.cands = vec![next],
                    Some(v) => {
                        record(&self.shared, kind, v);
                        m.cands.clear();
                    }
                }
            }
            None => m.cands = vec![cur.clone(), cur.apply(&op)],
        }
    }

    /// Creates (or touches) a TTL'd key of each type in turn and gives it a TTL.
    async fn coll_ttl(&mut self) {
        let w = self.st.id;
        let t = self.st.coll.next_t;
        self.st.coll.next_t += 1;
        let kind = KINDS[(t % 4) as usize];
        let n = (t / 4) % T_KEYS;
        let k = ttl_key(w, kind, n);
        let create: Vec<&[u8]> = match kind {
            Kind::Hash => vec![b"HSET", &k, b"f", b"1"],
            // Bounded: the list is trimmed to its last few elements.
            Kind::List => vec![b"RPUSH", &k, b"1"],
            Kind::Set => vec![b"SADD", &k, b"1"],
            Kind::Zset => vec![b"ZADD", &k, b"1", b"1"],
        };
        if self.call(&create).await.is_none() {
            return;
        }
        if kind == Kind::List {
            let _ = self.call(&[b"LTRIM", &k, b"-4", b"-1"]).await;
        }
        let ttl = TTL_MS.to_string();
        if let Some(Reply::Int(1)) = self.call(&[b"PEXPIRE", &k, ttl.as_bytes()]).await {
            let set = &mut self.st.coll.ttl[kind.index()];
            if !set.contains(&n) {
                set.push(n);
            }
        }
    }
}
/// What the final reads covered and found.
#[derive(Default)]
pub struct Verified {
    /// Collection keys that exist and matched or were counted.
    pub keys: u64,
    /// TTL'd collection keys checked.
    pub ttls: u64,
    pub lost_ttls: u64,
}

/// Final reads: every collection key must match its model, every TTL'd key
/// must still carry its TTL.
pub async fn verify(
    c: &mut Client,
    w: usize,
    coll: &mut Coll,
    shared: &Shared,
) -> Result<Verified, String> {
    let mut out = Verified::default();
    for kind in KINDS {
        for i in 0..KEYS {
            let k = key(w, kind.tag(), i as u64);
            let mut args = read_cmd(kind);
            args.insert(1, &k);
            let r = c.call(&args).await?;
            match parse(kind, &r) {
                None => return Err(format!("final read of a {kind:?}: {}", r.text())),
                Some(got) if got != Content::default() => out.keys += 1,
                Some(_) => {}
            }
            coll.check_read(kind, i, &r, shared);
        }
        for &n in &coll.ttl[kind.index()] {
            out.ttls += 1;
            let r = c.call(&[b"PTTL", &ttl_key(w, kind, n)]).await?;
            match r.as_int() {
                Some(ms) if ms > 0 && ms <= TTL_MS => {}
                _ => out.lost_ttls += 1,
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::client::bulk;

    #[test]
    fn an_unknown_write_is_settled_by_the_next_read() {
        let shared = Shared::default();
        let mut coll = Coll::default();
        let m = &mut coll.keys[Kind::List.index()][0];
        let base = Content::default().apply(&Op::Push(1));
        m.cands = vec![base.clone(), base.apply(&Op::Push(2))];
        let read = Reply::Array(vec![bulk("1"), bulk("2")]);
        coll.check_read(Kind::List, 0, &read, &shared);
        assert_eq!(shared.lost.load(Ordering::Relaxed), 0);
        assert_eq!(coll.keys[Kind::List.index()][0].cands.len(), 1);
        // A read missing an acknowledged push is a lost write.
        coll.check_read(Kind::List, 0, &Reply::Array(vec![bulk("1")]), &shared);
        assert_eq!(shared.lost.load(Ordering::Relaxed), 1);
    }
}
