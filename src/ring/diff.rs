//! Comparing two rings: which old owners lose keys when the ring changes.
//!
//! Used by the proxy's migration to scan only the nodes that can hold keys
//! whose owner changed. Ownership is constant between consecutive points, so
//! checking every point of both rings decides it exactly, without any key.

use super::Ring;

impl Ring {
    /// The sorted point positions (hashes) of this ring.
    pub(crate) fn points(&self) -> &[u64] {
        &self.points
    }
}

/// For each node of `prev` (by index): true if some key it owns in `prev` is
/// owned by a node of another name in `next`.
pub(crate) fn losing_nodes(prev: &Ring, next: &Ring) -> Vec<bool> {
    let mut loses = vec![false; prev.nodes().len()];
    for &h in prev.points().iter().chain(next.points()) {
        let old = prev.locate_hash(h);
        if next.node(next.locate_hash(h)).name != prev.node(old).name {
            loses[old] = true;
        }
    }
    loses
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{NodeSpec, RingConfig};

    fn ring(names: &[&str]) -> Ring {
        let nodes = names
            .iter()
            .enumerate()
            .map(|(i, n)| NodeSpec {
                name: n.to_string(),
                addr: format!("127.0.0.1:{}", 7001 + i),
                weight: 1,
            })
            .collect();
        Ring::new(nodes, RingConfig::default(), 1).unwrap()
    }

    /// `prev` after node `name` left.
    fn without(prev: &Ring, name: &str) -> Ring {
        let nodes: Vec<NodeSpec> = prev
            .nodes()
            .iter()
            .filter(|n| n.name != name)
            .cloned()
            .collect();
        prev.with_nodes(nodes).unwrap()
    }

    #[test]
    fn adding_a_node_takes_keys_from_many_old_nodes() {
        let prev = ring(&["a", "b", "c", "d", "e"]);
        let mut nodes = prev.nodes().to_vec();
        nodes.push(NodeSpec {
            name: "f".into(),
            addr: "127.0.0.1:1".into(),
            weight: 1,
        });
        let next = prev.with_nodes(nodes).unwrap();
        assert_eq!(losing_nodes(&prev, &next), vec![true; 5]);
    }

    #[test]
    fn removing_a_node_with_equal_weights_moves_only_its_keys() {
        let prev = ring(&["a", "b", "c", "d", "e"]);
        let next = without(&prev, "c");
        assert_eq!(
            losing_nodes(&prev, &next),
            vec![false, false, true, false, false]
        );
    }

    #[test]
    fn losing_nodes_agrees_with_keys() {
        let prev = ring(&["a", "b", "c", "d", "e"]);
        let next = without(&prev, "b");
        let loses = losing_nodes(&prev, &next);
        for i in 0..50_000 {
            let key = format!("key:{i}");
            let old = prev.locate(key.as_bytes());
            if next.node(next.locate(key.as_bytes())).name != prev.node(old).name {
                assert!(loses[old], "{key} moved from {old} which was not flagged");
            }
        }
    }
}
