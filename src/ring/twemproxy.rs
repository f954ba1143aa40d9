//! twemproxy-compatible placement: a pool's `hash`, `distribution` and
//! `hash_tag`, and the server names twemproxy hashes when none is given.
//!
//! Used by [`super::Ring::twemproxy`]; the `nutcracker.yml` reader fills a
//! [`Placement`] and the node names. Pure: no I/O. What twemproxy does, and
//! so what this copies (`nc_server.c`, `hashkit/nc_ketama.c`,
//! `nc_modula.c`, `nc_random.c`, `nc_conf.c`):
//!
//! - the key is cut to its hash tag when the pool has one (no tag: the whole
//!   key, braces included), then hashed by `hash`; an empty key hashes to 0;
//! - `ketama` always places points by MD5 of `"{name}-{i}"` whatever `hash`
//!   is, with the point count of twemproxy's `float` arithmetic
//!   (see [`super::points`]) — `hash` only hashes keys;
//! - `modula` takes `hash % total_weight` into a table holding each server
//!   `weight` times, servers in twemproxy's order: sorted by name, shorter
//!   names first (`conf_validate_server` sorts the pool's servers with
//!   `string_compare`, which compares lengths before bytes);
//! - `random` ignores the key and the weights: each request goes to a server
//!   drawn uniformly. It is not deterministic, so no key has a home; the ring
//!   draws from a per-thread generator.

use super::hash::{tagged, KeyHash};
use super::points::Built;
use super::{NodeSpec, RingError};
use std::cell::Cell;
use std::fmt;
use std::str::FromStr;

/// twemproxy's `KETAMA_MAX_HOSTLEN` minus its NUL: the longest point label
/// twemproxy hashes correctly.
pub const MAX_LABEL_BYTES: usize = 85;

/// twemproxy leaves the port out of a server's default name when it is the
/// memcached port (`CONF_DEFAULT_KETAMA_PORT`), for libmemcached's sake.
pub const KETAMA_DEFAULT_PORT: u16 = 11211;

/// twemproxy's `distribution:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// Consistent hashing (twemproxy's default).
    Ketama,
    /// `hash % total_weight`.
    Modula,
    /// A random server per request.
    Random,
}

impl Distribution {
    /// Every distribution, in twemproxy's order.
    pub const ALL: [Distribution; 3] = [
        Distribution::Ketama,
        Distribution::Modula,
        Distribution::Random,
    ];

    /// twemproxy's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Ketama => "ketama",
            Distribution::Modula => "modula",
            Distribution::Random => "random",
        }
    }
}

impl FromStr for Distribution {
    type Err = String;

    /// Exact, case-sensitive, as twemproxy compares it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Distribution::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!("unknown distribution '{s}' (expected ketama, modula or random)")
            })
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a twemproxy pool places keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    /// `hash:` (default `fnv1a_64`).
    pub hash: KeyHash,
    /// `distribution:` (default `ketama`).
    pub distribution: Distribution,
    /// `hash_tag:`, its two delimiter bytes; `None` hashes whole keys.
    pub hash_tag: Option<[u8; 2]>,
}

impl Default for Placement {
    /// twemproxy's defaults.
    fn default() -> Self {
        Placement {
            hash: KeyHash::Fnv1a64,
            distribution: Distribution::Ketama,
            hash_tag: None,
        }
    }
}

/// The name twemproxy hashes for a server given as `host:port` without a
/// name: `host:port`, or `host` alone on port 11211.
pub fn server_name(host: &str, port: u16) -> String {
    if port == KETAMA_DEFAULT_PORT {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

/// The twemproxy part of a ring: its placement and, for `modula` and
/// `random`, the slot table (node indices) that replaces the points.
#[derive(Clone, Debug)]
pub(super) struct Twem {
    placement: Placement,
    slots: Vec<u32>,
}

thread_local! {
    /// xorshift64 state for `random`; seeded per thread from std's random
    /// hasher keys. A `Cell` per thread: no lock, no shared atomic on the
    /// request path.
    static RANDOM_STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x9e37_79b9_7f4a_7c15);
    h.finish() | 1
}

impl Twem {
    /// Checks `nodes` against twemproxy's limits and builds the slot table.
    pub(super) fn new(nodes: &[NodeSpec], placement: Placement) -> Result<Twem, RingError> {
        let slots = match placement.distribution {
            Distribution::Ketama => {
                check_labels(nodes)?;
                Vec::new()
            }
            Distribution::Modula => {
                let mut slots = Vec::new();
                for idx in twemproxy_order(nodes) {
                    let copies = nodes[idx].weight as usize;
                    if slots.len() + copies > super::MAX_POINTS as usize {
                        return Err(RingError::TooManyPoints);
                    }
                    slots.extend(std::iter::repeat_n(idx as u32, copies));
                }
                slots
            }
            Distribution::Random => twemproxy_order(nodes).map(|i| i as u32).collect(),
        };
        Ok(Twem { placement, slots })
    }

    pub(super) fn placement(&self) -> Placement {
        self.placement
    }

    /// Whether keys are placed on ketama points (else on the slot table).
    #[inline]
    pub(super) fn has_points(&self) -> bool {
        self.placement.distribution == Distribution::Ketama
    }

    /// twemproxy's key hash: tag, then `hash`; the empty key is 0.
    #[inline]
    pub(super) fn key_hash(&self, key: &[u8]) -> u32 {
        let key = match self.placement.hash_tag {
            Some(tag) => tagged(key, tag),
            None => key,
        };
        if key.is_empty() {
            0
        } else {
            self.placement.hash.hash(key)
        }
    }

    /// The node of `hash` under `modula`, or a random node under `random`.
    #[inline]
    pub(super) fn locate_slot(&self, hash: u64) -> usize {
        let n = self.slots.len() as u64;
        let i = match self.placement.distribution {
            Distribution::Random => RANDOM_STATE.with(|s| {
                let mut x = s.get();
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s.set(x);
                x % n
            }),
            _ => hash % n,
        };
        self.slots[i as usize] as usize
    }

    /// Slot counts and shares in the shape of a point ring, for the ring's
    /// accessors (`points_of`, `share_of`).
    pub(super) fn slot_spread(&self, nodes: &[NodeSpec]) -> Built {
        let mut counts = vec![0usize; nodes.len()];
        for &s in &self.slots {
            counts[s as usize] += 1;
        }
        let total = self.slots.len().max(1) as f64;
        Built {
            points: Vec::new(),
            owners: Vec::new(),
            shares: counts.iter().map(|&c| c as f64 / total).collect(),
            counts,
        }
    }
}

/// Node indices in twemproxy's server order: by name, shorter first.
fn twemproxy_order(nodes: &[NodeSpec]) -> impl Iterator<Item = usize> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (nodes[a].name.as_bytes(), nodes[b].name.as_bytes());
        x.len().cmp(&y.len()).then(x.cmp(y))
    });
    order.into_iter()
}

/// Refuses names whose longest point label twemproxy could not hold.
fn check_labels(nodes: &[NodeSpec]) -> Result<(), RingError> {
    for (idx, node) in nodes.iter().enumerate() {
        let points = super::points::count(nodes, idx, super::RingConfig::default());
        let last_label = points.div_ceil(4).saturating_sub(1);
        if node.name.len() + 1 + last_label.to_string().len() > MAX_LABEL_BYTES {
            return Err(RingError::LabelTooLong(node.name.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "twemproxy_tests.rs"]
mod tests;
