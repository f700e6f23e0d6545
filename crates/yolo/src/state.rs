//! What yolo remembers per workspace, in the user's data dir where the agent cannot reach it:
//! the current session, which container's one-time hooks ran, and the approved `.devcontainer/`.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct WorkspaceState {
    pub(crate) workspace: String,
    /// The open session (between `up` and `down`).
    pub(crate) session: Option<String>,
    /// Sessions of this workspace, oldest first.
    pub(crate) sessions: Vec<String>,
    /// Container whose create-time hooks completed.
    pub(crate) created_hooks_done_for: Option<String>,
    /// `State.StartedAt` of the container start whose postStartCommand ran.
    pub(crate) post_start_done_for: Option<String>,
    /// The approved contents of the config folder: relative path -> text.
    pub(crate) approved: Option<BTreeMap<String, String>>,
    /// How `exec`/`shell`/`run` reach the container, written by `up` so they need not re-read
    /// the config (and keep secrets from remoteEnv out of container labels).
    pub(crate) exec: Option<ExecSettings>,
    /// The allowlist the running guard was given (live `yolo allow`s come on top).
    pub(crate) allowlist: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct ExecSettings {
    pub(crate) container: String,
    pub(crate) user: Option<String>,
    pub(crate) cwd: String,
    pub(crate) remote_env: BTreeMap<String, Option<String>>,
}

fn path(devcontainer_id: &str) -> PathBuf {
    crate::user_config::data_dir()
        .join("workspaces")
        .join(format!("{devcontainer_id}.json"))
}

impl WorkspaceState {
    pub(crate) fn load(devcontainer_id: &str) -> Result<WorkspaceState> {
        let path = path(devcontainer_id);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                let why = format!("unreadable yolo state ({e}); delete the file to start afresh");
                Error::io(
                    &path,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, why),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(WorkspaceState::default()),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// Write atomically (temp file + rename) so a crash never leaves half a file.
    pub(crate) fn save(&self, devcontainer_id: &str) -> Result<()> {
        let path = path(devcontainer_id);
        let dir = path.parent().map(PathBuf::from).unwrap_or_default();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::other(e.to_string()))?;
        std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
    }

    /// All workspace states (for `yolo audit --list` and `status`).
    pub(crate) fn all() -> Vec<WorkspaceState> {
        let dir = crate::user_config::data_dir().join("workspaces");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return vec![];
        };
        entries
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_json::from_str(&t).ok())
            .collect()
    }
}
