//! The consistent-hash ring: which node owns a key.
//!
//! Owns node specs, points, weights, hash tags, lookup and the topology epoch.
//! The proxy builds a [`Ring`] from its config and swaps snapshots atomically on
//! topology change; the simulator and benches use it directly. Pure: no I/O, no
//! tokio, no global state. A ring never changes after it is built — a change
//! builds a new one with a higher epoch ([`Ring::with_nodes`]).
//!
//! Two point schemes:
//! - [`PointScheme::Ketama`] (default) places keys exactly as twemproxy does with
//!   `hash: md5`, `distribution: ketama` over the same server names and weights.
//! - [`PointScheme::Vnode`] puts one 64-bit point per virtual node at
//!   `md5("{name}:{i}")`, `vnodes × weight` per node.
//!
//! [`Ring::twemproxy`] builds a ring that places keys exactly as a twemproxy
//! pool does for any `hash`, `distribution` (`ketama`, `modula`, `random`)
//! and `hash_tag` ([`Placement`], see [`twemproxy`]); keys are then hashed by
//! the pool's [`KeyHash`] instead of the scheme's.
//!
//! Lookup is the first point ≥ the key hash, wrapping to the first point.
//! Points live in a sorted `Vec<u64>` with a parallel `Vec<u32>` of owners, so
//! the binary search touches only the dense point array.

mod diff;
mod hash;
mod points;
#[cfg(test)]
mod tests;
pub mod twemproxy;

pub(crate) use diff::losing_nodes;
pub use hash::KeyHash;
pub(crate) use hash::{hash_tag, md5_u32, md5_u64};
pub use twemproxy::{Distribution, Placement};

use std::fmt;
use std::str::FromStr;

/// Default number of points per unit of weight (ketama: per node at equal weights).
pub const DEFAULT_VNODES: u32 = 160;

/// Upper bound on the points of one ring: 10 million points is 120 MB of
/// arrays and seconds of MD5; anything larger is a configuration mistake.
pub(crate) const MAX_POINTS: u64 = 10_000_000;

/// How node points are placed and keys hashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointScheme {
    /// twemproxy-compatible ketama: 32-bit points, four per MD5 of `"{name}-{i}"`.
    Ketama,
    /// One 64-bit point per virtual node at MD5 of `"{name}:{i}"`.
    Vnode,
}

impl FromStr for PointScheme {
    type Err = RingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("ketama") {
            Ok(PointScheme::Ketama)
        } else if s.eq_ignore_ascii_case("vnode") {
            Ok(PointScheme::Vnode)
        } else {
            Err(RingError::UnknownScheme(s.to_string()))
        }
    }
}

impl fmt::Display for PointScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PointScheme::Ketama => "ketama",
            PointScheme::Vnode => "vnode",
        })
    }
}

/// One node of the ring. `name` decides placement (its point labels), `addr`
/// is where it lives; the caller fills `name` with `addr` when none is given,
/// so a named node can move address without moving keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    /// Placement identity; point labels are derived from it.
    pub name: String,
    /// `host:port` of the node.
    pub addr: String,
    /// Relative capacity; a weight-2 node owns about twice the keys of weight 1.
    pub weight: u32,
}

/// Ring parameters that stay the same across epochs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Point scheme.
    pub scheme: PointScheme,
    /// Points per node (ketama, scaled by weight share) or per unit of weight (vnode).
    pub vnodes: u32,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            scheme: PointScheme::Ketama,
            vnodes: DEFAULT_VNODES,
        }
    }
}

/// Why a ring could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// The node list is empty.
    NoNodes,
    /// A node (by name) has weight 0.
    ZeroWeight(String),
    /// Two nodes share a name.
    DuplicateName(String),
    /// Two nodes share an address.
    DuplicateAddr(String),
    /// A node has an empty name (and no address to default to).
    EmptyName,
    /// `vnodes` is 0.
    ZeroVnodes,
    /// A node's weight is so small next to the others that ketama gives it no
    /// point; it would never receive a key.
    NoPoints(String),
    /// More than [`MAX_POINTS`] points in total.
    TooManyPoints,
    /// Not `ketama` or `vnode`.
    UnknownScheme(String),
    /// A twemproxy ketama point label (`"{name}-{i}"`) longer than the 85
    /// bytes twemproxy's label buffer holds: twemproxy would hash bytes past
    /// its buffer there, which nothing can reproduce.
    LabelTooLong(String),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::NoNodes => write!(f, "ring has no nodes"),
            RingError::ZeroWeight(n) => write!(f, "node '{n}' has weight 0"),
            RingError::DuplicateName(n) => write!(f, "duplicate node name '{n}'"),
            RingError::DuplicateAddr(a) => write!(f, "duplicate node address '{a}'"),
            RingError::EmptyName => write!(f, "node name is empty"),
            RingError::ZeroVnodes => write!(f, "vnodes must be at least 1"),
            RingError::NoPoints(n) => {
                write!(
                    f,
                    "node '{n}' gets no ketama points: its weight is too small next to the others"
                )
            }
            RingError::TooManyPoints => write!(f, "ring would have more than {MAX_POINTS} points"),
            RingError::UnknownScheme(s) => {
                write!(f, "unknown point scheme '{s}' (expected ketama or vnode)")
            }
            RingError::LabelTooLong(n) => write!(
                f,
                "server name '{n}' is too long for twemproxy's ketama (its point labels \
                 exceed {} bytes)",
                twemproxy::MAX_LABEL_BYTES
            ),
        }
    }
}

impl std::error::Error for RingError {}

/// An immutable consistent-hash ring over a node list (Send + Sync; share it
/// behind an `Arc`).
#[derive(Debug, Clone)]
pub struct Ring {
    nodes: Vec<NodeSpec>,
    config: RingConfig,
    epoch: u64,
    /// Sorted point positions (ketama values are < 2^32).
    points: Vec<u64>,
    /// `owners[i]` is the node index of `points[i]`.
    owners: Vec<u32>,
    /// `index[b]` is the first point in bucket `b` or after it, where a
    /// bucket is a range of hashes sharing their top bits (`hash >> shift`);
    /// one entry more than buckets. A lookup searches one bucket, usually
    /// holding zero to two points, instead of the whole ring.
    index: Vec<u32>,
    shift: u32,
    /// Points generated per node.
    point_counts: Vec<usize>,
    /// Fraction of the hash space each node owns.
    shares: Vec<f64>,
    /// Set for a twemproxy-compatible ring: its key hash and distribution
    /// replace the scheme's.
    twem: Option<twemproxy::Twem>,
}

impl Ring {
    /// Builds the ring for `nodes` (their order is the index order of
    /// [`Ring::locate`]) at `epoch`.
    ///
    /// Equal point values (MD5 collisions of labels; twemproxy leaves their
    /// order to `qsort`) are ordered by node name, then label index, so the
    /// placement never depends on the order of the node list: the node with
    /// the smaller name wins the tie.
    pub fn new(nodes: Vec<NodeSpec>, config: RingConfig, epoch: u64) -> Result<Ring, RingError> {
        Ring::build(nodes, config, epoch, None)
    }

    /// Builds a ring that places keys exactly as a twemproxy pool with these
    /// servers (in its `servers:` order; `name` as [`twemproxy::server_name`]
    /// gives it) and this hash, distribution and hash tag.
    pub fn twemproxy(
        nodes: Vec<NodeSpec>,
        placement: Placement,
        epoch: u64,
    ) -> Result<Ring, RingError> {
        let twem = twemproxy::Twem::new(&nodes, placement)?;
        Ring::build(nodes, RingConfig::default(), epoch, Some(twem))
    }

    fn build(
        nodes: Vec<NodeSpec>,
        config: RingConfig,
        epoch: u64,
        twem: Option<twemproxy::Twem>,
    ) -> Result<Ring, RingError> {
        validate(&nodes, config)?;
        let built = match &twem {
            Some(t) if !t.has_points() => t.slot_spread(&nodes),
            _ => points::build(&nodes, config, twem.is_some())?,
        };
        let (index, shift) = bucket_index(&built.points, config.scheme);
        Ok(Ring {
            point_counts: built.counts,
            points: built.points,
            owners: built.owners,
            index,
            shift,
            shares: built.shares,
            twem,
            nodes,
            config,
            epoch,
        })
    }

    /// Index into [`Ring::nodes`] of the node owning `key` (hash tags applied).
    #[inline]
    pub fn locate(&self, key: &[u8]) -> usize {
        self.locate_hash(self.key_hash(key))
    }

    /// Index of the node owning hash `hash`: the first point ≥ `hash`, wrapping.
    #[inline]
    pub fn locate_hash(&self, hash: u64) -> usize {
        if let Some(t) = &self.twem {
            if !t.has_points() {
                return t.locate_slot(hash);
            }
        }
        let b = (hash >> self.shift) as usize;
        let i = match (self.index.get(b), self.index.get(b + 1)) {
            (Some(&lo), Some(&hi)) => {
                let (lo, hi) = (lo as usize, hi as usize);
                lo + self.points[lo..hi].partition_point(|&p| p < hash)
            }
            // Beyond the hash space of the scheme: past every point.
            _ => self.points.len(),
        };
        let i = if i == self.points.len() { 0 } else { i };
        self.owners[i] as usize
    }

    /// The hash of `key`'s tagged part under this ring's scheme (ketama: 32-bit).
    #[inline]
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        if let Some(t) = &self.twem {
            return u64::from(t.key_hash(key));
        }
        scheme_key_hash(self.config.scheme, key)
    }

    /// The nodes, in the order given to [`Ring::new`].
    pub(crate) fn nodes(&self) -> &[NodeSpec] {
        &self.nodes
    }

    /// Node `idx`; panics if out of range.
    pub(crate) fn node(&self, idx: usize) -> &NodeSpec {
        &self.nodes[idx]
    }

    /// Index of the node with this name, else of the node with this address.
    pub(crate) fn index_of(&self, name_or_addr: &str) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.name == name_or_addr)
            .or_else(|| self.nodes.iter().position(|n| n.addr == name_or_addr))
    }

    /// Topology epoch this ring was built for.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Scheme and vnodes.
    pub(crate) fn config(&self) -> RingConfig {
        self.config
    }

    /// Number of points node `idx` has on the ring.
    pub(crate) fn points_of(&self, idx: usize) -> usize {
        self.point_counts[idx]
    }

    /// Total points on the ring.
    pub(crate) fn total_points(&self) -> usize {
        self.points.len()
    }

    /// Fraction (0..=1) of the hash space node `idx` owns: its expected share
    /// of uniformly hashed keys.
    pub(crate) fn share_of(&self, idx: usize) -> f64 {
        self.shares[idx]
    }

    /// Bytes of point tables (what a lookup walks plus the owner array).
    pub(crate) fn metadata_bytes(&self) -> usize {
        self.points.len() * (std::mem::size_of::<u64>() + std::mem::size_of::<u32>())
    }

    /// A ring over `nodes` with the same config at the next epoch.
    pub(crate) fn with_nodes(&self, nodes: Vec<NodeSpec>) -> Result<Ring, RingError> {
        match &self.twem {
            Some(t) => Ring::twemproxy(nodes, t.placement(), self.epoch + 1),
            None => Ring::new(nodes, self.config, self.epoch + 1),
        }
    }

    /// The twemproxy placement this ring follows, if it was built by
    /// [`Ring::twemproxy`].
    pub fn placement(&self) -> Option<Placement> {
        self.twem.as_ref().map(|t| t.placement())
    }
}

/// The key hash of `scheme` over `key`'s hash tag, without a ring.
///
/// Ketama hashes the empty key to 0, not MD5(""): twemproxy's
/// `server_pool_hash` returns 0 for `keylen == 0`, so the empty key goes to the
/// owner of the first point there too.
#[inline]
pub(crate) fn scheme_key_hash(scheme: PointScheme, key: &[u8]) -> u64 {
    let tagged = hash_tag(key);
    match scheme {
        PointScheme::Ketama if tagged.is_empty() => 0,
        PointScheme::Ketama => u64::from(md5_u32(tagged)),
        PointScheme::Vnode => md5_u64(tagged),
    }
}

fn validate(nodes: &[NodeSpec], config: RingConfig) -> Result<(), RingError> {
    if nodes.is_empty() {
        return Err(RingError::NoNodes);
    }
    if config.vnodes == 0 {
        return Err(RingError::ZeroVnodes);
    }
    if nodes.len() > u32::MAX as usize {
        return Err(RingError::TooManyPoints);
    }
    let mut names: Vec<&str> = Vec::with_capacity(nodes.len());
    let mut addrs: Vec<&str> = Vec::with_capacity(nodes.len());
    for n in nodes {
        if n.name.is_empty() {
            return Err(RingError::EmptyName);
        }
        if n.weight == 0 {
            return Err(RingError::ZeroWeight(n.name.clone()));
        }
        names.push(&n.name);
        // An empty address means "none given" (simulations); only real ones must differ.
        if !n.addr.is_empty() {
            addrs.push(&n.addr);
        }
    }
    // Sorting then comparing neighbours: O(n log n) and no hashing of strings.
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(RingError::DuplicateName(w[0].to_string()));
    }
    addrs.sort_unstable();
    if let Some(w) = addrs.windows(2).find(|w| w[0] == w[1]) {
        return Err(RingError::DuplicateAddr(w[0].to_string()));
    }
    Ok(())
}

/// Builds [`Ring`]'s bucket index over sorted `points`: about two buckets per
/// point (256 to 65 536 of them), each entry the first point at or after the
/// bucket's lowest hash.
fn bucket_index(points: &[u64], scheme: PointScheme) -> (Vec<u32>, u32) {
    let space_bits = match scheme {
        PointScheme::Ketama => 32,
        PointScheme::Vnode => 64,
    };
    let buckets = (points.len() * 2).next_power_of_two().clamp(256, 1 << 16);
    let shift = space_bits - buckets.trailing_zeros();
    let mut index = Vec::with_capacity(buckets + 1);
    let mut i = 0;
    for b in 0..buckets as u64 {
        let start = b << shift;
        while i < points.len() && points[i] < start {
            i += 1;
        }
        index.push(i as u32);
    }
    index.push(points.len() as u32);
    (index, shift)
}
