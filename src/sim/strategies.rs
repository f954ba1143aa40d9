//! Key-placement strategies compared by `shardis sim --compare`, each behind
//! the small [`Placement`] trait: mod-N, the ring (ketama and vnode),
//! rendezvous (HRW), jump consistent hash, and fixed slot tables (16384 CRC16
//! slots like Redis Cluster, and 64 slots).
//!
//! Only the simulator uses these; the proxy routes with [`crate::ring::Ring`].
//! Nodes are numbered 0..n; a join adds node n, a leave removes node n-1, so
//! an unchanged index means an unchanged node and movement is a plain compare.

use super::keys::splitmix64;
use crate::ring::{md5_u64, NodeSpec, PointScheme, Ring, RingConfig};

/// A key as every strategy sees it: the hash-tagged bytes plus their MD5 (the
/// first 8 bytes little-endian), computed once per key and shared.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHash<'a> {
    /// The part of the key that decides placement.
    pub tagged: &'a [u8],
    /// First 8 bytes of MD5(`tagged`), little-endian; its low 32 bits are the
    /// ketama key hash.
    pub h64: u64,
}

impl<'a> KeyHash<'a> {
    /// Hashes `key`'s tagged part.
    #[inline]
    pub(crate) fn new(key: &'a [u8]) -> KeyHash<'a> {
        let tagged = crate::ring::hash_tag(key);
        KeyHash {
            tagged,
            h64: md5_u64(tagged),
        }
    }
}

/// One placement over nodes 0..n.
pub(crate) trait Placement: Send + Sync {
    /// Strategy label for reports.
    fn name(&self) -> String;
    /// Node index owning `key`.
    fn locate(&self, key: &KeyHash<'_>) -> usize;
    /// Number of nodes.
    fn nodes(&self) -> usize;
    /// Bytes of routing state a proxy must hold and agree on.
    fn metadata_bytes(&self) -> usize;
    /// The placement after node `n` joins, moving as the strategy dictates.
    fn joined(&self) -> Box<dyn Placement>;
    /// The placement after node `n-1` leaves.
    fn left(&self) -> Box<dyn Placement>;
}

/// Every strategy over `n` nodes, in report order.
pub(crate) fn all(n: usize, vnodes: u32) -> Vec<Box<dyn Placement>> {
    vec![
        Box::new(ModN { n }),
        Box::new(RingPlacement::new(n, PointScheme::Ketama, vnodes)),
        Box::new(RingPlacement::new(n, PointScheme::Vnode, vnodes)),
        Box::new(Rendezvous::new(n)),
        Box::new(Jump { n }),
        Box::new(Slots::even(n, SlotHash::Crc16)),
        Box::new(Slots::even(n, SlotHash::Md5Mod64)),
    ]
}

/// Sim node names: `node1..=nodeN`.
pub(crate) fn node_specs(n: usize, weights: &[u32]) -> Vec<NodeSpec> {
    (0..n)
        .map(|i| NodeSpec {
            name: format!("node{}", i + 1),
            addr: format!("127.0.0.1:{}", 7001 + i),
            weight: weights.get(i).copied().unwrap_or(1),
        })
        .collect()
}

/// `hash % n`: the baseline every other strategy exists to beat.
struct ModN {
    n: usize,
}

impl Placement for ModN {
    fn name(&self) -> String {
        "mod-N (md5 % N)".into()
    }
    fn locate(&self, key: &KeyHash<'_>) -> usize {
        (key.h64 % self.n as u64) as usize
    }
    fn nodes(&self) -> usize {
        self.n
    }
    fn metadata_bytes(&self) -> usize {
        0
    }
    fn joined(&self) -> Box<dyn Placement> {
        Box::new(ModN { n: self.n + 1 })
    }
    fn left(&self) -> Box<dyn Placement> {
        Box::new(ModN { n: self.n - 1 })
    }
}

/// The shardis ring itself.
struct RingPlacement {
    ring: Ring,
}

impl RingPlacement {
    fn new(n: usize, scheme: PointScheme, vnodes: u32) -> RingPlacement {
        let ring =
            Ring::new(node_specs(n, &[]), RingConfig { scheme, vnodes }, 0).expect("sim ring");
        RingPlacement { ring }
    }
    fn resized(&self, n: usize) -> Box<dyn Placement> {
        Box::new(RingPlacement {
            ring: self.ring.with_nodes(node_specs(n, &[])).expect("sim ring"),
        })
    }
}

impl Placement for RingPlacement {
    fn name(&self) -> String {
        let c = self.ring.config();
        format!("ring {} ({} vnodes)", c.scheme, c.vnodes)
    }
    fn locate(&self, key: &KeyHash<'_>) -> usize {
        match self.ring.config().scheme {
            // The ketama key hash is the low 32 bits of the same digest.
            PointScheme::Ketama => self.ring.locate_hash(u64::from(key.h64 as u32)),
            PointScheme::Vnode => self.ring.locate_hash(key.h64),
        }
    }
    fn nodes(&self) -> usize {
        self.ring.nodes().len()
    }
    fn metadata_bytes(&self) -> usize {
        self.ring.metadata_bytes()
    }
    fn joined(&self) -> Box<dyn Placement> {
        self.resized(self.nodes() + 1)
    }
    fn left(&self) -> Box<dyn Placement> {
        self.resized(self.nodes() - 1)
    }
}

/// Rendezvous (highest random weight): every node scores the key, the highest
/// wins. O(n) per lookup, one seed per node of state.
struct Rendezvous {
    seeds: Vec<u64>,
}

impl Rendezvous {
    fn new(n: usize) -> Rendezvous {
        let seeds = node_specs(n, &[])
            .iter()
            .map(|s| md5_u64(s.name.as_bytes()))
            .collect();
        Rendezvous { seeds }
    }
}

impl Placement for Rendezvous {
    fn name(&self) -> String {
        "rendezvous (HRW)".into()
    }
    fn locate(&self, key: &KeyHash<'_>) -> usize {
        let mut best = (0u64, 0usize);
        for (i, &seed) in self.seeds.iter().enumerate() {
            // splitmix64 of the xor is a cheap, well-mixed per-(key, node) score.
            let score = splitmix64(key.h64 ^ seed);
            if score > best.0 || i == 0 {
                best = (score, i);
            }
        }
        best.1
    }
    fn nodes(&self) -> usize {
        self.seeds.len()
    }
    fn metadata_bytes(&self) -> usize {
        self.seeds.len() * std::mem::size_of::<u64>()
    }
    fn joined(&self) -> Box<dyn Placement> {
        Box::new(Rendezvous::new(self.seeds.len() + 1))
    }
    fn left(&self) -> Box<dyn Placement> {
        Box::new(Rendezvous::new(self.seeds.len() - 1))
    }
}

/// Jump consistent hash (Lamping & Veach 2014): no state, but nodes can only
/// be added or removed at the end of the numbering.
struct Jump {
    n: usize,
}

/// The jump consistent hash of `key` over `buckets` buckets.
pub(crate) fn jump_hash(mut key: u64, buckets: u32) -> u32 {
    let (mut b, mut j) = (-1i64, 0i64);
    while j < i64::from(buckets) {
        b = j;
        key = key.wrapping_mul(2862933555777941757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as u32
}

impl Placement for Jump {
    fn name(&self) -> String {
        "jump consistent hash".into()
    }
    fn locate(&self, key: &KeyHash<'_>) -> usize {
        jump_hash(key.h64, self.n as u32) as usize
    }
    fn nodes(&self) -> usize {
        self.n
    }
    fn metadata_bytes(&self) -> usize {
        0
    }
    fn joined(&self) -> Box<dyn Placement> {
        Box::new(Jump { n: self.n + 1 })
    }
    fn left(&self) -> Box<dyn Placement> {
        Box::new(Jump { n: self.n - 1 })
    }
}

/// How a slot table maps a key to a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotHash {
    /// Redis Cluster: CRC16-XMODEM of the tagged key, mod 16384.
    Crc16,
    /// MD5 mod 64: a small table an operator can read.
    Md5Mod64,
}

impl SlotHash {
    fn slots(self) -> usize {
        match self {
            SlotHash::Crc16 => 16384,
            SlotHash::Md5Mod64 => 64,
        }
    }
}

/// A fixed number of slots with an explicit owner table. Starts with even
/// contiguous ranges (like `redis-cli --cluster create`); a join takes slots
/// from the fullest nodes until the newcomer has its share, a leave deals the
/// leaver's slots to the emptiest nodes, so only those slots move.
struct Slots {
    hash: SlotHash,
    owner: Vec<u16>,
    n: usize,
}

impl Slots {
    fn even(n: usize, hash: SlotHash) -> Slots {
        let s = hash.slots();
        let owner = (0..s).map(|slot| (slot * n / s) as u16).collect();
        Slots { hash, owner, n }
    }

    fn counts(&self, n: usize) -> Vec<usize> {
        let mut c = vec![0; n];
        for &o in &self.owner {
            c[o as usize] += 1;
        }
        c
    }
}

impl Placement for Slots {
    fn name(&self) -> String {
        match self.hash {
            SlotHash::Crc16 => "slots 16384 (crc16)".into(),
            SlotHash::Md5Mod64 => "slots 64 (md5, table)".into(),
        }
    }
    fn locate(&self, key: &KeyHash<'_>) -> usize {
        let slot = match self.hash {
            SlotHash::Crc16 => usize::from(crc16(key.tagged)) & 16383,
            SlotHash::Md5Mod64 => (key.h64 % 64) as usize,
        };
        usize::from(self.owner[slot])
    }
    fn nodes(&self) -> usize {
        self.n
    }
    fn metadata_bytes(&self) -> usize {
        self.owner.len() * std::mem::size_of::<u16>()
    }
    fn joined(&self) -> Box<dyn Placement> {
        Box::new(self.join())
    }
    fn left(&self) -> Box<dyn Placement> {
        Box::new(self.leave())
    }
}

impl Slots {
    fn join(&self) -> Slots {
        let new = self.n;
        let mut owner = self.owner.clone();
        let mut counts = self.counts(new + 1);
        let target = owner.len() / (new + 1);
        while counts[new] < target {
            // Take from the node with most slots (lowest index on ties), its last slot.
            let donor = (0..new)
                .max_by_key(|&i| (counts[i], std::cmp::Reverse(i)))
                .expect("nodes");
            let slot = owner
                .iter()
                .rposition(|&o| usize::from(o) == donor)
                .expect("donor owns a slot");
            owner[slot] = new as u16;
            counts[donor] -= 1;
            counts[new] += 1;
        }
        Slots {
            hash: self.hash,
            owner,
            n: new + 1,
        }
    }

    fn leave(&self) -> Slots {
        let gone = self.n - 1;
        let mut owner = self.owner.clone();
        let mut counts = self.counts(self.n);
        for o in owner.iter_mut().filter(|o| usize::from(**o) == gone) {
            let heir = (0..gone)
                .min_by_key(|&i| (counts[i], i))
                .expect("a node remains");
            *o = heir as u16;
            counts[heir] += 1;
        }
        Slots {
            hash: self.hash,
            owner,
            n: gone,
        }
    }
}

/// CRC16-CCITT (XMODEM: poly 0x1021, init 0), the Redis Cluster key-slot CRC.
pub(crate) fn crc16(data: &[u8]) -> u16 {
    static TABLE: std::sync::OnceLock<[u16; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u16; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut crc = (i as u16) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
            *e = crc;
        }
        t
    });
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ table[usize::from((crc >> 8) as u8 ^ b)]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_redis_cluster_spec() {
        // Redis Cluster spec: CRC16("123456789") = 0x31C3; Redis' own slot examples.
        let cases: &[(&[u8], u16)] = &[(b"123456789", 0x31C3), (b"", 0)];
        for (data, want) in cases {
            assert_eq!(crc16(data), *want);
        }
        assert_eq!(crc16(b"foo") & 16383, 12182); // CLUSTER KEYSLOT foo
        assert_eq!(crc16(b"bar") & 16383, 5061); // CLUSTER KEYSLOT bar
    }

    #[test]
    fn jump_hash_matches_reference_values() {
        // The test vectors shared by the Go ports of the paper's code.
        let cases = [
            (1u64, 1u32, 0u32),
            (42, 57, 43),
            (0xDEAD_10CC, 1, 0),
            (0xDEAD_10CC, 666, 361),
            (256, 1024, 520),
        ];
        for (key, buckets, want) in cases {
            assert_eq!(
                jump_hash(key, buckets),
                want,
                "key {key:#x} buckets {buckets}"
            );
        }
    }

    #[test]
    fn slot_tables_rebalance_with_minimal_moves() {
        for hash in [SlotHash::Crc16, SlotHash::Md5Mod64] {
            let total = hash.slots();
            let s = Slots::even(10, hash);
            let joined = s.join();
            let before = s.counts(11);
            let after = joined.counts(11);
            assert_eq!(after[10], total / 11, "{hash:?} newcomer gets its share");
            let moved_slots = (0..total)
                .filter(|&i| s.owner[i] != joined.owner[i])
                .count();
            assert_eq!(
                moved_slots,
                total / 11,
                "{hash:?} only the newcomer's slots move"
            );
            for i in 0..10 {
                assert!(
                    before[i] >= after[i],
                    "{hash:?} no slot moves between old nodes"
                );
            }
            let left = s.leave();
            let counts = left.counts(9);
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(
                max - min <= 1,
                "{hash:?} leave keeps slots even: {counts:?}"
            );
            let moved_slots = (0..total).filter(|&i| s.owner[i] != left.owner[i]).count();
            assert_eq!(
                moved_slots, before[9],
                "{hash:?} only the leaver's slots move"
            );
        }
    }

    #[test]
    fn every_strategy_grows_and_shrinks_by_one_node() {
        for p in all(10, 160) {
            assert_eq!(p.nodes(), 10, "{}", p.name());
            assert_eq!(p.joined().nodes(), 11, "{}", p.name());
            assert_eq!(p.left().nodes(), 9, "{}", p.name());
        }
    }
}
