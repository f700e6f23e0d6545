//! Finding the devcontainer.json of a workspace, like the reference CLI.
use crate::error::Result;
use std::path::{Path, PathBuf};

/// `explicit` (relative to the cwd) if given; else `.devcontainer/devcontainer.json`, then
/// `.devcontainer.json`, then a single `.devcontainer/*/devcontainer.json`. With several and
/// none chosen: `Error::Discovery` listing them and asking for `--config`. Returns a canonical path.
pub fn find_config(workspace: &Path, explicit: Option<&Path>) -> Result<PathBuf> {
    let _ = (workspace, explicit);
    todo!("helper: discover")
}
