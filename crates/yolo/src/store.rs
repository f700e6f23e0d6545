//! yolo's data dir, out of the agent's reach: every path yolo keeps there is named here, and
//! JSON files are read and written here (atomically). Who owns what:
//!
//! ```text
//! <data dir>/                         YOLO_DATA_DIR, else the platform's data folder
//!   workspaces/<id>.json              a workspace's state (`session::state`)
//!   workspaces/<id>.lock              its lock (`lock`); network-<name>.lock for the shared network
//!   approvals/<sha256 of folder>.json what the user approved for a workspace folder
//!   watched/<id>.json, <id>.copy.json the watched files' baseline, and its remote copy's (`watched`)
//!   sessions/<session>.jsonl, <session>/  a session's audit log and recordings (`audit`)
//!   network/                          the guards' own logs and control sockets
//!   runs/<run>.json                   `yolo run` records
//!   compose/<id>.json                 the Compose project file yolo hands Compose
//!   features/, features-build/<id>/   the Features cache, and a Features build's context
//!   ca/<digest>/                      the user's extra CA certificates, as built into images
//!   bin/                              the exec audit's shim
//!   <guard config folders>            `engine::guard_config_dir_of(root, guard)`
//! ```
//!
//! `<id>` is the workspace's devcontainerId.

use crate::error::{Cause, Error, Failure, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The data dir: `YOLO_DATA_DIR`, else the platform data dir.
pub(crate) fn root() -> PathBuf {
    if let Some(dir) = std::env::var_os("YOLO_DATA_DIR") {
        return PathBuf::from(dir);
    }
    directories::ProjectDirs::from("", "", "yolo")
        .map(|d| d.data_dir().to_path_buf())
        .unwrap_or_else(|| PathBuf::from(".yolo-data"))
}

/// `workspaces/`: one state file and one lock per workspace, the shared network's lock.
pub(crate) fn workspaces_dir() -> PathBuf {
    root().join("workspaces")
}

pub(crate) fn workspace_state(devcontainer_id: &str) -> PathBuf {
    workspaces_dir().join(format!("{devcontainer_id}.json"))
}

pub(crate) fn workspace_lock(devcontainer_id: &str) -> PathBuf {
    workspaces_dir().join(format!("{devcontainer_id}.lock"))
}

pub(crate) fn network_lock(name: &str) -> PathBuf {
    workspaces_dir().join(format!("network-{name}.lock"))
}

/// Keyed by the folder's path, not the devcontainerId (see `session::state::Approval`).
pub(crate) fn approval(workspace: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let key = hex::encode(Sha256::digest(workspace.as_os_str().as_encoded_bytes()));
    root().join("approvals").join(format!("{key}.json"))
}

/// Not in `workspaces/`, which holds one state file per workspace and nothing else.
pub(crate) fn watched_baseline(devcontainer_id: &str) -> PathBuf {
    root()
        .join("watched")
        .join(format!("{devcontainer_id}.json"))
}

pub(crate) fn watched_copy_baseline(devcontainer_id: &str) -> PathBuf {
    root()
        .join("watched")
        .join(format!("{devcontainer_id}.copy.json"))
}

pub(crate) fn sessions_dir() -> PathBuf {
    root().join("sessions")
}

/// The guards' own files (a guard cannot write the host's session file).
pub(crate) fn network_dir() -> PathBuf {
    root().join("network")
}

pub(crate) fn runs_dir() -> PathBuf {
    root().join("runs")
}

/// Where yolo writes a Compose project file: its data folder, never the repository.
pub(crate) fn compose_file(devcontainer_id: &str) -> PathBuf {
    root()
        .join("compose")
        .join(format!("{devcontainer_id}.json"))
}

pub(crate) fn features_cache() -> PathBuf {
    root().join("features")
}

pub(crate) fn features_build(devcontainer_id: &str) -> PathBuf {
    root().join("features-build").join(devcontainer_id)
}

/// `key`: the first hex digits of the certificates' digest.
pub(crate) fn extra_ca(key: &str) -> PathBuf {
    root().join("ca").join(key)
}

/// The certificates a workspace's agent trusts while its sessions use the guard's proxy: the
/// extra ones and the current session CA's (`http_session`). One folder per workspace, so the
/// container's mount stays the same while its files change with each session.
pub(crate) fn session_ca(devcontainer_id: &str) -> PathBuf {
    root().join("session-ca").join(devcontainer_id)
}

pub(crate) fn bin_dir() -> PathBuf {
    root().join("bin")
}

/// The JSON file at `path`; `None` when there is none.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            let why = format!("unreadable yolo state ({e}); delete the file to start afresh");
            Error::io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, why),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Write atomically (temp file + rename) so a crash never leaves half a file.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::failed(Failure::Serialize, Cause::bare(e)))?;
    replace(path, text.as_bytes()).map_err(|e| Error::io(path, e))
}

/// Put `bytes` in place of `path` whole or not at all: a temporary file of its own in the same
/// folder (two writers at once never share one), with the old file's permissions (new files
/// are the user's only), renamed over it. The folder is made when missing. Every file yolo
/// rewrites goes through here: its state, the Features cache, the export's status, the user's
/// config and devcontainer.json when `--save`/`--write` edit them.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(tmp.path(), meta.permissions())?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
