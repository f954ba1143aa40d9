//! Hash avalanche check: flip each input bit of many keys and count how many
//! output bits of the key hash flip. A good placement hash flips each output
//! bit with probability 1/2 whatever input bit changed; a biased bit means
//! similar keys cluster on the ring.
//!
//! Run by `shardis sim --avalanche` and as part of `--compare`. Single-threaded
//! (a few million hashes).

use super::keys::{KeyGen, KeyKind, MAX_KEY_LEN};
use super::table::{pct, Table};
use crate::ring::{md5_u32, md5_u64};
use serde::Serialize;
use std::io::Write;

/// Avalanche statistics of one hash function.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Avalanche {
    /// Hash function and where shardis uses it.
    pub hash: String,
    /// Output width in bits.
    pub bits: u32,
    /// Hashes compared (one per flipped input bit).
    pub trials: u64,
    /// Mean fraction of output bits flipped (ideal 0.5).
    pub mean: f64,
    /// Largest |P(output bit flips) − 0.5| over output bits.
    pub worst_output_bit_bias: f64,
    /// Largest |P(output bit o flips when input bit i flips) − 0.5| over all
    /// (i, o) pairs (the strict avalanche criterion); sampling noise alone is
    /// about 4.5/(2·√keys).
    pub worst_pair_bias: f64,
}

type HashFn = fn(&[u8]) -> u64;

/// The hashes checked: shardis' two key hashes, plus CRC16 (Redis Cluster slots)
/// and FNV-1a (a common cheap alternative) for contrast.
fn hashes() -> Vec<(&'static str, u32, HashFn)> {
    vec![
        ("md5 → u32 (ketama key hash)", 32, |k| {
            u64::from(md5_u32(k))
        }),
        ("md5 → u64 (vnode key hash)", 64, md5_u64),
        ("crc16 (redis cluster slot)", 16, |k| {
            u64::from(super::strategies::crc16(k))
        }),
        ("fnv1a-32 (contrast)", 32, |k| u64::from(fnv1a32(k))),
    ]
}

fn fnv1a32(data: &[u8]) -> u32 {
    data.iter().fold(0x811C_9DC5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Flips every bit of `keys` keys `user:0…` and measures every hash.
pub(crate) fn measure(keys: u64) -> Vec<Avalanche> {
    let gen = KeyGen::new(KeyKind::User, 0);
    let mut buf = [0u8; MAX_KEY_LEN];
    hashes()
        .into_iter()
        .map(|(name, bits, f)| {
            let mut out_flips = vec![0u64; bits as usize];
            // pair[i][o]: times output bit o flipped when input bit i flipped.
            let mut pair = vec![vec![0u64; bits as usize]; MAX_KEY_LEN * 8];
            let mut in_trials = vec![0u64; MAX_KEY_LEN * 8];
            let mut trials = 0u64;
            let mut flipped = 0u64;
            for i in 0..keys {
                let key = gen.key(i, &mut buf);
                let mut k = [0u8; MAX_KEY_LEN];
                let len = key.len();
                k[..len].copy_from_slice(key);
                let h = f(&k[..len]);
                for bit in 0..len * 8 {
                    k[bit / 8] ^= 1 << (bit % 8);
                    let d = h ^ f(&k[..len]);
                    k[bit / 8] ^= 1 << (bit % 8);
                    let ones = u64::from(d.count_ones());
                    flipped += ones;
                    trials += 1;
                    in_trials[bit] += 1;
                    for (o, c) in out_flips.iter_mut().enumerate() {
                        let flip = (d >> o) & 1;
                        *c += flip;
                        pair[bit][o] += flip;
                    }
                }
            }
            let worst_out = out_flips
                .iter()
                .map(|&c| (c as f64 / trials as f64 - 0.5).abs())
                .fold(0.0, f64::max);
            let worst_pair = pair
                .iter()
                .zip(&in_trials)
                // Positions most keys have; the longest keys' last digits are rare.
                .filter(|&(_, &n)| n * 2 >= keys)
                .flat_map(|(row, &n)| row.iter().map(move |&c| (c as f64 / n as f64 - 0.5).abs()))
                .fold(0.0, f64::max);
            Avalanche {
                hash: name.to_string(),
                bits,
                trials,
                mean: flipped as f64 / (trials * u64::from(bits)) as f64,
                worst_output_bit_bias: worst_out,
                worst_pair_bias: worst_pair,
            }
        })
        .collect()
}

/// Writes the avalanche table.
pub(crate) fn write(rows: &[Avalanche], keys: u64, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "Hash avalanche ({keys} keys user:0…, every input bit flipped once; ideal: 50% of output bits flip, bias 0)")?;
    let mut t = Table::new(&[
        "hash",
        "bits",
        "trials",
        "mean flipped",
        "worst output-bit bias",
        "worst (in,out)-bit bias",
    ]);
    for r in rows {
        t.row(vec![
            r.hash.clone(),
            r.bits.to_string(),
            r.trials.to_string(),
            pct(r.mean),
            pct(r.worst_output_bit_bias),
            pct(r.worst_pair_bias),
        ]);
    }
    t.write(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_avalanches_and_crc16_does_not() {
        let rows = measure(300);
        for r in &rows {
            println!("{r:?}");
        }
        for r in rows.iter().filter(|r| r.hash.starts_with("md5")) {
            assert!((r.mean - 0.5).abs() < 0.01, "{r:?}");
            assert!(r.worst_output_bit_bias < 0.05, "{r:?}");
        }
        // CRC is linear: one input bit flips a fixed output pattern, so some
        // output bits flip far from half the time.
        let crc = rows.iter().find(|r| r.hash.starts_with("crc16")).unwrap();
        assert!(crc.worst_pair_bias > 0.3, "{crc:?}");
    }
}
