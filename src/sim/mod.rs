//! `shardis sim`: distribution science without storing data.
//!
//! Streams up to billions of synthetic keys through the ring (and, with
//! `--compare`, through other placement strategies) on every core, and reports
//! per-node load, imbalance, movement on join/leave, capacity projections,
//! vnode sweeps, hash avalanche and hot-key effects. Called by `main.rs` with
//! parsed [`SimArgs`]; writes the report to the given writer and progress to
//! stderr. Never touches the network or the disk except an optional SVG file.
//!
//! Sections: [`distribution`] (default), [`compare`], [`sweep`], [`avalanche`].

pub(crate) mod avalanche;
pub(crate) mod compare;
pub(crate) mod distribution;
pub(crate) mod hot_key;
pub(crate) mod keys;
pub(crate) mod strategies;
pub(crate) mod sweep;
pub(crate) mod table;

pub(crate) use keys::KeyKind;

use crate::ring::{PointScheme, DEFAULT_VNODES};
use std::io::Write;
use std::path::PathBuf;

/// Keys hashed by the avalanche check (each has ~60-120 bits to flip).
pub(crate) const AVALANCHE_KEYS: u64 = 20_000;

/// Assumed per-entry memory overhead (hash-table slot, key/value headers,
/// allocator rounding) added to key and value bytes when projecting node sizes.
pub(crate) const DEFAULT_ENTRY_OVERHEAD: u64 = 64;

/// Arguments of `shardis sim` (usable without clap: see [`Default`]).
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct SimArgs {
    /// Number of synthetic keys (accepts 1000000, 1_000_000, 1e9, 10^9).
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    pub keys: u64,
    /// Number of nodes.
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,
    /// Points per node (ketama) or per unit of weight (vnode).
    #[arg(long, default_value_t = DEFAULT_VNODES)]
    pub vnodes: u32,
    /// Point scheme: ketama (twemproxy-compatible) or vnode.
    #[arg(long, default_value = "ketama")]
    pub points: PointScheme,
    /// Node weights, comma-separated, in node order (missing ones are 1).
    #[arg(long, value_delimiter = ',')]
    pub weights: Vec<u32>,
    /// Nodes to add: report the fraction of keys that move and where from.
    #[arg(long, default_value_t = 0)]
    pub add: usize,
    /// Nodes to remove (the last ones): report the fraction that moves and where to.
    #[arg(long, default_value_t = 0)]
    pub remove: usize,
    /// Key shape: user (`user:<n>`) or random (seeded bytes).
    #[arg(long, value_enum, default_value = "user")]
    pub key_kind: KeyKind,
    /// Seed for random keys.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads (0 = every core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Draw the progress bar even when stderr is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// Value size in bytes for capacity projection (accepts 1KiB, 1024, 1KB).
    #[arg(long, default_value = "1024", value_parser = parse_size)]
    pub value_size: u64,
    /// Assumed memory overhead per entry in bytes, on top of key and value.
    #[arg(long, default_value_t = DEFAULT_ENTRY_OVERHEAD)]
    pub entry_overhead: u64,
    /// Memory per node for the capacity check (100GB = 10^11 bytes, 100GiB = 100·2^30).
    #[arg(long, default_value = "100GB", value_parser = parse_size)]
    pub node_capacity: u64,
    /// Project node sizes for this many keys (default: --keys) from the measured shares.
    #[arg(long, value_parser = parse_count)]
    pub project_keys: Option<u64>,
    /// Compare placement strategies on the same keys.
    #[arg(long)]
    pub compare: bool,
    /// Imbalance vs vnode count, e.g. 1,10,40,100,160,500,1000.
    #[arg(long, value_delimiter = ',')]
    pub vnodes_sweep: Vec<u32>,
    /// Write the vnode sweep chart to this SVG file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Print the hash avalanche check.
    #[arg(long)]
    pub avalanche: bool,
    /// One hot key takes this fraction of all requests (e.g. 0.4).
    #[arg(long)]
    pub hot_key_share: Option<f64>,
    /// Machine-readable JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

impl Default for SimArgs {
    fn default() -> Self {
        SimArgs {
            keys: 1_000_000,
            nodes: 10,
            vnodes: DEFAULT_VNODES,
            points: PointScheme::Ketama,
            weights: Vec::new(),
            add: 0,
            remove: 0,
            key_kind: KeyKind::User,
            seed: 1,
            threads: 0,
            progress: false,
            value_size: 1024,
            entry_overhead: DEFAULT_ENTRY_OVERHEAD,
            node_capacity: 100_000_000_000,
            project_keys: None,
            compare: false,
            vnodes_sweep: Vec::new(),
            svg: None,
            avalanche: false,
            hot_key_share: None,
            json: false,
        }
    }
}

/// Runs the simulation `args` asks for and writes the report to `out`.
///
/// The distribution report runs unless `--compare`, `--vnodes-sweep` or
/// `--avalanche` pick other sections (they may be combined).
pub fn run(args: &SimArgs, out: &mut dyn Write) -> Result<(), String> {
    validate(args)?;
    let only_extras = args.compare || !args.vnodes_sweep.is_empty() || args.avalanche;
    let mut json = serde_json::Map::new();
    let io = |e: std::io::Error| format!("writing report: {e}");

    if !only_extras {
        let report = distribution::run(args)?;
        if args.json {
            json.insert("distribution".into(), to_json(&report)?);
        } else {
            distribution::write(&report, out).map_err(io)?;
        }
    }
    if args.compare {
        let report = compare::run(args)?;
        if args.json {
            json.insert("compare".into(), to_json(&report)?);
        } else {
            compare::write(&report, out).map_err(io)?;
        }
    }
    if !args.vnodes_sweep.is_empty() {
        let report = sweep::run(args)?;
        if let Some(path) = &args.svg {
            std::fs::write(path, sweep::svg(&report))
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        if args.json {
            json.insert("vnodes_sweep".into(), to_json(&report)?);
        } else {
            sweep::write(&report, out).map_err(io)?;
            if let Some(path) = &args.svg {
                writeln!(out, "  chart written to {}", path.display()).map_err(io)?;
            }
        }
    }
    if args.avalanche {
        let rows = avalanche::measure(AVALANCHE_KEYS);
        if args.json {
            json.insert("avalanche".into(), to_json(&rows)?);
        } else {
            avalanche::write(&rows, AVALANCHE_KEYS, out).map_err(io)?;
        }
    }
    if args.json {
        let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
        writeln!(out, "{text}").map_err(io)?;
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<serde_json::Value, String> {
    serde_json::to_value(v).map_err(|e| format!("encoding report: {e}"))
}

fn validate(args: &SimArgs) -> Result<(), String> {
    if args.nodes == 0 {
        return Err("--nodes must be at least 1".into());
    }
    if args.nodes > 100_000 {
        return Err("--nodes above 100000 is not a useful simulation".into());
    }
    if args.keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    if args.remove >= args.nodes {
        return Err(format!(
            "--remove {} would leave no node out of {}",
            args.remove, args.nodes
        ));
    }
    if args.weights.len() > args.nodes {
        return Err(format!(
            "{} weights given for {} nodes",
            args.weights.len(),
            args.nodes
        ));
    }
    if let Some(s) = args.hot_key_share {
        if !(0.0..=1.0).contains(&s) {
            return Err(format!("--hot-key-share {s} must be between 0 and 1"));
        }
    }
    if args.svg.is_some() && args.vnodes_sweep.is_empty() {
        return Err("--svg draws the --vnodes-sweep chart; give --vnodes-sweep too".into());
    }
    Ok(())
}

/// Parses a count: `1000000`, `1_000_000`, `1e9`, `10^9`.
pub(crate) fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().replace('_', "");
    let bad = || format!("'{s}' is not a count (try 1000000, 1e9 or 10^9)");
    if let Some((m, e)) = t.split_once(['e', 'E']) {
        let m: u64 = m.parse().map_err(|_| bad())?;
        let e: u32 = e.parse().map_err(|_| bad())?;
        return 10u64
            .checked_pow(e)
            .and_then(|p| p.checked_mul(m))
            .ok_or_else(bad);
    }
    if let Some((b, e)) = t.split_once('^') {
        let b: u64 = b.parse().map_err(|_| bad())?;
        let e: u32 = e.parse().map_err(|_| bad())?;
        return b.checked_pow(e).ok_or_else(bad);
    }
    t.parse().map_err(|_| bad())
}

/// Parses a byte size: `1024`, `1KB` (10^3), `1KiB` (2^10), up to TB/TiB.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (try 1024, 1KiB, 100GB)"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{s}' (B, KB, MB, GB, TB, KiB … TiB)"
            ))
        }
    };
    Ok((num * mult).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    #[test]
    fn clap_defaults_equal_default_impl() {
        assert_eq!(Cli::parse_from(["sim"]).sim, SimArgs::default());
    }

    #[test]
    fn flags_parse() {
        let a = Cli::parse_from([
            "sim",
            "--keys",
            "1e9",
            "--points",
            "vnode",
            "--weights",
            "1,1,2",
            "--add",
            "1",
            "--key-kind",
            "random",
            "--node-capacity",
            "128GiB",
            "--vnodes-sweep",
            "1,10",
        ])
        .sim;
        assert_eq!(a.keys, 1_000_000_000);
        assert_eq!(a.points, PointScheme::Vnode);
        assert_eq!(a.weights, vec![1, 1, 2]);
        assert_eq!(a.add, 1);
        assert_eq!(a.key_kind, KeyKind::Random);
        assert_eq!(a.node_capacity, 128 << 30);
        assert_eq!(a.vnodes_sweep, vec![1, 10]);
    }

    #[test]
    fn counts_and_sizes_parse() {
        let counts: &[(&str, Option<u64>)] = &[
            ("1000", Some(1000)),
            ("1_000_000", Some(1_000_000)),
            ("1e9", Some(1_000_000_000)),
            ("10^9", Some(1_000_000_000)),
            ("2e3", Some(2000)),
            ("1e30", None),
            ("x", None),
        ];
        for (s, want) in counts {
            assert_eq!(parse_count(s).ok(), *want, "{s}");
        }
        let sizes: &[(&str, Option<u64>)] = &[
            ("1024", Some(1024)),
            ("1KB", Some(1000)),
            ("1KiB", Some(1024)),
            ("100GB", Some(100_000_000_000)),
            ("1.5TB", Some(1_500_000_000_000)),
            ("1 GiB", Some(1 << 30)),
            ("1XB", None),
        ];
        for (s, want) in sizes {
            assert_eq!(parse_size(s).ok(), *want, "{s}");
        }
    }

    #[test]
    fn bad_arguments_are_refused_with_a_reason() {
        let cases = [
            SimArgs {
                nodes: 0,
                ..SimArgs::default()
            },
            SimArgs {
                keys: 0,
                ..SimArgs::default()
            },
            SimArgs {
                remove: 10,
                ..SimArgs::default()
            },
            SimArgs {
                weights: vec![1; 11],
                ..SimArgs::default()
            },
            SimArgs {
                hot_key_share: Some(1.5),
                ..SimArgs::default()
            },
            SimArgs {
                svg: Some("x.svg".into()),
                ..SimArgs::default()
            },
        ];
        for args in cases {
            let err = run(&args, &mut Vec::new()).unwrap_err();
            assert!(!err.is_empty());
        }
    }
}
