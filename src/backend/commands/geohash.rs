//! The geohash arithmetic behind the GEO commands, as Redis 7.0 does it:
//! coordinates interleaved into a 52-bit sorted-set score (26 bits of
//! latitude in the even positions, 26 of longitude in the odd ones, over
//! WGS84's Web Mercator ranges), the nine cells that cover a search area,
//! haversine distances on a sphere of 6372797.560856 m, and the text forms
//! of distances and coordinates.
//!
//! Pure and allocation-free: `geo.rs` calls it; it never touches the store.
//! Every float operation keeps Redis's order, so results agree to the last
//! digit (the trigonometry is the platform's libm in both).

/// Longitude range.
pub(crate) const LONG_MIN: f64 = -180.0;
/// Longitude range.
pub(crate) const LONG_MAX: f64 = 180.0;
/// Latitude range (the Web Mercator limits: no cell at the poles).
pub(crate) const LAT_MIN: f64 = -85.05112878;
/// Latitude range.
pub(crate) const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate in a stored score.
pub(crate) const STEP_MAX: u8 = 26;
/// The sphere distances are measured on (WGS84 quadratic mean radius).
const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Where the radius doubling of [`estimate_steps`] stops.
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// A cell: its interleaved bits and how many bits per coordinate. The
/// all-zero cell (`step` 0) stands for "no cell".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Cell {
    /// Interleaved latitude (even) and longitude (odd) bits.
    pub(crate) bits: u64,
    /// Bits per coordinate, 1..=32.
    pub(crate) step: u8,
}

impl Cell {
    /// Whether this stands for no cell (an excluded neighbour).
    pub(crate) fn is_none(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The score range `[min, max)` of the members inside this cell.
    pub(crate) fn score_range(&self) -> (f64, f64) {
        let shift = 52 - 2 * self.step as u32;
        (
            (self.bits << shift) as f64,
            ((self.bits + 1) << shift) as f64,
        )
    }
}

/// A cell's bounds.
#[derive(Clone, Copy, Debug, Default)]
struct Area {
    lon: (f64, f64),
    lat: (f64, f64),
}

fn spread(v: u32) -> u64 {
    let mut x = v as u64;
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0x0000_0000_FFFF_FFFF) as u32
}

/// The cell of `step` bits holding (lon, lat) over the given ranges; None
/// outside the WGS84 limits or the ranges.
fn encode_in(lon_r: (f64, f64), lat_r: (f64, f64), lon: f64, lat: f64, step: u8) -> Option<Cell> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.0 || lat > lat_r.1 || lon < lon_r.0 || lon > lon_r.1 {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.0) / (lat_r.1 - lat_r.0) * scale;
    let lon_off = (lon - lon_r.0) / (lon_r.1 - lon_r.0) * scale;
    let bits = spread(lat_off as u32) | (spread(lon_off as u32) << 1);
    Some(Cell { bits, step })
}

/// The cell of `step` bits holding (lon, lat) on the WGS84 ranges.
pub(crate) fn encode(lon: f64, lat: f64, step: u8) -> Option<Cell> {
    encode_in((LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX), lon, lat, step)
}

/// The score GEOADD stores for (lon, lat), already range-checked.
pub(crate) fn score_of(lon: f64, lat: f64) -> u64 {
    encode(lon, lat, STEP_MAX).map_or(0, |c| c.bits)
}

fn decode_area(c: Cell) -> Area {
    let lat_i = squash(c.bits);
    let lon_i = squash(c.bits >> 1);
    let div = (1u64 << c.step) as f64;
    let (lat_scale, lon_scale) = (LAT_MAX - LAT_MIN, LONG_MAX - LONG_MIN);
    Area {
        lat: (
            LAT_MIN + (lat_i as f64 / div) * lat_scale,
            LAT_MIN + ((lat_i as u64 + 1) as f64 / div) * lat_scale,
        ),
        lon: (
            LONG_MIN + (lon_i as f64 / div) * lon_scale,
            LONG_MIN + ((lon_i as u64 + 1) as f64 / div) * lon_scale,
        ),
    }
}

/// A stored score as the 64-bit integer x86-64 C code truncates it to.
fn score_bits(score: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    let trunc = |v: f64| -> u64 {
        if v.is_nan() || !(-TWO63..TWO63).contains(&v) {
            1 << 63
        } else {
            v as i64 as u64
        }
    };
    if score >= TWO63 {
        trunc(score - TWO63) ^ (1 << 63)
    } else {
        trunc(score)
    }
}

/// The (lon, lat) a stored score decodes to: its cell's centre, clamped
/// to the WGS84 ranges.
pub(crate) fn decode(score: f64) -> (f64, f64) {
    let a = decode_area(Cell {
        bits: score_bits(score),
        step: STEP_MAX,
    });
    let lon = ((a.lon.0 + a.lon.1) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat.0 + a.lat.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The standard 11-character geohash of a stored score (re-encoded over
/// ±90° latitude; the last character carries no bits and is `0`).
pub(crate) fn hash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode(score);
    let bits = encode_in((-180.0, 180.0), (-90.0, 90.0), lon, lat, STEP_MAX).map_or(0, |c| c.bits);
    let mut out = [b'0'; 11];
    for (i, ch) in out.iter_mut().take(10).enumerate() {
        *ch = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

/// Moves a cell one step along one axis: `axis` masks that coordinate's
/// bits (odd for longitude, even for latitude); wraps around the grid.
fn step_along(c: &mut Cell, axis: u64, d: i8) {
    let shift = 64 - 2 * c.step as u32;
    let (moving, kept) = (c.bits & axis, c.bits & !axis);
    let zz = !axis >> shift;
    let moved = if d > 0 {
        moving.wrapping_add(zz + 1)
    } else {
        (moving | zz).wrapping_sub(zz + 1)
    };
    c.bits = (moved & (axis >> shift)) | kept;
}

const LON_BITS: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const LAT_BITS: u64 = 0x5555_5555_5555_5555;

fn neighbour(c: Cell, dlon: i8, dlat: i8) -> Cell {
    let mut n = c;
    if dlon != 0 {
        step_along(&mut n, LON_BITS, dlon);
    }
    if dlat != 0 {
        step_along(&mut n, LAT_BITS, dlat);
    }
    n
}

/// What is searched: a circle or an axis-aligned box around a centre, in
/// the unit the command named (`to_m` metres each).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// Centre longitude.
    pub(crate) lon: f64,
    /// Centre latitude.
    pub(crate) lat: f64,
    /// Metres per unit.
    pub(crate) to_m: f64,
    /// The extent.
    pub(crate) kind: ShapeKind,
}

/// A circle's radius, or a box's width and height.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ShapeKind {
    /// BYRADIUS / GEORADIUS.
    Radius(f64),
    /// BYBOX width height.
    Box(f64, f64),
}

/// Bits per coordinate of the cells that cover a search of `range_m`.
fn estimate_steps(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let (mut r, mut step) = (range_m, 1i32);
    while r < MERCATOR_MAX {
        r *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

impl Shape {
    /// (min lon, min lat, max lon, max lat) of the area searched.
    fn bounds(&self) -> (f64, f64, f64, f64) {
        let (half_h, half_w) = match self.kind {
            ShapeKind::Radius(r) => (r, r),
            ShapeKind::Box(w, h) => (h / 2.0, w / 2.0),
        };
        let (height, width) = (self.to_m * half_h, self.to_m * half_w);
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let lon_delta = if self.lat < 0.0 { bottom } else { top };
        (
            self.lon - lon_delta,
            self.lat - lat_delta,
            self.lon + lon_delta,
            self.lat + lat_delta,
        )
    }

    /// The cells to scan, in Redis's order: the centre's, then north,
    /// south, east, west, north-east, north-west, south-east, south-west;
    /// neighbours the area cannot reach are [`Cell::is_none`].
    pub(crate) fn cells(&self) -> [Cell; 9] {
        let (min_lon, min_lat, max_lon, max_lat) = self.bounds();
        let radius_m = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
        } * self.to_m;
        let mut steps = estimate_steps(radius_m, self.lat);
        let at = |steps| encode(self.lon, self.lat, steps).unwrap_or_default();
        let mut cell = at(steps);
        let (n, s) = (neighbour(cell, 0, 1), neighbour(cell, 0, -1));
        let (e, w) = (neighbour(cell, 1, 0), neighbour(cell, -1, 0));
        let too_coarse = decode_area(n).lat.1 < max_lat
            || decode_area(s).lat.0 > min_lat
            || decode_area(e).lon.1 < max_lon
            || decode_area(w).lon.0 > min_lon;
        if steps > 1 && too_coarse {
            steps -= 1;
            cell = at(steps);
        }
        let mut out = [
            cell,
            neighbour(cell, 0, 1),
            neighbour(cell, 0, -1),
            neighbour(cell, 1, 0),
            neighbour(cell, -1, 0),
            neighbour(cell, 1, 1),
            neighbour(cell, -1, 1),
            neighbour(cell, 1, -1),
            neighbour(cell, -1, -1),
        ];
        if steps >= 2 {
            let area = decode_area(cell);
            let mut drop = |idx: [usize; 3]| idx.iter().for_each(|&i| out[i] = Cell::default());
            if area.lat.0 < min_lat {
                drop([2, 8, 7]);
            }
            if area.lat.1 > max_lat {
                drop([1, 5, 6]);
            }
            if area.lon.0 < min_lon {
                drop([4, 8, 6]);
            }
            if area.lon.1 > max_lon {
                drop([3, 7, 5]);
            }
        }
        out
    }

    /// The distance in metres from the centre to (lon, lat), if that point
    /// lies in the shape.
    pub(crate) fn distance_if_within(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.kind {
            ShapeKind::Radius(r) => {
                // Written as Redis tests it, so a NaN distance (antipodes
                // rounding past 1 under the arcsine) is kept too.
                let d = distance(self.lon, self.lat, lon, lat);
                let beyond = d.partial_cmp(&(r * self.to_m)) == Some(std::cmp::Ordering::Greater);
                (!beyond).then_some(d)
            }
            ShapeKind::Box(w, h) => {
                let (w, h) = (w * self.to_m, h * self.to_m);
                if lat_distance(lat, self.lat) > h / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > w / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine distance in metres between two points.
pub(crate) fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((deg_rad(lon2) - deg_rad(lon1)) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// A distance as Redis replies with it: rounded (ties to even) to four
/// decimals, always with all four.
pub(crate) fn fmt_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".into();
    }
    // As `llrint`: what does not fit (NaN included) becomes i64::MIN.
    let r = (d * 1e4).round_ties_even();
    let v = if (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r) {
        r as i64
    } else {
        i64::MIN
    };
    let sign = if v < 0 { "-" } else { "" };
    let a = v.unsigned_abs();
    format!("{sign}{}.{:04}", a / 10_000, a % 10_000)
}

/// A coordinate as Redis replies with it: seventeen decimals with the
/// trailing zeros (and a bare dot) trimmed, and `-0` as `0`.
pub(crate) fn fmt_coord(v: f64) -> String {
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        let keep = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(keep);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_points_encode_decode_and_hash_as_redis_does() {
        // GEOADD g 13.361389 38.115556 Palermo: score, GEOPOS, GEOHASH.
        let s = score_of(13.361389, 38.115556);
        assert_eq!(s, 3479099956230698);
        let (lon, lat) = decode(s as f64);
        assert_eq!(fmt_coord(lon), "13.36138933897018433");
        assert_eq!(fmt_coord(lat), "38.11555639549629859");
        assert_eq!(&hash_string(s as f64), b"sqc8b49rny0");
        let c = score_of(15.087269, 37.502669);
        let (lon2, lat2) = decode(c as f64);
        assert_eq!(fmt_distance(distance(lon, lat, lon2, lat2)), "166274.1516");
    }

    #[test]
    fn interleaving_round_trips() {
        for v in [0u32, 1, 0x3ff_ffff, 0x155_5555, 12345678] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(squash(spread(v) << 1 >> 1), v);
        }
    }

    #[test]
    fn scores_outside_the_grid_decode_clamped() {
        assert_eq!(decode(-1.0), (LONG_MAX, LAT_MAX));
        let (lon, lat) = decode(f64::INFINITY);
        assert!((LONG_MIN..=LONG_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat));
    }

    #[test]
    fn distances_and_coordinates_format_like_redis() {
        assert_eq!(fmt_distance(0.0), "0.0000");
        assert_eq!(fmt_distance(0.00005), "0.0000");
        assert_eq!(fmt_distance(0.7750), "0.7750");
        assert_eq!(fmt_distance(12.34567), "12.3457");
        assert_eq!(fmt_distance(f64::NAN), "-922337203685477.5808");
        assert_eq!(fmt_coord(-0.0), "0");
        assert_eq!(fmt_coord(180.0), "180");
        assert_eq!(fmt_coord(-1e-30), "0");
    }

    #[test]
    fn huge_radii_cover_the_world_with_coarse_cells() {
        let shape = Shape {
            lon: 0.0,
            lat: 0.0,
            to_m: 1000.0,
            kind: ShapeKind::Radius(50_000.0),
        };
        let cells = shape.cells();
        assert_eq!(cells[0].step, 1);
        assert!(cells.iter().all(|c| c.is_none() || c.step == 1));
    }
}
