//! Ring tests: twemproxy compatibility, hash tags, determinism, movement on
//! join/leave, balance and weights, for both point schemes.

use super::*;
use std::io::Write as _;

const SCHEMES: [PointScheme; 2] = [PointScheme::Ketama, PointScheme::Vnode];

/// Keys used by the statistical tests. The acceptance numbers are defined at
/// 1 000 000 keys; MD5 of short keys keeps that well under 10 s in debug.
const STAT_KEYS: u64 = 1_000_000;

fn spec(name: &str, weight: u32) -> NodeSpec {
    NodeSpec {
        name: name.to_string(),
        addr: String::new(),
        weight,
    }
}

/// `node1..=nodeN`, weight 1, addresses 127.0.0.1:7001…
fn named_nodes(n: usize) -> Vec<NodeSpec> {
    (1..=n)
        .map(|i| NodeSpec {
            name: format!("node{i}"),
            addr: format!("127.0.0.1:{}", 7000 + i),
            weight: 1,
        })
        .collect()
}

fn ring(nodes: Vec<NodeSpec>, scheme: PointScheme) -> Ring {
    Ring::new(
        nodes,
        RingConfig {
            scheme,
            vnodes: DEFAULT_VNODES,
        },
        1,
    )
    .expect("valid ring")
}

/// Calls `f` with `key:0`, `key:1`, … from one reused buffer.
fn for_each_key(n: u64, mut f: impl FnMut(&[u8])) {
    let mut buf = Vec::with_capacity(32);
    for i in 0..n {
        buf.clear();
        let _ = write!(buf, "key:{i}");
        f(&buf);
    }
}

/// Decodes the TSV key escaping: `\xHH` for any byte outside 0x21..=0x7e and
/// for `\` and `#`; everything else is literal.
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 4 <= b.len() {
            let hex = std::str::from_utf8(&b[i + 2..i + 4]).expect("ascii hex");
            out.push(u8::from_str_radix(hex, 16).expect("hex escape"));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn ketama_agrees_with_real_twemproxy_on_every_sampled_key() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/twemproxy-ketama-md5-named.tsv"
    );
    let Ok(text) = std::fs::read_to_string(path) else {
        println!(
            "skipped: {path} not found (the twemproxy placement sample lives outside the repo)"
        );
        return;
    };
    let r = ring(named_nodes(10), PointScheme::Ketama);
    let (mut checked, mut wrong) = (0, Vec::new());
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        // The first data line has an empty key, so the line starts with the tab.
        let (key, want) = line.split_once('\t').expect("key<TAB>node");
        let key = unescape(key);
        let got = &r.node(r.locate(&key)).name;
        if got != want {
            wrong.push((line.to_string(), got.clone()));
        }
        checked += 1;
    }
    assert_eq!(checked, 2000, "sample size");
    assert!(
        wrong.is_empty(),
        "{} of {checked} keys differ, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

#[test]
fn unescape_decodes_the_sample_escapes() {
    let cases: &[(&str, &[u8])] = &[
        ("", b""),
        ("tp:key:9", b"tp:key:9"),
        ("cl\\xc3\\xa9", "clé".as_bytes()),
        ("\\x5c\\x23\\x20", b"\\# "),
    ];
    for (s, want) in cases {
        assert_eq!(unescape(s), *want, "{s}");
    }
}

#[test]
fn hash_tags_pin_related_keys_to_one_node() {
    for scheme in SCHEMES {
        let r = ring(named_nodes(10), scheme);
        // (key, the bytes it must hash like)
        let cases: &[(&[u8], &[u8])] = &[
            (b"{user1000}.following", b"user1000"),
            (b"{user1000}.followers", b"user1000"),
            (b"foo{}{bar}", b"foo{}{bar}"),
            (b"foo{{bar}}", b"{bar"),
            (b"foo{bar}{zap}", b"bar"),
            (b"plain", b"plain"),
        ];
        // twemproxy sends the empty key to hash 0 (see `scheme_key_hash`).
        if scheme == PointScheme::Ketama {
            assert_eq!(r.key_hash(b""), 0);
        }
        for (key, like) in cases {
            assert_eq!(
                r.key_hash(key),
                scheme_key_hash(scheme, like),
                "{scheme} {key:?}"
            );
            let direct = match scheme {
                PointScheme::Ketama => u64::from(md5_u32(like)),
                PointScheme::Vnode => md5_u64(like),
            };
            assert_eq!(r.key_hash(key), direct);
            assert_eq!(r.locate(key), r.locate_hash(direct));
        }
        assert_eq!(
            r.locate(b"{user1000}.following"),
            r.locate(b"{user1000}.followers")
        );
    }
}

#[test]
fn same_key_same_node_across_separately_built_rings_and_node_orders() {
    for scheme in SCHEMES {
        let a = ring(named_nodes(10), scheme);
        let b = ring(named_nodes(10), scheme);
        let mut reversed = named_nodes(10);
        reversed.reverse();
        let c = ring(reversed, scheme);
        for_each_key(20_000, |key| {
            let owner = &a.node(a.locate(key)).name;
            assert_eq!(owner, &a.node(a.locate(key)).name);
            assert_eq!(owner, &b.node(b.locate(key)).name);
            assert_eq!(owner, &c.node(c.locate(key)).name);
        });
    }
}

/// One pass over the keys: owners on 10 nodes, on 10 + node11, on 10 − node10.
struct Movement {
    per_node: Vec<u64>,
    moved_join: u64,
    moved_leave: u64,
    join_sources: Vec<u64>,
}

fn measure_movement(scheme: PointScheme, keys: u64) -> Movement {
    let base = ring(named_nodes(10), scheme);
    let join = base.with_nodes(named_nodes(11)).expect("join ring");
    let leave = base.with_nodes(named_nodes(9)).expect("leave ring");
    assert_eq!(join.epoch(), base.epoch() + 1);
    let mut m = Movement {
        per_node: vec![0; 10],
        moved_join: 0,
        moved_leave: 0,
        join_sources: vec![0; 10],
    };
    for_each_key(keys, |key| {
        // Same scheme on all three rings: hash once. Node lists share a prefix,
        // so equal index means equal node.
        let h = base.key_hash(key);
        let owner = base.locate_hash(h);
        m.per_node[owner] += 1;
        if join.locate_hash(h) != owner {
            m.moved_join += 1;
            m.join_sources[owner] += 1;
        }
        if leave.locate_hash(h) != owner {
            m.moved_leave += 1;
        }
    });
    m
}

#[test]
fn join_and_leave_move_about_one_nth_and_load_stays_balanced() {
    for scheme in SCHEMES {
        let m = measure_movement(scheme, STAT_KEYS);
        let keys = STAT_KEYS as f64;
        let join = m.moved_join as f64 / keys;
        let leave = m.moved_leave as f64 / keys;
        let avg = keys / 10.0;
        let max = *m.per_node.iter().max().unwrap() as f64;
        let min = *m.per_node.iter().min().unwrap() as f64;
        println!(
            "{scheme}: {STAT_KEYS} keys, 10→11 moved {:.3}% (ideal {:.3}%), 10→9 moved {:.3}% (ideal {:.3}%), max/avg {:.4}, min/avg {:.4}",
            join * 100.0,
            100.0 / 11.0,
            leave * 100.0,
            100.0 / 10.0,
            max / avg,
            min / avg
        );
        assert!(join <= 1.0 / 11.0 + 0.02, "{scheme} join moved {join}");
        assert!(leave <= 1.0 / 10.0 + 0.02, "{scheme} leave moved {leave}");
        // A leave moves exactly the leaving node's keys, nothing else.
        assert_eq!(m.moved_leave, m.per_node[9], "{scheme}");
        assert!(max / avg < 1.5, "{scheme} imbalance {}", max / avg);
        // A joining node takes from every old node, not from one neighbour.
        assert!(
            m.join_sources.iter().all(|&c| c > 0),
            "{scheme} sources {:?}",
            m.join_sources
        );
    }
}

#[test]
fn weight_two_owns_about_twice_the_keys() {
    for scheme in SCHEMES {
        let mut nodes = named_nodes(10);
        nodes[3].weight = 2;
        let r = ring(nodes, scheme);
        let mut count = [0u64; 10];
        for_each_key(200_000, |key| count[r.locate(key)] += 1);
        let others: f64 = (0..10)
            .filter(|&i| i != 3)
            .map(|i| count[i] as f64)
            .sum::<f64>()
            / 9.0;
        let ratio = count[3] as f64 / others;
        let share_ratio = r.share_of(3) / ((1.0 - r.share_of(3)) / 9.0);
        println!("{scheme}: weight-2 node owns {ratio:.3}× the keys of a weight-1 node (hash space {share_ratio:.3}×)");
        assert!((1.6..2.4).contains(&ratio), "{scheme} ratio {ratio}");
        assert!(
            (1.6..2.4).contains(&share_ratio),
            "{scheme} share ratio {share_ratio}"
        );
        assert!(r.points_of(3) > r.points_of(0));
    }
}

#[test]
fn shares_sum_to_one_and_points_are_counted() {
    let cases: &[(PointScheme, &[u32], &[usize])] = &[
        (PointScheme::Ketama, &[1, 1, 1], &[160, 160, 160]),
        (PointScheme::Ketama, &[1, 1, 2], &[120, 120, 240]),
        (PointScheme::Vnode, &[1, 1, 2], &[160, 160, 320]),
        (PointScheme::Vnode, &[1], &[160]),
    ];
    for (scheme, weights, want_points) in cases {
        let nodes = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| spec(&format!("n{i}"), w))
            .collect();
        let r = ring(nodes, *scheme);
        let points: Vec<usize> = (0..weights.len()).map(|i| r.points_of(i)).collect();
        assert_eq!(&points, want_points, "{scheme} {weights:?}");
        assert_eq!(r.total_points(), want_points.iter().sum::<usize>());
        let total: f64 = (0..weights.len()).map(|i| r.share_of(i)).sum();
        assert!(
            (total - 1.0).abs() < 1e-9,
            "{scheme} {weights:?} shares sum {total}"
        );
    }
}

#[test]
fn lookup_takes_first_point_at_or_after_hash_and_wraps() {
    for scheme in SCHEMES {
        let r = ring(named_nodes(3), scheme);
        let first = r.points[0];
        let last = *r.points.last().unwrap();
        let cases = [
            (0, r.owners[0]),
            (first, r.owners[0]),
            (first + 1, r.owners[1]),
            (r.points[1], r.owners[1]),
            (last, *r.owners.last().unwrap()),
            (last + 1, r.owners[0]),
            (u64::MAX, r.owners[0]),
        ];
        for (hash, owner) in cases {
            assert_eq!(r.locate_hash(hash), owner as usize, "{scheme} hash {hash}");
        }
    }
}

#[test]
fn invalid_node_lists_are_refused() {
    let ok = RingConfig::default();
    let with_addr = |name: &str, addr: &str| NodeSpec {
        name: name.into(),
        addr: addr.into(),
        weight: 1,
    };
    let cases: Vec<(Vec<NodeSpec>, RingConfig, RingError)> = vec![
        (vec![], ok, RingError::NoNodes),
        (vec![spec("a", 0)], ok, RingError::ZeroWeight("a".into())),
        (
            vec![spec("a", 1), spec("a", 2)],
            ok,
            RingError::DuplicateName("a".into()),
        ),
        (
            vec![with_addr("a", "127.0.0.1:1"), with_addr("b", "127.0.0.1:1")],
            ok,
            RingError::DuplicateAddr("127.0.0.1:1".into()),
        ),
        (vec![spec("", 1)], ok, RingError::EmptyName),
        (
            vec![spec("a", 1)],
            RingConfig { vnodes: 0, ..ok },
            RingError::ZeroVnodes,
        ),
        (
            vec![spec("a", 1), spec("b", 1000)],
            ok,
            RingError::NoPoints("a".into()),
        ),
        (
            vec![spec("a", 1), spec("b", 1)],
            RingConfig {
                scheme: PointScheme::Vnode,
                vnodes: 6_000_000,
            },
            RingError::TooManyPoints,
        ),
        (
            vec![spec("a", u32::MAX)],
            RingConfig {
                scheme: PointScheme::Vnode,
                vnodes: u32::MAX,
            },
            RingError::TooManyPoints,
        ),
    ];
    for (nodes, config, want) in cases {
        let got = Ring::new(nodes.clone(), config, 0).map(|_| ()).unwrap_err();
        assert_eq!(got, want, "{nodes:?}");
        assert!(!got.to_string().is_empty());
    }
}

#[test]
fn nodes_are_found_by_name_or_address() {
    let r = ring(named_nodes(3), PointScheme::Ketama);
    let cases = [
        ("node2", Some(1)),
        ("127.0.0.1:7003", Some(2)),
        ("node4", None),
        ("", None),
    ];
    for (q, want) in cases {
        assert_eq!(r.index_of(q), want, "{q}");
    }
    assert_eq!(r.nodes().len(), 3);
    assert_eq!(r.node(0).name, "node1");
    assert_eq!(r.config(), RingConfig::default());
}

#[test]
fn schemes_parse_and_print() {
    let cases = [
        ("ketama", Some(PointScheme::Ketama)),
        ("VNODE", Some(PointScheme::Vnode)),
        ("modula", None),
    ];
    for (s, want) in cases {
        assert_eq!(s.parse::<PointScheme>().ok(), want, "{s}");
        if let Some(p) = want {
            assert_eq!(p.to_string(), s.to_ascii_lowercase());
        }
    }
}

#[test]
fn ring_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Ring>();
}

/// The bucket index finds exactly what a search over the whole ring finds.
#[test]
fn bucket_index_agrees_with_a_full_search() {
    for scheme in [PointScheme::Ketama, PointScheme::Vnode] {
        for n in [1, 3, 10, 100] {
            let r = ring(named_nodes(n), scheme);
            let full = |hash: u64| {
                let i = r.points.partition_point(|&p| p < hash);
                r.owners[if i == r.points.len() { 0 } else { i }] as usize
            };
            let mut probes: Vec<u64> = vec![0, 1, u32::MAX as u64, u32::MAX as u64 + 1, u64::MAX];
            for &p in r.points.iter().step_by(7) {
                probes.extend([p.saturating_sub(1), p, p.saturating_add(1)]);
            }
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                probes.push(match scheme {
                    PointScheme::Ketama => x >> 32,
                    PointScheme::Vnode => x,
                });
            }
            for h in probes {
                assert_eq!(r.locate_hash(h), full(h), "{scheme:?} n={n} hash={h}");
            }
        }
    }
}
