//! Writers whose every acknowledged request is recorded, and the check
//! that reads each key back: how the topology-change tests (ADDNODE and
//! REMOVENODE through a fleet, a node added by a reload) count lost and
//! resurrected keys.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;

/// What a key holds as far as its writer knows.
#[derive(Clone, PartialEq, Debug)]
pub enum Known {
    Value(String),
    Deleted,
    /// A request on it failed without saying whether it took effect.
    Unsure,
}

/// What a writer knows at the end: each key's state, requests acknowledged
/// and refused.
pub type Tally = (HashMap<String, Known>, u64, u64);

/// One writer per proxy, each on keys of its own: every SET on a new key,
/// every seventh request a DEL of a key set a little before, so each key's
/// last write is made at one moment of the change, and never hidden by a
/// later one. Every acknowledged request is recorded.
pub struct Writers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Tally>>,
}

pub fn short_connect(port: u16) -> redis::Connection {
    let con = connect(port);
    con.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    con
}

pub fn is_refusal(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::TryAgain || e.to_string().contains("TRYAGAIN")
}

impl Writers {
    pub fn start(ports: &[u16]) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = ports
            .iter()
            .enumerate()
            .map(|(w, &port)| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut known = HashMap::new();
                    let (mut acked, mut refused) = (0u64, 0u64);
                    let mut con = short_connect(port);
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let delete = n.is_multiple_of(7);
                        let key = format!("w{w}:{}", if delete { n - 5 } else { n });
                        let value = format!("{w}-{n}");
                        let r: redis::RedisResult<()> = if delete {
                            redis::cmd("DEL").arg(&key).query(&mut con)
                        } else {
                            redis::cmd("SET").arg(&key).arg(&value).query(&mut con)
                        };
                        match r {
                            Ok(()) => {
                                acked += 1;
                                let k = if delete {
                                    Known::Deleted
                                } else {
                                    Known::Value(value)
                                };
                                known.insert(key, k);
                            }
                            Err(e) if is_refusal(&e) => refused += 1,
                            Err(_) => {
                                known.insert(key, Known::Unsure);
                                con = short_connect(port);
                            }
                        }
                    }
                    (known, acked, refused)
                })
            })
            .collect();
        Writers { stop, threads }
    }

    pub fn finish(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = HashMap::new();
        let (mut acked, mut refused) = (0, 0);
        for t in self.threads {
            let (k, a, r) = t.join().unwrap();
            all.extend(k);
            acked += a;
            refused += r;
        }
        (all, acked, refused)
    }
}

/// Reads every known key through `port`: (lost, resurrected).
pub fn check(port: u16, known: &HashMap<String, Known>) -> (usize, usize) {
    let mut con = connect(port);
    let (mut lost, mut resurrected) = (0, 0);
    let all: Vec<(&String, &Known)> = known.iter().collect();
    for chunk in all.chunks(500) {
        let mut pipe = redis::pipe();
        for (key, _) in chunk {
            pipe.cmd("GET").arg(*key);
        }
        let got: Vec<Option<String>> = pipe.query(&mut con).unwrap();
        for ((key, want), got) in chunk.iter().zip(got) {
            match (want, got) {
                (Known::Value(v), Some(g)) if *v == g => {}
                (Known::Value(v), g) => {
                    lost += 1;
                    eprintln!("lost through {port}: {key} = {g:?}, acknowledged {v}");
                }
                (Known::Deleted, Some(g)) => {
                    resurrected += 1;
                    eprintln!("resurrected through {port}: {key} = {g}");
                }
                _ => {}
            }
        }
    }
    (lost, resurrected)
}

pub fn cluster(port: u16, args: &[&str]) -> redis::RedisResult<String> {
    let mut cmd = redis::cmd("CLUSTER");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(&mut connect(port))
}
