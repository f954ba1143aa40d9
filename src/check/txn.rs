//! The checker's transaction workload: MULTI/EXEC and WATCH through the
//! proxy, across topology changes.
//!
//! - Bank: each worker owns [`ACCOUNTS`] accounts sharing one hash tag
//!   (so one node holds them all), seeded with [`START`] each, and moves
//!   money between two of them with `MULTI; DECRBY; INCRBY; EXEC`. An
//!   `MGET` of all of them must always sum to `ACCOUNTS * START`: a
//!   transaction applied in part, seen half-done, or a copy of one account
//!   older than another after a move breaks the sum.
//! - Check-and-set: every worker increments the same [`CAS_KEYS`] counters
//!   with `WATCH k; GET k; MULTI; SET k v+1; EXEC`. A committed EXEC is one
//!   increment; at the end each counter must lie between the committed
//!   ones and that plus the ambiguous ones. A WATCH that misses another
//!   client's write loses an increment.
//!
//! A step stops at the first unexpected reply and drops its connection, so
//! no command of a broken transaction ever runs outside it. Keys a killed
//! node held are excused ([`Amnesty`]). Called by `workload::Worker::run`
//! and `workload::verify`.

use std::sync::atomic::Ordering;

use super::client::{Client, Reply};
use super::workload::{Amnesty, Worker};

/// Accounts per worker.
pub(crate) const ACCOUNTS: usize = 4;
/// Each account's starting balance.
const START: i64 = 100;
/// Counters shared by every worker.
pub(crate) const CAS_KEYS: usize = 2;

fn account(w: usize, i: usize) -> Vec<u8> {
    format!("chk:{{bank{w}}}:acct:{i}").into_bytes()
}

fn cas_key(n: usize) -> Vec<u8> {
    format!("chk:cas:{n}").into_bytes()
}

/// What one worker knows of its transactions.
#[derive(Clone, Debug, Default)]
pub struct Txn {
    /// The accounts hold their starting balances.
    seeded: bool,
    /// A killed node held the accounts: their sum is no longer known.
    excused: bool,
    /// Committed check-and-sets per counter, and ambiguous ones.
    pub cas_acked: [i64; CAS_KEYS],
    pub cas_unknown: [i64; CAS_KEYS],
    /// Committed transfers and check-and-sets, and EXECs WATCH aborted.
    pub transfers: u64,
    pub cas_aborted: u64,
}

impl Txn {
    /// Excuses the accounts if `a` covers them.
    pub fn excuse(&mut self, w: usize, a: &Amnesty) {
        if a.covers(&account(w, 0)) {
            self.excused = true;
        }
    }
}

/// Whether an `MGET` of the accounts breaks the sum; `None` when the reply
/// is not a full set of balances (then nothing is concluded).
pub(crate) fn sum_broken(r: &Reply) -> Option<bool> {
    let Reply::Array(items) = r else { return None };
    if items.len() != ACCOUNTS {
        return None;
    }
    let mut sum = 0;
    for item in items {
        sum += match item {
            Reply::Bulk(None) => 0,
            other => other.as_int()?,
        };
    }
    Some(sum != ACCOUNTS as i64 * START)
}

/// Whether a committed counter value is impossible.
pub(crate) fn cas_broken(value: i64, acked: i64, unknown: i64) -> bool {
    value < acked || value > acked + unknown
}

impl Worker {
    /// One transaction step: seed, transfer, audit or check-and-set.
    pub(super) async fn txn_step(&mut self) {
        let w = self.st.id;
        if !self.st.txn.seeded {
            let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
            for i in 0..ACCOUNTS {
                args.push(account(w, i));
                args.push(START.to_string().into_bytes());
            }
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            if let Some(Reply::Simple(_)) = self.call(&args).await {
                self.st.txn.seeded = true;
            }
            return;
        }
        match self.rand(3) {
            0 => self.transfer().await,
            1 => self.audit().await,
            _ => self.check_and_set().await,
        }
    }

    /// Sends `args`; true if the reply is `want`. On anything else the
    /// connection is dropped (the server forgets MULTI and WATCH).
    async fn expect(&mut self, args: &[&[u8]], want: &str) -> bool {
        match self.call(args).await {
            Some(Reply::Simple(s)) if s == want => true,
            _ => {
                self.client.drop_connection();
                false
            }
        }
    }

    async fn transfer(&mut self) {
        let w = self.st.id;
        let from = self.rand(ACCOUNTS as u64) as usize;
        let to = (from + 1 + self.rand(ACCOUNTS as u64 - 1) as usize) % ACCOUNTS;
        let amount = (1 + self.rand(20)).to_string();
        let (a, b) = (account(w, from), account(w, to));
        let steps: [(&[&[u8]], &str); 3] = [
            (&[b"MULTI"], "OK"),
            (&[b"DECRBY", &a, amount.as_bytes()], "QUEUED"),
            (&[b"INCRBY", &b, amount.as_bytes()], "QUEUED"),
        ];
        for (args, want) in steps {
            if !self.expect(args, want).await {
                return;
            }
        }
        match self.call(&[b"EXEC"]).await {
            Some(Reply::Array(r)) if r.len() == 2 => self.st.txn.transfers += 1,
            // Applied whole or not at all: the sum holds either way.
            _ => self.client.drop_connection(),
        }
    }

    async fn audit(&mut self) {
        let w = self.st.id;
        let keys: Vec<Vec<u8>> = (0..ACCOUNTS).map(|i| account(w, i)).collect();
        let mut args: Vec<&[u8]> = vec![b"MGET"];
        args.extend(keys.iter().map(|k| k.as_slice()));
        let Some(r) = self.call(&args).await else {
            return;
        };
        self.st.apply_amnesties(&self.shared);
        if sum_broken(&r) == Some(true) && !self.st.txn.excused {
            self.shared.tx_sum.fetch_add(1, Ordering::Relaxed);
            // Counted once: the balances as read become the new truth.
            self.st.txn.excused = true;
        }
    }

    async fn check_and_set(&mut self) {
        let n = self.rand(CAS_KEYS as u64) as usize;
        let k = cas_key(n);
        if !self.expect(&[b"WATCH", &k], "OK").await {
            return;
        }
        let v = match self.call(&[b"GET", &k]).await {
            Some(Reply::Bulk(None)) => 0,
            Some(r @ Reply::Bulk(Some(_))) => match r.as_int() {
                Some(v) => v,
                None => return self.client.drop_connection(),
            },
            _ => return self.client.drop_connection(),
        };
        let next = (v + 1).to_string();
        if !self.expect(&[b"MULTI"], "OK").await
            || !self.expect(&[b"SET", &k, next.as_bytes()], "QUEUED").await
        {
            return;
        }
        match self.call(&[b"EXEC"]).await {
            Some(Reply::Array(r)) if r.len() == 1 => self.st.txn.cas_acked[n] += 1,
            // Nil: a watched key changed; nothing ran.
            Some(Reply::Array(_)) => self.st.txn.cas_aborted += 1,
            _ => {
                self.st.txn.cas_unknown[n] += 1;
                self.client.drop_connection();
            }
        }
    }
}

/// Final reads: every worker's sum, and the shared counters. Returns
/// (sum violations, counter violations); excused keys are skipped.
pub(crate) async fn verify(
    c: &mut Client,
    workers: &[(usize, Txn)],
    amnesties: &[std::sync::Arc<Amnesty>],
) -> Result<(u64, u64), String> {
    let mut sums = 0;
    for (w, txn) in workers {
        if !txn.seeded || txn.excused {
            continue;
        }
        let keys: Vec<Vec<u8>> = (0..ACCOUNTS).map(|i| account(*w, i)).collect();
        let mut args: Vec<&[u8]> = vec![b"MGET"];
        args.extend(keys.iter().map(|k| k.as_slice()));
        if sum_broken(&c.call(&args).await?) != Some(false) {
            sums += 1;
        }
    }
    let mut cas = 0;
    for n in 0..CAS_KEYS {
        let k = cas_key(n);
        if amnesties.iter().any(|a| a.covers(&k)) {
            continue;
        }
        let acked: i64 = workers.iter().map(|(_, t)| t.cas_acked[n]).sum();
        let unknown: i64 = workers.iter().map(|(_, t)| t.cas_unknown[n]).sum();
        let value = c.call(&[b"GET", &k]).await?.as_int().unwrap_or(0);
        if cas_broken(value, acked, unknown) {
            cas += 1;
        }
    }
    Ok((sums, cas))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balances(v: &[Option<i64>]) -> Reply {
        Reply::Array(
            v.iter()
                .map(|b| Reply::Bulk(b.map(|n| n.to_string().into_bytes())))
                .collect(),
        )
    }

    #[test]
    fn a_transfer_seen_half_done_breaks_the_sum() {
        assert_eq!(sum_broken(&balances(&[Some(100); 4])), Some(false));
        assert_eq!(
            sum_broken(&balances(&[Some(90), Some(110), Some(100), Some(100)])),
            Some(false)
        );
        // The DECRBY without its INCRBY.
        assert_eq!(
            sum_broken(&balances(&[Some(90), Some(100), Some(100), Some(100)])),
            Some(true)
        );
        // A lost account.
        assert_eq!(
            sum_broken(&balances(&[None, Some(100), Some(100), Some(100)])),
            Some(true)
        );
        assert_eq!(sum_broken(&Reply::Error("ERR".into())), None);
    }

    #[test]
    fn a_lost_check_and_set_is_a_violation() {
        assert!(!cas_broken(10, 10, 0));
        assert!(!cas_broken(11, 10, 2));
        assert!(cas_broken(9, 10, 2), "an acknowledged increment was lost");
        assert!(cas_broken(13, 10, 2), "more increments than were sent");
    }
}
