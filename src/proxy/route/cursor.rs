//! The proxy's SCAN cursor: one number that says which ring it was issued
//! under, which node the walk is on, and that node's own cursor.
//!
//! ```text
//!   bit 52 ……………………………… 18 17 …………… 8 7 ……… 0
//!   [ node cursor: 35 bits ][ node: 10 bits ][ tag: 8 ]
//! ```
//!
//! The tag is `epoch mod 255 + 1`, never 0, so every continuing cursor is
//! non-zero and `0` keeps its meaning: start, or walk done. Cursors stay below
//! 2^53, so clients that read them as a JavaScript number or an `i64` keep
//! them exact. A redis-server node's cursor is its table's reverse-binary
//! position (35 bits cover 2^35 buckets); the built-in node's is a 35-bit key
//! hash prefix (`backend::keyspace::scan::CURSOR_BITS`).
//!
//! Pure: no I/O, no ring. Called by `proxy::scan`. Never trusts a cursor: a
//! client's number that this proxy could not have issued is an error, and so
//! is a node cursor that does not fit — never a silently shortened walk.

/// Bits for the topology tag.
pub(crate) const TAG_BITS: u32 = 8;
/// Bits for the node index: up to 1024 nodes.
pub(crate) const NODE_BITS: u32 = 10;
/// Bits for the node's own cursor.
pub(crate) const NODE_CURSOR_BITS: u32 = 35;
/// Nodes a walk can visit.
pub(crate) const MAX_NODES: usize = 1 << NODE_BITS;
/// Every cursor this proxy issues is below this (2^53).
pub(crate) const LIMIT: u64 = 1 << (TAG_BITS + NODE_BITS + NODE_CURSOR_BITS);

const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const NODE_MASK: u64 = (1 << NODE_BITS) - 1;

/// Where a walk stands: the ring's tag, the node, and that node's cursor
/// (0 = the node's walk has not started).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) tag: u64,
    pub(crate) node: usize,
    pub(crate) node_cursor: u64,
}

/// What a client's cursor asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cursor {
    /// `0`: a new walk.
    Start,
    /// A cursor this proxy issued.
    At(Position),
}

/// Why a cursor cannot be used; [`CursorError::message`] gives the reply text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CursorError {
    /// Not a number (Redis's own refusal).
    Invalid,
    /// A number, but not a cursor this proxy issued (Redis would scan from
    /// there; the proxy cannot know where that is, and will not end a walk
    /// short in silence).
    NotIssued,
    /// A node answered with a cursor wider than [`NODE_CURSOR_BITS`].
    NodeCursorTooWide { node: String, cursor: u64 },
    /// The ring has more nodes than a cursor can name.
    TooManyNodes(usize),
}

impl CursorError {
    /// The error reply, without the leading `-`.
    pub(crate) fn message(&self) -> String {
        match self {
            CursorError::Invalid => "ERR invalid cursor".into(),
            CursorError::NotIssued => "ERR invalid cursor: SCAN through shardis continues only cursors it returned (start a walk at 0)".into(),
            CursorError::NodeCursorTooWide { node, cursor } => format!(
                "ERR node {node} answered SCAN with cursor {cursor}, wider than the {NODE_CURSOR_BITS} bits a proxy cursor keeps for it; the walk cannot go on"
            ),
            CursorError::TooManyNodes(n) => format!(
                "ERR SCAN through the proxy walks at most {MAX_NODES} nodes; the ring has {n}"
            ),
        }
    }
}

/// The tag of the ring at `epoch`: 1..=255, so never 0.
pub(crate) fn tag_of(epoch: u64) -> u64 {
    epoch % TAG_MASK + 1
}

/// Packs a position; fails when the node cursor or index does not fit.
pub(crate) fn encode(p: Position, node_label: &str) -> Result<u64, CursorError> {
    if p.node >= MAX_NODES {
        return Err(CursorError::TooManyNodes(p.node + 1));
    }
    if p.node_cursor >> NODE_CURSOR_BITS != 0 {
        return Err(CursorError::NodeCursorTooWide {
            node: node_label.to_string(),
            cursor: p.node_cursor,
        });
    }
    debug_assert!((1..=TAG_MASK).contains(&p.tag));
    Ok((p.node_cursor << (TAG_BITS + NODE_BITS)) | ((p.node as u64) << TAG_BITS) | p.tag)
}

/// Reads a client's cursor argument (decimal digits only).
pub(crate) fn decode(arg: &[u8]) -> Result<Cursor, CursorError> {
    // Redis's reading (`strtoul`): "" is 0, a leading '-' wraps.
    let n = crate::resp::parse_cursor(arg).ok_or(CursorError::Invalid)?;
    if n == 0 {
        return Ok(Cursor::Start);
    }
    let tag = n & TAG_MASK;
    if n >= LIMIT || tag == 0 {
        return Err(CursorError::NotIssued);
    }
    Ok(Cursor::At(Position {
        tag,
        node: ((n >> TAG_BITS) & NODE_MASK) as usize,
        node_cursor: n >> (TAG_BITS + NODE_BITS),
    }))
}

/// Where to continue `cursor` on the ring tagged `tag` with `nodes` nodes:
/// `(node, node cursor)`.
///
/// A cursor issued under another ring starts over at the first node of this
/// one. That is what keeps the walk complete across a topology change; the
/// argument is on [`crate::proxy::route::scan`].
pub(crate) fn resume(cursor: Cursor, tag: u64, nodes: usize) -> Result<(usize, u64), CursorError> {
    if nodes > MAX_NODES {
        return Err(CursorError::TooManyNodes(nodes));
    }
    match cursor {
        Cursor::Start => Ok((0, 0)),
        Cursor::At(p) if p.tag != tag => Ok((0, 0)),
        Cursor::At(p) if p.node >= nodes => Err(CursorError::NotIssued),
        Cursor::At(p) => Ok((p.node, p.node_cursor)),
    }
}

/// The cursor for the client after node `node` (of `nodes`, ring tagged
/// `tag`) answered `node_next`. `ring_changed` says the ring moved on while
/// the request was out: the next call must then start over on the new ring,
/// so the walk is never declared done with a reply a cutover may have cut
/// short.
pub(crate) fn next(
    tag: u64,
    node: usize,
    nodes: usize,
    node_next: u64,
    ring_changed: bool,
    node_label: &str,
) -> Result<u64, CursorError> {
    let at = |node, node_cursor| {
        encode(
            Position {
                tag,
                node,
                node_cursor,
            },
            node_label,
        )
    };
    if ring_changed {
        // Any cursor with this (now stale) tag restarts on the current ring.
        return at(0, 0);
    }
    if node_next != 0 {
        at(node, node_next)
    } else if node + 1 < nodes {
        at(node + 1, 0)
    } else {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_walk_goes_node_after_node_then_ends_with_zero() {
        let tag = tag_of(7);
        let c = next(tag, 3, 10, 17, false, "n").unwrap();
        assert_eq!(
            decode(c.to_string().as_bytes()),
            Ok(Cursor::At(Position {
                tag,
                node: 3,
                node_cursor: 17
            }))
        );
        let c = next(tag, 3, 10, 0, false, "n").unwrap();
        assert_eq!(
            resume(decode(c.to_string().as_bytes()).unwrap(), tag, 10),
            Ok((4, 0))
        );
        assert_eq!(next(tag, 9, 10, 0, false, "n"), Ok(0));
    }

    #[test]
    fn a_cursor_from_another_ring_starts_over() {
        let old = next(tag_of(1), 5, 10, 99, false, "n").unwrap();
        let c = decode(old.to_string().as_bytes()).unwrap();
        assert_eq!(resume(c, tag_of(2), 11), Ok((0, 0)));
        assert_eq!(resume(c, tag_of(1), 10), Ok((5, 99)));
        // A ring change while the request was out never ends the walk.
        let c = next(tag_of(1), 9, 10, 0, true, "n").unwrap();
        assert_ne!(c, 0);
        assert_eq!(
            resume(decode(c.to_string().as_bytes()).unwrap(), tag_of(2), 10),
            Ok((0, 0))
        );
    }

    #[test]
    fn bad_cursors_and_wide_node_cursors_are_clear_errors() {
        for bad in [&b"1.5"[..], b"abc", b" 1", b"99999999999999999999999"] {
            assert_eq!(decode(bad), Err(CursorError::Invalid), "{bad:?}");
        }
        // Redis's strtoul reading: "" is 0; a sign is taken.
        assert_eq!(decode(b""), Ok(Cursor::Start));
        assert_eq!(decode(b"+0"), Ok(Cursor::Start));
        // Numbers the proxy never issues: "-1" wraps to 2^64-1, 256 has tag 0.
        for not_issued in [&b"-1"[..], b"256"] {
            assert_eq!(decode(not_issued), Err(CursorError::NotIssued));
        }
        assert_eq!(
            decode(LIMIT.to_string().as_bytes()),
            Err(CursorError::NotIssued)
        );
        let tag = tag_of(1);
        let c = encode(
            Position {
                tag,
                node: 4,
                node_cursor: 0,
            },
            "n",
        )
        .unwrap();
        assert_eq!(
            resume(decode(c.to_string().as_bytes()).unwrap(), tag, 3),
            Err(CursorError::NotIssued)
        );
        let err = next(tag, 0, 2, 1 << 35, false, "node1 (127.0.0.1:1)").unwrap_err();
        assert!(
            err.message().contains("node1 (127.0.0.1:1)"),
            "{}",
            err.message()
        );
        assert!(resume(Cursor::Start, tag, 2000).is_err());
        assert_eq!(decode(b"0"), Ok(Cursor::Start));
        assert_eq!(decode(b"000"), Ok(Cursor::Start));
    }

    fn position() -> impl Strategy<Value = Position> {
        (1..=TAG_MASK, 0..MAX_NODES, 0..(1u64 << NODE_CURSOR_BITS)).prop_map(
            |(tag, node, node_cursor)| Position {
                tag,
                node,
                node_cursor,
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn positions_round_trip_and_are_never_zero(p in position()) {
            let c = encode(p, "n").unwrap();
            prop_assert!(c != 0 && c < LIMIT);
            prop_assert_eq!(decode(c.to_string().as_bytes()), Ok(Cursor::At(p)));
        }

        #[test]
        fn a_continuing_walk_never_answers_zero(
            epoch in any::<u64>(),
            nodes in 1..=MAX_NODES,
            node_seed in any::<usize>(),
            node_next in 0..(1u64 << NODE_CURSOR_BITS),
            ring_changed in any::<bool>(),
        ) {
            let node = node_seed % nodes;
            let c = next(tag_of(epoch), node, nodes, node_next, ring_changed, "n").unwrap();
            let done = !ring_changed && node_next == 0 && node + 1 == nodes;
            prop_assert_eq!(c == 0, done);
            if !done {
                let resumed = resume(decode(c.to_string().as_bytes()).unwrap(), tag_of(epoch), nodes);
                let want = if ring_changed { (0, 0) } else if node_next != 0 { (node, node_next) } else { (node + 1, 0) };
                prop_assert_eq!(resumed, Ok(want));
            }
        }

        #[test]
        fn garbage_cursors_are_errors_not_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..24),
            n in any::<u64>(),
        ) {
            let _ = decode(&bytes);
            match decode(n.to_string().as_bytes()) {
                Ok(Cursor::Start) => prop_assert_eq!(n, 0),
                Ok(Cursor::At(p)) => {
                    prop_assert!(n < LIMIT && p.tag != 0);
                    prop_assert_eq!(encode(p, "n"), Ok(n));
                }
                Err(e) => prop_assert!(n >= LIMIT || n & TAG_MASK == 0, "{:?}", e),
            }
        }
    }
}
