//! The GEO searches: GEOSEARCH, GEOSEARCHSTORE and the GEORADIUS family
//! (GEORADIUS, GEORADIUSBYMEMBER, their _RO forms, STORE and STOREDIST),
//! parsed in Redis 7.0's order with its errors, replying in its order.
//!
//! A search scans the members of up to nine cells in score order, keeps
//! those inside the shape, then sorts by distance: stably when it keeps
//! everything, with Redis's partial quicksort (`partial_sort.rs`) when
//! COUNT keeps fewer. The STORE forms lock the source and destination
//! together, so the search and the write are one step.

use super::geo::{double_or, human_double, lon_lat, position, radius, unit};
use super::geohash::{self, Shape, ShapeKind};
use super::partial_sort::{partial_sort, stable_sort};
use super::{parse_i64, CmdResult, Ctx};
use crate::backend::error::CmdError;
use crate::backend::value::zset::{ScoreBound, ZSet};
use crate::backend::value::{Coll, Elem};
use crate::resp::{encode, eq_ignore_case};
use std::cmp::Ordering;

/// Which command of the family is parsing.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// GEORADIUS[_RO] key longitude latitude radius unit …
    Coords,
    /// GEORADIUSBYMEMBER[_RO] key member radius unit …
    Member,
    /// GEOSEARCH key …
    Search,
    /// GEOSEARCHSTORE destination source …
    SearchStore,
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed search.
struct Query<'a> {
    shape: Shape,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    sort: Sort,
    any: bool,
    /// 0: no COUNT.
    count: u64,
    store: Option<&'a [u8]>,
    store_dist: bool,
}

/// Parses the whole request in Redis's order; `z` is the source if it
/// exists (FROMMEMBER and BYMEMBER read it while parsing).
fn parse<'a>(
    args: &[&'a [u8]],
    form: Form,
    ro: bool,
    z: Option<&ZSet>,
) -> Result<Query<'a>, CmdError> {
    let blank = Shape {
        lon: 0.0,
        lat: 0.0,
        to_m: 1.0,
        kind: ShapeKind::Radius(0.0),
    };
    let mut q = Query {
        shape: blank,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        sort: Sort::None,
        any: false,
        count: 0,
        store: None,
        store_dist: false,
    };
    let search = matches!(form, Form::Search | Form::SearchStore);
    let base = match (form, z) {
        (Form::Coords, _) => {
            (q.shape.lon, q.shape.lat) = lon_lat(&args[2..4])?;
            let (r, to_m) = radius(&args[4..6])?;
            (q.shape.to_m, q.shape.kind) = (to_m, ShapeKind::Radius(r));
            6
        }
        (Form::Member, None) => 5,
        (Form::Member, Some(z)) => {
            (q.shape.lon, q.shape.lat) = position(z, args[2])?;
            let (r, to_m) = radius(&args[3..5])?;
            (q.shape.to_m, q.shape.kind) = (to_m, ShapeKind::Radius(r));
            5
        }
        (Form::Search, _) => 2,
        (Form::SearchStore, _) => {
            q.store = Some(args[1]);
            3
        }
    };
    let (mut from_member, mut from_loc, mut by_radius, mut by_box) = (false, false, false, false);
    let mut i = base;
    while i < args.len() {
        let (a, left) = (args[i], args.len() - i - 1);
        let is = |name: &[u8]| eq_ignore_case(a, name);
        if is(b"withdist") {
            q.with_dist = true;
        } else if is(b"withhash") {
            q.with_hash = true;
        } else if is(b"withcoord") {
            q.with_coord = true;
        } else if is(b"any") {
            q.any = true;
        } else if is(b"asc") {
            q.sort = Sort::Asc;
        } else if is(b"desc") {
            q.sort = Sort::Desc;
        } else if is(b"count") && left >= 1 {
            let n = parse_i64(args[i + 1])?;
            if n <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            q.count = n as u64;
            i += 1;
        } else if (is(b"store") || is(b"storedist")) && left >= 1 && !ro && !search {
            (q.store, q.store_dist) = (Some(args[i + 1]), is(b"storedist"));
            i += 1;
        } else if is(b"storedist") && form == Form::SearchStore {
            q.store_dist = true;
        } else if is(b"frommember") && left >= 1 && search && !from_loc {
            if let Some(z) = z {
                (q.shape.lon, q.shape.lat) = position(z, args[i + 1])?;
            }
            from_member = true;
            i += 1;
        } else if is(b"fromlonlat") && left >= 2 && search && !from_member {
            (q.shape.lon, q.shape.lat) = lon_lat(&args[i + 1..i + 3])?;
            from_loc = true;
            i += 2;
        } else if is(b"byradius") && left >= 2 && search && !by_box {
            let (r, to_m) = radius(&args[i + 1..i + 3])?;
            (q.shape.to_m, q.shape.kind) = (to_m, ShapeKind::Radius(r));
            by_radius = true;
            i += 2;
        } else if is(b"bybox") && left >= 3 && search && !by_radius {
            let w = double_or(args[i + 1], Some("need numeric width"))?;
            let h = double_or(args[i + 2], Some("need numeric height"))?;
            if w < 0.0 || h < 0.0 {
                return Err(CmdError::err("height or width cannot be negative"));
            }
            (q.shape.to_m, q.shape.kind) = (unit(args[i + 3])?, ShapeKind::Box(w, h));
            by_box = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if q.store.is_some() && (q.with_dist || q.with_hash || q.with_coord) {
        let what = if form == Form::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(CmdError::err(format!(
            "{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(args[0]);
    if search && !(from_member || from_loc) {
        return Err(CmdError::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if search && !(by_radius || by_box) {
        return Err(CmdError::err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if q.any && q.count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }
    Ok(q)
}

/// One member found inside the shape.
struct Found {
    member: Elem,
    score: f64,
    lon: f64,
    lat: f64,
    /// Metres from the centre.
    dist: f64,
}

/// The members inside `shape`, in scan order (cell by cell, score order
/// within a cell), stopping at `limit` when non-zero (ANY).
fn scan(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Found> {
    let cells = shape.cells();
    let mut found = Vec::new();
    let mut last = 0;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_none() || (last != 0 && *cell == cells[last]) {
            continue;
        }
        if limit != 0 && found.len() >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        let (a, b) = z.score_range(
            ScoreBound {
                value: min,
                exclusive: false,
            },
            ScoreBound {
                value: max,
                exclusive: true,
            },
        );
        for (m, score) in z.range(a, b) {
            let (lon, lat) = geohash::decode(score);
            if let Some(dist) = shape.distance_if_within(lon, lat) {
                let member = Elem::from(m);
                found.push(Found {
                    member,
                    score,
                    lon,
                    lat,
                    dist,
                });
            }
            if limit != 0 && found.len() >= limit {
                break;
            }
        }
        last = i;
    }
    found
}

/// Redis's comparator: NaN distances compare as smaller.
fn by_distance(a: &Found, b: &Found) -> Ordering {
    if a.dist > b.dist {
        Ordering::Greater
    } else if a.dist == b.dist {
        Ordering::Equal
    } else {
        Ordering::Less
    }
}

/// The results a query keeps, in reply order.
fn search(z: &ZSet, q: &Query) -> Vec<Found> {
    let mut sort = q.sort;
    if q.count != 0 && sort == Sort::None && !q.any {
        sort = Sort::Asc;
    }
    let limit = if q.any { q.count as usize } else { 0 };
    let mut found = scan(z, &q.shape, limit);
    let keep = if q.count == 0 {
        found.len()
    } else {
        found.len().min(q.count as usize)
    };
    let cmp = |a: &Found, b: &Found| match sort {
        Sort::Desc => by_distance(a, b).reverse(),
        _ => by_distance(a, b),
    };
    if sort != Sort::None && keep > 0 {
        if keep == found.len() {
            stable_sort(&mut found, &cmp);
        } else {
            partial_sort(&mut found, keep - 1, &cmp);
        }
    }
    found.truncate(keep);
    found
}

fn reply(ctx: &mut Ctx, q: &Query, found: &[Found]) {
    let extra = q.with_dist as usize + q.with_hash as usize + q.with_coord as usize;
    encode::array_len(ctx.out, found.len());
    for f in found {
        if extra > 0 {
            encode::array_len(ctx.out, extra + 1);
        }
        encode::bulk(ctx.out, &f.member);
        if q.with_dist {
            let d = geohash::fmt_distance(f.dist / q.shape.to_m);
            encode::bulk(ctx.out, d.as_bytes());
        }
        if q.with_hash {
            encode::integer(ctx.out, f.score as i64);
        }
        if q.with_coord {
            encode::array_len(ctx.out, 2);
            human_double(ctx, f.lon);
            human_double(ctx, f.lat);
        }
    }
}

/// Every key the request may write: GEOSEARCHSTORE's destination, or
/// whatever follows a STORE or STOREDIST word (locked with the source, so
/// the search and its write are one step).
fn written_keys<'a>(args: &[&'a [u8]], form: Form, ro: bool, base: usize) -> Vec<&'a [u8]> {
    match form {
        Form::SearchStore => vec![args[1]],
        Form::Search => Vec::new(),
        _ if ro => Vec::new(),
        _ => (base..args.len() - 1)
            .filter(|&i| eq_ignore_case(args[i], b"store") || eq_ignore_case(args[i], b"storedist"))
            .map(|i| args[i + 1])
            .collect(),
    }
}

fn radius_generic(ctx: &mut Ctx, args: &[&[u8]], form: Form, ro: bool) -> CmdResult {
    let (src, base) = match form {
        Form::Coords => (args[1], 6),
        Form::Member => (args[1], 5),
        Form::Search => (args[1], 2),
        Form::SearchStore => (args[2], 3),
    };
    let mut keys = vec![src];
    keys.extend(written_keys(args, form, ro, base));
    let t = ctx.node.thresholds();
    let mut many = ctx.lock_keys(&keys);
    let (s, h) = many.shard(src);
    let z = s.read_coll::<ZSet>(h, src)?;
    let q = parse(args, form, ro, z)?;
    let found = match z {
        Some(z) => search(z, &q),
        None => Vec::new(),
    };
    let Some(dst) = q.store else {
        drop(many);
        reply(ctx, &q, &found);
        return Ok(());
    };
    let mut out = ZSet::default();
    for f in &found {
        let score = if q.store_dist {
            f.dist / q.shape.to_m
        } else {
            f.score
        };
        out.insert(&f.member, score, &t);
    }
    let (s, h) = many.shard(dst);
    s.put_coll(h, dst, Coll::ZSet(out), 0);
    drop(many);
    encode::integer(ctx.out, found.len() as i64);
    Ok(())
}

/// GEORADIUS key longitude latitude radius unit [options] [STORE|STOREDIST key]
pub(crate) fn georadius(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    radius_generic(ctx, args, Form::Coords, false)
}

/// GEORADIUS_RO key longitude latitude radius unit [options]
pub(crate) fn georadius_ro(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    radius_generic(ctx, args, Form::Coords, true)
}

/// GEORADIUSBYMEMBER key member radius unit [options] [STORE|STOREDIST key]
pub(crate) fn georadiusbymember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    radius_generic(ctx, args, Form::Member, false)
}

/// GEORADIUSBYMEMBER_RO key member radius unit [options]
pub(crate) fn georadiusbymember_ro(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    radius_generic(ctx, args, Form::Member, true)
}

/// GEOSEARCH key FROMMEMBER m|FROMLONLAT lon lat BYRADIUS r unit|BYBOX w h unit [options]
pub(crate) fn geosearch(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    radius_generic(ctx, args, Form::Search, true)
}

/// GEOSEARCHSTORE destination source … [STOREDIST]
pub(crate) fn geosearchstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    radius_generic(ctx, args, Form::SearchStore, false)
}
