//! Merging replies: per-node fragments of a split multi-key request back into
//! one reply in the client's key order, and the replies of a fanned-out
//! command into one.
//!
//! Called by `route` (inside the future that owes the client its reply) and by
//! the SCAN path. Pure functions over complete RESP replies: no I/O, no
//! routing decisions beyond the snapshot they are handed, never a panic on a
//! malformed node reply (that becomes an `-ERR unexpected fragment reply`).

use bytes::{Bytes, BytesMut};

use crate::proxy::policy::{Aggregate, Merge};
use crate::proxy::upstream::topology::Routing;
use crate::resp::reply::{elements, integer, is_error};
use crate::resp::{encode, parse_i64};

/// Merges per-node fragment replies back into one reply in the client's key order.
pub fn merge_fragments(
    merge: Merge,
    replies: &[Bytes],
    order: &[Vec<usize>],
    total: usize,
    first_key: usize,
) -> Bytes {
    if let Some(err) = replies.iter().find(|r| is_error(r)) {
        return err.clone();
    }
    let mut out = BytesMut::new();
    match merge {
        Merge::Values => {
            // MGET's keys are consecutive arguments: slot = position - first.
            let mut slots: Vec<Option<&[u8]>> = vec![None; total];
            for (r, ps) in replies.iter().zip(order) {
                let Some(els) = elements(r) else {
                    return bad_fragment(r);
                };
                if els.len() != ps.len() {
                    return bad_fragment(r);
                }
                for (e, &p) in els.into_iter().zip(ps) {
                    slots[p - first_key] = Some(&r[e]);
                }
            }
            encode::array_len(&mut out, total);
            for s in slots {
                out.extend_from_slice(s.unwrap_or(b"$-1\r\n"));
            }
        }
        Merge::AllOk => encode::simple(&mut out, "OK"),
        Merge::Sum => {
            let mut sum = 0i64;
            for r in replies {
                match integer(r) {
                    Some(n) => sum += n,
                    None => return bad_fragment(r),
                }
            }
            encode::integer(&mut out, sum);
        }
    }
    out.freeze()
}

/// Combines the replies of a fanned-out command.
pub fn aggregate(agg: Aggregate, replies: &[Bytes]) -> Bytes {
    if let Some(err) = replies.iter().find(|r| is_error(r)) {
        return err.clone();
    }
    let mut out = BytesMut::new();
    match agg {
        Aggregate::Sum => {
            let mut sum = 0;
            for r in replies {
                match integer(r) {
                    Some(n) => sum += n,
                    None => return bad_fragment(r),
                }
            }
            encode::integer(&mut out, sum);
        }
        Aggregate::AllOk => encode::simple(&mut out, "OK"),
        Aggregate::Concat => {
            let mut parts = Vec::new();
            for r in replies {
                let Some(els) = elements(r) else {
                    return bad_fragment(r);
                };
                parts.extend(els.into_iter().map(|e| &r[e]));
            }
            encode::array_len(&mut out, parts.len());
            for p in parts {
                out.extend_from_slice(p);
            }
        }
        Aggregate::First | Aggregate::Scan | Aggregate::AnyNonNil => return replies[0].clone(),
    }
    out.freeze()
}

/// Keeps, in an array of keys returned by node `idx`, only the keys it owns.
pub(crate) fn owned_only(r: &Bytes, routing: &Routing, idx: usize) -> Bytes {
    let Some(els) = elements(r) else {
        return r.clone();
    };
    let kept: Vec<&[u8]> = els
        .into_iter()
        .map(|e| &r[e])
        .filter(|el| match bulk_payload(el) {
            Some(k) => routing.ring.locate(k) == idx,
            None => true,
        })
        .collect();
    let mut out = BytesMut::new();
    encode::array_len(&mut out, kept.len());
    for k in kept {
        out.extend_from_slice(k);
    }
    out.freeze()
}

/// The payload of one `$n\r\n…\r\n` element.
pub(crate) fn bulk_payload(el: &[u8]) -> Option<&[u8]> {
    let nl = el.iter().position(|&b| b == b'\n')?;
    let n = parse_i64(el.get(1..nl.checked_sub(1)?)?)?;
    el.get(nl + 1..nl + 1 + usize::try_from(n).ok()?)
}

/// The `-ERR` a client gets when a node's fragment reply has the wrong shape.
pub(crate) fn bad_fragment(r: &Bytes) -> Bytes {
    let mut out = BytesMut::new();
    encode::error(
        &mut out,
        &format!(
            "ERR unexpected fragment reply from a node: {}",
            String::from_utf8_lossy(&r[..r.len().min(64)])
        ),
    );
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::b;

    #[test]
    fn mget_fragments_merge_in_key_order() {
        // Keys at positions 1..=4; node A had 1 and 3, node B had 2 and 4.
        let replies = [
            b("*2\r\n$1\r\na\r\n$-1\r\n"),
            b("*2\r\n$1\r\nb\r\n$1\r\nd\r\n"),
        ];
        let order = vec![vec![1, 3], vec![2, 4]];
        let merged = merge_fragments(Merge::Values, &replies, &order, 4, 1);
        assert_eq!(
            &merged[..],
            b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$-1\r\n$1\r\nd\r\n"
        );
    }

    #[test]
    fn sums_and_errors_merge() {
        let order = vec![vec![1], vec![2]];
        assert_eq!(
            &merge_fragments(Merge::Sum, &[b(":1\r\n"), b(":2\r\n")], &order, 2, 1)[..],
            b":3\r\n"
        );
        assert_eq!(
            &merge_fragments(Merge::AllOk, &[b("+OK\r\n"), b("+OK\r\n")], &order, 2, 1)[..],
            b"+OK\r\n"
        );
        assert_eq!(
            &merge_fragments(Merge::Sum, &[b(":1\r\n"), b("-ERR x\r\n")], &order, 2, 1)[..],
            b"-ERR x\r\n"
        );
        assert!(
            merge_fragments(Merge::Sum, &[b(":1\r\n"), b("+OK\r\n")], &order, 2, 1)
                .starts_with(b"-ERR")
        );
    }

    #[test]
    fn aggregates_combine_node_replies() {
        assert_eq!(
            &aggregate(Aggregate::Sum, &[b(":5\r\n"), b(":7\r\n")])[..],
            b":12\r\n"
        );
        assert_eq!(
            &aggregate(
                Aggregate::Concat,
                &[b("*1\r\n$1\r\na\r\n"), b("*0\r\n"), b("*1\r\n$1\r\nb\r\n")]
            )[..],
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        assert_eq!(
            &aggregate(Aggregate::AllOk, &[b("+OK\r\n"), b("-ERR no\r\n")])[..],
            b"-ERR no\r\n"
        );
    }

    #[test]
    fn bulk_payload_reads_one_element() {
        assert_eq!(bulk_payload(b"$3\r\nabc\r\n"), Some(&b"abc"[..]));
        assert_eq!(bulk_payload(b"$-1\r\n"), None);
        assert_eq!(bulk_payload(b"$9\r\nab\r\n"), None);
    }
}
