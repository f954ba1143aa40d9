//! What one topology change does to the ring's member list: add a node,
//! remove one, or give one a new weight. [`super::begin`] builds the next
//! ring from [`Change::next_nodes`]; the copy, cutover and sweep that
//! follow work from the two rings alone, whatever the change was.

use crate::ring::NodeSpec;

/// What kind of change is starting.
#[derive(Debug)]
pub(crate) enum Change {
    Add(NodeSpec),
    Remove(String),
    /// The node of this name keeps its address and takes this weight.
    Reweight {
        name: String,
        weight: u32,
    },
}

impl Change {
    /// The next ring's members after this change of `nodes`, and the
    /// change's label (`add node11`, `reweight node3 to 2`).
    pub(crate) fn next_nodes(&self, nodes: &[NodeSpec]) -> (Vec<NodeSpec>, String) {
        match self {
            Change::Add(spec) => {
                let mut v = nodes.to_vec();
                v.push(spec.clone());
                (v, format!("add {}", spec.name))
            }
            Change::Remove(name) => {
                let v = nodes.iter().filter(|n| &n.name != name).cloned().collect();
                (v, format!("remove {name}"))
            }
            Change::Reweight { name, weight } => {
                let v = nodes
                    .iter()
                    .map(|n| match &n.name == name {
                        true => NodeSpec {
                            weight: *weight,
                            ..n.clone()
                        },
                        false => n.clone(),
                    })
                    .collect();
                (v, format!("reweight {name} to {weight}"))
            }
        }
    }
}
