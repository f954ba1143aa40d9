//! The migration engine's errors as returned to the admin path: one enum, and
//! its `Display` is the one place that words them (the admin commands put
//! `ERR ` in front). Owns no state and never talks to a node.

use crate::proxy::admin::migration::mover::NodeError;
use crate::proxy::admin::state::StateError;
use crate::ring::RingError;

#[derive(Debug)]
pub(crate) enum MigrationError {
    /// A change is already running (or finishing its sweep).
    InProgress,
    /// The next ring could not be built from the nodes.
    Ring(RingError),
    /// The state file could not be written; names the file and the OS error.
    StateFile(StateError),
    /// The blocking task writing the state file did not complete.
    StateTask(String),
    /// A node could not be reached or refused a step (MIGRATE, DEL, …);
    /// names the node.
    Node(NodeError),
    /// The change was refused before it touched the ring.
    Unchanged(Box<MigrationError>),
}

impl std::fmt::Display for MigrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MigrationError::InProgress => f.write_str(
                "a topology change is already in progress; retry when CLUSTER RINGINFO shows state:ok",
            ),
            MigrationError::Ring(e) => write!(f, "{e}"),
            MigrationError::StateFile(e) => write!(f, "{e}"),
            MigrationError::StateTask(e) => write!(f, "writing the state file: {e}"),
            MigrationError::Node(e) => write!(f, "{e}"),
            MigrationError::Unchanged(e) => write!(f, "{e}; the ring is unchanged"),
        }
    }
}

impl std::error::Error for MigrationError {}

impl From<StateError> for MigrationError {
    fn from(e: StateError) -> Self {
        MigrationError::StateFile(e)
    }
}

impl From<RingError> for MigrationError {
    fn from(e: RingError) -> Self {
        MigrationError::Ring(e)
    }
}
