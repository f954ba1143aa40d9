//! `CLUSTER PLAN ADDNODE host:port [WEIGHT w] [NAME n]` and `CLUSTER PLAN
//! REMOVENODE name`: what a change would cost, without making it.
//!
//! Builds the would-be ring, walks every node that would lose keys with SCAN
//! (through the proxy's shared upstream connections, read-only), and counts
//! each key whose owner changes: the key count is exact for the keyspace as
//! scanned. Bytes are estimated: MEMORY USAGE on a uniform reservoir sample
//! of up to [`SAMPLE_KEYS`] moving keys per node (STRLEN + key length where a
//! backend lacks MEMORY), scaled by the node's moving-key count; the reply
//! states the 95 % margin of that estimate. The duration is keys ÷ the copy
//! rate: `migration.max_keys_per_sec` when it fixes the rate, else the rate
//! the last change measured (under the cap), else the cap, else unknown.
//!
//! Called by `admin.rs`; never writes to a node, the ring or the state file.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::proxy::config::CopyRate;

use bytes::{Bytes, BytesMut};

use crate::proxy::admin::error::AdminError;
use crate::proxy::conn::pending::Pending;
use crate::proxy::upstream::topology::Node;
use crate::proxy::Proxy;
use crate::resp::reply::{elements, integer, is_error};
use crate::resp::{encode, eq_ignore_case, parse_i64};
use crate::ring::{losing_nodes, NodeSpec, Ring};

/// Moving keys per node whose size is measured.
pub(crate) const SAMPLE_KEYS: usize = 500;
/// Keys per SCAN call.
const SCAN_COUNT: &[u8] = b"1000";
/// The client id the plan's requests use (picks the upstream connection).
const PLAN_CLIENT: u64 = 0;

/// `CLUSTER PLAN …` (`args[0]` is `CLUSTER`): the plan as verbatim text.
pub(crate) fn command(proxy: &Arc<Proxy>, proto: u8, args: Vec<Bytes>) -> Pending {
    let proxy = proxy.clone();
    Pending::Later(Box::pin(async move {
        match plan(&proxy, &args[2..]).await {
            Ok(text) => {
                let mut out = BytesMut::new();
                encode::verbatim(&mut out, text.as_bytes(), proto);
                out.freeze()
            }
            Err(e) => e.reply(),
        }
    }))
}

/// Parses `ADDNODE host:port [WEIGHT w] [NAME n]`'s arguments after the address.
pub(crate) fn parse_add(args: &[Bytes]) -> Result<NodeSpec, AdminError> {
    let addr = String::from_utf8_lossy(&args[0]).to_string();
    if addr.parse::<std::net::SocketAddr>().is_err() {
        return Err(AdminError::BadAddress(addr));
    }
    let mut spec = NodeSpec {
        name: addr.clone(),
        addr,
        weight: 1,
    };
    for pair in args[1..].chunks(2) {
        let [opt, val] = pair else {
            return Err(AdminError::MissingValue);
        };
        if eq_ignore_case(opt, b"WEIGHT") {
            spec.weight = parse_i64(val)
                .filter(|w| (1..=1_000).contains(w))
                .ok_or(AdminError::BadWeight)? as u32;
        } else if eq_ignore_case(opt, b"NAME") {
            spec.name = String::from_utf8_lossy(val).to_string();
            if spec.name.is_empty() || spec.name.contains(char::is_whitespace) {
                return Err(AdminError::BadName);
            }
        } else {
            return Err(AdminError::SyntaxNear(
                String::from_utf8_lossy(opt).to_string(),
            ));
        }
    }
    Ok(spec)
}

/// One losing node's share of the move.
#[derive(Debug, Default, Clone)]
struct FromNode {
    name: String,
    keys: u64,
    /// Sizes of the sampled moving keys.
    sizes: Vec<u64>,
}

impl FromNode {
    /// Estimated bytes and the 95 % margin (normal approximation with the
    /// finite-population correction; 0 when every moving key was measured).
    fn bytes(&self) -> (f64, f64) {
        let n = self.sizes.len() as f64;
        if n == 0.0 {
            return (0.0, 0.0);
        }
        let mean = self.sizes.iter().sum::<u64>() as f64 / n;
        let var = if n > 1.0 {
            self.sizes
                .iter()
                .map(|&s| (s as f64 - mean).powi(2))
                .sum::<f64>()
                / (n - 1.0)
        } else {
            0.0
        };
        let big_n = self.keys as f64;
        let fpc = ((big_n - n) / (big_n - 1.0).max(1.0)).max(0.0);
        let se_total = big_n * (var / n * fpc).sqrt();
        (mean * big_n, 1.96 * se_total)
    }
}

/// Answers `CLUSTER PLAN …` (`args` start after `PLAN`) as `key:value` lines.
pub(crate) async fn plan(proxy: &Arc<Proxy>, args: &[Bytes]) -> Result<String, AdminError> {
    let routing = proxy.routing.load_full();
    if routing.migration.is_some() || routing.filter_keys {
        return Err(AdminError::PlanInProgress);
    }
    let ring = &routing.ring;
    let sub = args.first().ok_or(AdminError::PlanUsage)?;
    let (what, next) = if eq_ignore_case(sub, b"ADDNODE") && args.len() >= 2 {
        let spec = parse_add(&args[1..])?;
        for n in ring.nodes() {
            if n.addr == spec.addr {
                return Err(AdminError::AddrPresent {
                    addr: spec.addr,
                    name: n.name.clone(),
                });
            }
            if n.name == spec.name {
                return Err(AdminError::NamePresent(spec.name));
            }
        }
        let what = format!(
            "addnode {} name={} weight={}",
            spec.addr, spec.name, spec.weight
        );
        let mut nodes = ring.nodes().to_vec();
        nodes.push(spec);
        (what, ring.with_nodes(nodes)?)
    } else if eq_ignore_case(sub, b"REMOVENODE") && args.len() == 2 {
        let which = String::from_utf8_lossy(&args[1]);
        let idx = ring
            .index_of(&which)
            .ok_or_else(|| AdminError::NoSuchNode(which.to_string()))?;
        if ring.nodes().len() == 1 {
            return Err(AdminError::LastNode);
        }
        let mut nodes = ring.nodes().to_vec();
        let gone = nodes.remove(idx);
        let what = format!("removenode {} ({})", gone.name, gone.addr);
        (what, ring.with_nodes(nodes)?)
    } else {
        return Err(AdminError::PlanUsage);
    };

    let losing = losing_nodes(ring, &next);
    let mut total_keys = 0u64;
    let mut from = Vec::new();
    let started = std::time::Instant::now();
    for (i, node) in routing.primaries().enumerate() {
        let size = node
            .upstream(2, PLAN_CLIENT)
            .call(Bytes::from_static(b"*1\r\n$6\r\nDBSIZE\r\n"))
            .await;
        total_keys += integer(&size).unwrap_or(0).max(0) as u64;
        if losing[i] {
            from.push(walk(node, i, ring, &next).await?);
        }
    }
    let moving: u64 = from.iter().map(|f| f.keys).sum();
    let (mut bytes, mut var) = (0.0, 0.0);
    for f in &from {
        let (b, margin) = f.bytes();
        bytes += b;
        var += (margin / 1.96).powi(2);
    }
    let margin = 1.96 * f64::sqrt(var);
    let (rate, source) = copy_rate(proxy);
    let mut text = format!(
        "plan:{what}\r\ndry_run:yes (nothing was changed)\r\nepoch:{}\r\nnext_epoch:{}\r\nnodes_losing_keys:{}\r\nkeys_total:{total_keys}\r\nkeys_to_move:{moving}\r\nmoved_fraction:{:.4}\r\nbytes_to_move:{:.0}\r\nbytes_margin_95:{:.0}\r\nbytes_method:MEMORY USAGE on a uniform sample of up to {SAMPLE_KEYS} moving keys per node (STRLEN + key length without MEMORY), scaled to the node's moving-key count\r\n",
        ring.epoch(),
        next.epoch(),
        from.len(),
        if total_keys == 0 { 0.0 } else { moving as f64 / total_keys as f64 },
        bytes,
        margin,
    );
    match rate {
        Some(r) => text.push_str(&format!(
            "copy_rate_keys_per_sec:{r:.0}\r\ncopy_rate_source:{source}\r\nestimated_duration_s:{:.1}\r\n",
            moving as f64 / r
        )),
        None => text.push_str(&format!(
            "copy_rate_keys_per_sec:-\r\ncopy_rate_source:{source}\r\nestimated_duration_s:-\r\n"
        )),
    }
    text.push_str(&format!("plan_ms:{}\r\n", started.elapsed().as_millis()));
    for f in &from {
        let (b, m) = f.bytes();
        text.push_str(&format!(
            "from:{} keys={} bytes={:.0} margin={:.0} sampled={}\r\n",
            f.name,
            f.keys,
            b,
            m,
            f.sizes.len()
        ));
    }
    Ok(text)
}

/// The copy rate an estimate uses, and where it came from.
fn copy_rate(proxy: &Proxy) -> (Option<f64>, &'static str) {
    let c = proxy.config().migration;
    let cap = c.max_keys_per_sec;
    if cap > 0 && c.copy_rate == CopyRate::Unlimited {
        return (Some(cap as f64), "configured (migration.max_keys_per_sec)");
    }
    let t = proxy.migration.text();
    let copied = proxy.migration.keys_copied.load(Ordering::Relaxed);
    if t.state == "ok" && copied > 0 && t.last_duration_ms > 0 {
        let r = copied as f64 * 1000.0 / t.last_duration_ms as f64;
        return (
            Some(if cap > 0 { r.min(cap as f64) } else { r }),
            "measured (the last change's copy rate)",
        );
    }
    if cap > 0 {
        return (
            Some(cap as f64),
            "at most (migration.max_keys_per_sec caps the adaptive copy rate)",
        );
    }
    (
        None,
        "unknown (the copy rate is not fixed and no change has been measured yet)",
    )
}

/// SCANs node `idx` and counts the keys it owns now whose owner changes in `next`.
async fn walk(node: &Node, idx: usize, ring: &Ring, next: &Ring) -> Result<FromNode, AdminError> {
    let up = node.upstream(2, PLAN_CLIENT);
    let name = &ring.node(idx).name;
    let mut f = FromNode {
        name: name.clone(),
        ..FromNode::default()
    };
    let mut sample: Vec<Bytes> = Vec::new();
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15 ^ idx as u64);
    let mut cursor = Bytes::from_static(b"0");
    loop {
        let mut raw = BytesMut::new();
        encode::command(&mut raw, &[b"SCAN", &cursor, b"COUNT", SCAN_COUNT]);
        let r = up.call(raw.freeze()).await;
        let bad = || AdminError::BadScanReply {
            node: name.clone(),
            reply: String::from_utf8_lossy(&r[..r.len().min(80)]).to_string(),
        };
        let els = elements(&r).filter(|e| e.len() == 2).ok_or_else(bad)?;
        let next_cursor = bulk(&r[els[0].clone()]).ok_or_else(bad)?;
        let keys_reply = &r[els[1].clone()];
        for e in elements(keys_reply).unwrap_or_default() {
            let Some(key) = bulk(&keys_reply[e]) else {
                continue;
            };
            if ring.locate(key) != idx || next.node(next.locate(key)).name == *name {
                continue;
            }
            f.keys += 1;
            // Reservoir sampling: every moving key is equally likely to be measured.
            if sample.len() < SAMPLE_KEYS {
                sample.push(Bytes::copy_from_slice(key));
            } else {
                let j = rng.below(f.keys);
                if (j as usize) < SAMPLE_KEYS {
                    sample[j as usize] = Bytes::copy_from_slice(key);
                }
            }
        }
        if next_cursor == b"0" {
            break;
        }
        cursor = Bytes::copy_from_slice(next_cursor);
    }
    f.sizes = sizes(node, &sample).await;
    Ok(f)
}

/// MEMORY USAGE of each key, pipelined; STRLEN + key length where MEMORY fails.
async fn sizes(node: &Node, keys: &[Bytes]) -> Vec<u64> {
    let up = node.upstream(2, PLAN_CLIENT);
    let mut waits = Vec::with_capacity(keys.len());
    for k in keys {
        let mut raw = BytesMut::new();
        encode::command(&mut raw, &[b"MEMORY", b"USAGE", k]);
        waits.push(up.send(raw.freeze()).await);
    }
    let mut out = Vec::with_capacity(keys.len());
    for (k, w) in keys.iter().zip(waits) {
        let r = w.await.unwrap_or_default();
        match integer(&r) {
            Some(n) if !is_error(&r) => out.push(n.max(0) as u64),
            _ => {
                let mut raw = BytesMut::new();
                encode::command(&mut raw, &[b"STRLEN", k]);
                let r = up.call(raw.freeze()).await;
                if let Some(n) = integer(&r) {
                    out.push(n.max(0) as u64 + k.len() as u64);
                }
            }
        }
    }
    out
}

/// The payload of one `$n\r\n…\r\n` element.
fn bulk(el: &[u8]) -> Option<&[u8]> {
    if el.first() != Some(&b'$') {
        return None;
    }
    let nl = el.iter().position(|&b| b == b'\n')?;
    let n = usize::try_from(parse_i64(el.get(1..nl.checked_sub(1)?)?)?).ok()?;
    el.get(nl + 1..nl + 1 + n)
}

/// A small deterministic generator for the reservoir (no crate needed).
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_arguments_are_parsed_and_checked() {
        let b = |s: &[&str]| {
            s.iter()
                .map(|a| Bytes::from(a.to_string()))
                .collect::<Vec<_>>()
        };
        let spec = parse_add(&b(&["127.0.0.1:9", "weight", "3", "NAME", "n9"])).unwrap();
        assert_eq!((spec.name.as_str(), spec.weight), ("n9", 3));
        assert_eq!(parse_add(&b(&["127.0.0.1:9"])).unwrap().name, "127.0.0.1:9");
        assert!(parse_add(&b(&["nowhere"]))
            .unwrap_err()
            .to_string()
            .contains("invalid node address"));
        assert!(parse_add(&b(&["127.0.0.1:9", "WEIGHT"]))
            .unwrap_err()
            .to_string()
            .contains("syntax"));
        assert!(parse_add(&b(&["127.0.0.1:9", "WEIGHT", "0"]))
            .unwrap_err()
            .to_string()
            .contains("WEIGHT"));
    }

    #[test]
    fn byte_estimate_is_exact_when_every_key_is_measured() {
        let f = FromNode {
            name: "a".into(),
            keys: 3,
            sizes: vec![10, 20, 30],
        };
        assert_eq!(f.bytes(), (60.0, 0.0));
        let sampled = FromNode {
            name: "a".into(),
            keys: 1000,
            sizes: vec![10, 20, 30],
        };
        let (b, m) = sampled.bytes();
        assert_eq!(b, 20_000.0);
        assert!(m > 0.0);
    }
}
