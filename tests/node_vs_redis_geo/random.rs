//! Deterministic random GEO workloads for `node_vs_redis_geo.rs`: a few
//! thousand points (clustered, spread over the globe, at the poles and on
//! the antimeridian, some sharing one position), searches with every
//! option, and ties in distance cut by COUNT.

/// A small LCG, so every run sends the same requests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed
            .wrapping_mul(2862933555777941757)
            .wrapping_add(3037000493))
    }

    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }

    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() as f64 / (1u64 << 53) as f64) * (hi - lo)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        self.range(0.0, 1.0) < p
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const LAT: f64 = 85.05112878;

fn point(r: &mut Rng) -> (f64, f64) {
    let k = r.range(0.0, 1.0);
    if k < 0.1 {
        let lat = match r.below(4) {
            0 => LAT,
            1 => -LAT,
            2 => r.range(80.0, LAT),
            _ => r.range(-LAT, -80.0),
        };
        (r.range(-180.0, 180.0), lat)
    } else if k < 0.2 {
        let lon = match r.below(4) {
            0 => 180.0,
            1 => -180.0,
            2 => r.range(179.0, 180.0),
            _ => r.range(-180.0, -179.0),
        };
        (lon, r.range(-85.0, 85.0))
    } else if k < 0.5 {
        (r.range(12.0, 14.0), r.range(40.0, 42.0))
    } else {
        (r.range(-180.0, 180.0), r.range(-LAT, LAT))
    }
}

/// GEOADD requests for `n` points named `m0…` into `key`, in batches, with
/// a few members sharing one position.
pub fn points(r: &mut Rng, key: &str, n: usize) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for batch in 0..n.div_ceil(250) {
        let mut args = vec!["GEOADD".to_string(), key.to_string()];
        for i in batch * 250..((batch + 1) * 250).min(n) {
            let (lon, lat) = point(r);
            args.extend([format!("{lon:.8}"), format!("{lat:.8}"), format!("m{i}")]);
        }
        for d in 0..3 {
            args.extend(["13".into(), "41".into(), format!("dup{batch}_{d}")]);
        }
        out.push(args);
    }
    out
}

fn centre(r: &mut Rng) -> (f64, f64) {
    let k = r.range(0.0, 1.0);
    if k < 0.4 {
        (r.range(12.0, 14.0), r.range(40.0, 42.0))
    } else if k < 0.6 {
        let lon = [179.9, -179.9, 180.0, -180.0][r.below(4)];
        (lon, r.range(-80.0, 80.0))
    } else if k < 0.75 {
        let lat = [85.0, -85.0, 84.9, -84.9, 70.0, -70.0, 0.0][r.below(7)];
        (r.range(-180.0, 180.0), lat)
    } else {
        (r.range(-180.0, 180.0), r.range(-85.0, 85.0))
    }
}

/// The options part of a search: WITH*, a sort, COUNT [ANY], shuffled.
fn options(r: &mut Rng) -> Vec<String> {
    let mut words: Vec<Vec<String>> = Vec::new();
    for w in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
        if r.chance(0.5) {
            words.push(vec![w.into()]);
        }
    }
    if r.chance(0.6) {
        words.push(vec![r.pick(&["ASC", "DESC"]).into()]);
    }
    if r.chance(0.5) {
        let n = r.pick(&["1", "2", "3", "5", "10", "50", "200"]);
        words.push(vec!["COUNT".into(), n.into()]);
        if r.chance(0.3) {
            words.push(vec!["ANY".into()]);
        }
    }
    for i in (1..words.len()).rev() {
        words.swap(i, r.below(i + 1));
    }
    words.concat()
}

/// One random search over `key` (whose members are `m0…m{n-1}`): GEORADIUS,
/// GEORADIUSBYMEMBER, GEOSEARCH BYRADIUS or BYBOX, from a position or a
/// member, in any unit.
pub fn search(r: &mut Rng, key: &str, n: usize) -> Vec<String> {
    let (lon, lat) = centre(r);
    let unit = r.pick(&["m", "km", "ft", "mi"]);
    let per_km = match unit {
        "m" => 1000.0,
        "ft" => 3280.0,
        "mi" => 0.62,
        _ => 1.0,
    };
    let scale = [1.0, 10.0, 50.0, 200.0, 1000.0, 5000.0, 20000.0][r.below(7)];
    let radius = format!("{:.4}", r.range(0.0, scale) * per_km);
    let member = format!("m{}", r.below(n));
    let from = if r.chance(0.7) {
        vec![
            "FROMLONLAT".into(),
            format!("{lon:.6}"),
            format!("{lat:.6}"),
        ]
    } else {
        vec!["FROMMEMBER".to_string(), member.clone()]
    };
    let k = r.range(0.0, 1.0);
    let mut args: Vec<String> = if k < 0.3 {
        let name = if r.chance(0.5) {
            "GEORADIUS"
        } else {
            "GEORADIUS_RO"
        };
        let c = [format!("{lon:.6}"), format!("{lat:.6}")];
        [name.into(), key.into()].into_iter().chain(c).collect()
    } else if k < 0.45 {
        vec!["GEORADIUSBYMEMBER".into(), key.into(), member]
    } else if k < 0.7 {
        [
            vec!["GEOSEARCH".into(), key.into()],
            from,
            vec!["BYRADIUS".into()],
        ]
        .concat()
    } else {
        let w = format!(
            "{:.4}",
            radius.parse::<f64>().unwrap_or(1.0) * r.range(0.2, 2.0)
        );
        [
            vec!["GEOSEARCH".into(), key.into()],
            from,
            vec!["BYBOX".into(), w],
        ]
        .concat()
    };
    args.extend([radius, unit.to_string()]);
    args.extend(options(r));
    args
}

/// A random search turned into its storing form (GEOSEARCHSTORE, or
/// GEORADIUS[BYMEMBER] with STORE or STOREDIST) writing `dst`.
pub fn store_search(r: &mut Rng, key: &str, n: usize, dst: &str) -> Vec<String> {
    let mut args = search(r, key, n);
    args.retain(|a| !a.starts_with("WITH"));
    let dist = r.chance(0.5);
    if args[0] == "GEOSEARCH" {
        args[0] = "GEOSEARCHSTORE".into();
        args.insert(1, dst.into());
        if dist {
            args.push("STOREDIST".into());
        }
    } else {
        args[0] = args[0].trim_end_matches("_RO").to_string();
        args.extend([if dist { "STOREDIST" } else { "STORE" }.into(), dst.into()]);
    }
    args
}

/// Many members at three positions, and searches whose COUNT cuts through
/// the ties (Redis's partial quicksort decides their order).
pub fn ties() -> Vec<Vec<String>> {
    let mut add = vec!["GEOADD".to_string(), "same".into()];
    for (lon, prefix, n) in [("10", "p", 120), ("10.0001", "q", 60), ("9.9999", "r", 60)] {
        for i in 0..n {
            add.extend([lon.to_string(), "20".into(), format!("{prefix}{i:03}")]);
        }
    }
    let mut out = vec![add];
    for count in [1, 2, 3, 5, 7, 8, 13, 40, 41, 50, 100, 150, 239, 240, 241] {
        for sort in ["ASC", "DESC", ""] {
            let c = count.to_string();
            let mut a: Vec<String> = ["GEOSEARCH", "same", "FROMLONLAT", "10", "20"]
                .into_iter()
                .chain(["BYRADIUS", "100", "km", "COUNT", &c, sort])
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            out.push(a.clone());
            a[0] = "GEORADIUS".into();
            a.drain(2..3);
            a[2] = "10.00005".into();
            a.retain(|s| s != "BYRADIUS");
            a.push("WITHDIST".into());
            out.push(a);
        }
    }
    out.push(words(
        "GEOSEARCHSTORE dst same FROMLONLAT 10 20 BYRADIUS 100 km COUNT 7 DESC",
    ));
    out.push(words("ZRANGE dst 0 -1 WITHSCORES"));
    // Eight members, five at one spot: a first pass that moves nothing
    // must not fall back to a stable insertion sort.
    out.push(words(
        "GEOADD few 13 41 a 13 41 b 13 41 c 13 41 d 13 41 e 13.001 41 f 12.999 41 g 13 41.001 h",
    ));
    for count in ["3", "5", "7", "8"] {
        for centre in ["13", "13.0005"] {
            let q = format!(
                "GEOSEARCH few FROMLONLAT {centre} 41 BYRADIUS 10 km WITHDIST COUNT {count}"
            );
            out.push(words(&q));
            out.push(words(&format!("{q} DESC")));
        }
    }
    out
}

fn words(s: &str) -> Vec<String> {
    s.split(' ').map(String::from).collect()
}
