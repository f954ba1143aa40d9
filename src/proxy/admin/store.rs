//! Where the topology is kept between runs: a [`TopologyStore`] loads the
//! saved topology at start and saves each change's phase (copy, sweep,
//! done) as the change passes it. [`StateFile`] — the `state_file` of the
//! config — is the one store today; the migration engine and the start-up
//! path see only the trait. There is no `watch` (changes by other writers):
//! one proxy owns its state file, and nothing yet follows a change made
//! elsewhere; it comes with the first store that several proxies share.

use std::sync::Arc;

use crate::proxy::admin::state::{self, Saved, StateError};

/// A place that keeps the topology (ring, epoch, a change in progress).
pub(crate) trait TopologyStore: Send + Sync {
    /// What to name in logs and errors (the file's path).
    fn name(&self) -> &str;

    /// The saved topology; `Ok(None)` when nothing was saved yet.
    fn load(&self) -> Result<Option<Saved>, StateError>;

    /// Saves the topology and the phase of the change in progress.
    /// Blocking (a file store fsyncs): call it off the runtime's workers.
    fn save(&self, state: &Saved) -> Result<(), StateError>;
}

/// The state file: TOML, written atomically (see `state`).
pub(crate) struct StateFile {
    path: String,
}

impl TopologyStore for StateFile {
    fn name(&self) -> &str {
        &self.path
    }

    fn load(&self) -> Result<Option<Saved>, StateError> {
        state::load(&self.path)
    }

    fn save(&self, saved: &Saved) -> Result<(), StateError> {
        state::save(&self.path, saved)
    }
}

/// The store the config names, if any (`proxy.state_file`).
pub(crate) fn open(state_file: Option<&str>) -> Option<Arc<dyn TopologyStore>> {
    state_file.map(|path| {
        Arc::new(StateFile {
            path: path.to_string(),
        }) as Arc<dyn TopologyStore>
    })
}
