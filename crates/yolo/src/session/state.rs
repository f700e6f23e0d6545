//! What yolo remembers per workspace, in the user's data dir where the agent cannot reach it:
//! the current session and which container's one-time hooks ran (per devcontainerId), and the
//! approved container definition (per workspace folder, `Approval`).

use crate::error::Result;
use crate::store::{self, read_json, write_json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct WorkspaceState {
    pub(crate) workspace: String,
    /// A named session's name (`--copy NAME`); `None`: the workspace session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) copy: Option<String>,
    /// The open session (between `up` and `down`).
    pub(crate) session: Option<String>,
    /// Sessions of this workspace, oldest first.
    pub(crate) sessions: Vec<String>,
    /// Container whose create-time hooks completed.
    pub(crate) created_hooks_done_for: Option<String>,
    /// `State.StartedAt` of the container start whose postStartCommand ran.
    pub(crate) post_start_done_for: Option<String>,
    /// What an earlier yolo recorded as approved here, keyed by the config's path; read once
    /// to carry it over into the workspace's `Approval`, never written again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approved: Option<BTreeMap<String, String>>,
    /// How `exec`/`shell`/`run` reach the container, written by `up` so they need not re-read
    /// the config (and keep secrets from remoteEnv out of container labels).
    pub(crate) exec: Option<ExecSettings>,
    /// The allowlist the running guard was given (live `yolo allow`s come on top).
    pub(crate) allowlist: Option<Vec<String>>,
    /// What the running guard's proxy was started with, when it inspects HTTP
    /// (`http_session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) http: Option<HttpState>,
}

/// The public side of a session's credentials: never a real value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct HttpState {
    /// `(variable, stand-in)`: what `run` hands the agent in place of the real values.
    pub(crate) agent_env: Vec<(String, String)>,
    /// The credentials the guard's config names (the secrets it is sent are these).
    pub(crate) credentials: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct ExecSettings {
    pub(crate) container: String,
    pub(crate) user: Option<String>,
    pub(crate) cwd: String,
    pub(crate) remote_env: BTreeMap<String, Option<String>>,
    /// The remote user's shell environment (`userEnvProbe`), read once per container start:
    /// by `up` when a hook needs it, else by the first `exec`.
    #[serde(default)]
    pub(crate) probed_env: Option<BTreeMap<String, String>>,
    /// How to probe it (`userEnvProbe`).
    #[serde(default)]
    pub(crate) probe: crate::run_spec::UserEnvProbe,
}

/// What the user approved for a workspace: which config file yolo used, and the text of every
/// input of the container definition (relative path -> text, see `commands::approval`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct ApprovedConfig {
    /// The devcontainer.json, relative to the workspace.
    pub(crate) config_file: String,
    pub(crate) files: BTreeMap<String, String>,
    /// Fingerprints of the extra CA certificates the user had trusted with it: a record, not
    /// part of what is approved (they are the user's setting, not the repository's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) extra_ca: Vec<String>,
}

impl ApprovedConfig {
    /// The same container definition: the config file and its inputs.
    pub(crate) fn same_definition(&self, other: &ApprovedConfig) -> bool {
        self.config_file == other.config_file && self.files == other.files
    }
}

/// The approval of one workspace folder, in `<data dir>/approvals/<sha256 of its path>.json`.
/// Keyed by the folder, not by the devcontainerId (which derives from the config's path): a
/// config moved to another path is compared with the approved one, not taken for a first use.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct Approval {
    pub(crate) workspace: String,
    pub(crate) approved: Option<ApprovedConfig>,
}

impl Approval {
    pub(crate) fn load(workspace: &Path) -> Result<Approval> {
        let approval: Approval = read_json(&store::approval(workspace))?.unwrap_or_default();
        Ok(Approval {
            workspace: workspace.display().to_string(),
            ..approval
        })
    }

    pub(crate) fn save(&self, workspace: &Path) -> Result<()> {
        write_json(&store::approval(workspace), self)
    }
}

impl WorkspaceState {
    /// A listed container as `--json` shows it; folder and user from what `yolo up` saved for
    /// `exec`, when it was saved for this very container.
    pub(crate) fn container_view(&self, c: &crate::engine::Container) -> crate::output::Container {
        let exec = self.exec.as_ref().filter(|e| e.container == c.id);
        crate::output::Container::from_found(
            c,
            exec.map(|e| e.cwd.clone()),
            exec.and_then(|e| e.user.clone()),
        )
    }

    pub(crate) fn load(devcontainer_id: &str) -> Result<WorkspaceState> {
        Ok(read_json(&store::workspace_state(devcontainer_id))?.unwrap_or_default())
    }

    pub(crate) fn save(&self, devcontainer_id: &str) -> Result<()> {
        write_json(&store::workspace_state(devcontainer_id), self)
    }

    /// All workspace states with their ids (the file names), for `yolo ps --sessions`.
    pub(crate) fn all_with_ids() -> Vec<(String, WorkspaceState)> {
        let Ok(entries) = std::fs::read_dir(store::workspaces_dir()) else {
            return vec![];
        };
        entries
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                let id = path.file_stem()?.to_str()?.to_string();
                (path.extension()? == "json").then_some(())?;
                let text = std::fs::read_to_string(&path).ok()?;
                Some((id, serde_json::from_str(&text).ok()?))
            })
            .collect()
    }

    /// All workspace states (for `yolo audit --list` and `status`).
    pub(crate) fn all() -> Vec<WorkspaceState> {
        let dir = store::workspaces_dir();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return vec![];
        };
        entries
            .flatten()
            // `<id>.json` only: the folder also holds each workspace's lock.
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_json::from_str(&t).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary() -> crate::engine::Container {
        crate::engine::Container {
            id: "abc123".into(),
            name: "yolo-repo-12345678".into(),
            role: crate::engine::Role::Agent,
            running: true,
            state: "running".into(),
            status: "Up 3 minutes".into(),
            image: "debian:bookworm-slim".into(),
            devcontainer_id: Some("id".into()),
            workspace: Some("/home/me/repo".into()),
            config_file: None,
            copy: None,
            config_hash: None,
            network: None,
            volumes: vec![],
            ports: vec![],
        }
    }

    fn exec(container: &str) -> ExecSettings {
        ExecSettings {
            probed_env: None,
            probe: Default::default(),
            container: container.into(),
            user: Some("dev".into()),
            cwd: "/workspace".into(),
            remote_env: BTreeMap::new(),
        }
    }

    #[test]
    fn a_container_reads_the_same_wherever_it_is_shown() {
        let with = |container| WorkspaceState {
            exec: Some(exec(container)),
            ..WorkspaceState::default()
        };
        let c = with("abc123").container_view(&summary());
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({
                "id": "abc123",
                "name": "yolo-repo-12345678",
                "image": "debian:bookworm-slim",
                "state": "running",
                "workspace": "/home/me/repo",
                "workspace_folder": "/workspace",
                "remote_user": "dev"
            })
        );
        // Settings saved for an earlier container of the workspace are not this one's.
        let other = with("old").container_view(&summary());
        assert_eq!((other.workspace_folder, other.remote_user), (None, None));
    }
}
