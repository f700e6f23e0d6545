//! Sessions: one `yolo up` ... `yolo down`. The session id lives in the workspace state; its
//! events go to `<data dir>/sessions/<id>.jsonl` through `audit::Writer`.

use crate::audit::{self, EventKind, Writer};
use crate::error::Result;
use crate::project::Project;
use crate::session::state::WorkspaceState;

/// A fresh session id: sortable by time, unique.
pub(crate) fn new_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let rand = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &rand[..8])
}

/// Open a new session for the project (closing a stale one) and record its start.
pub(crate) fn open(
    project: &Project,
    state: &mut WorkspaceState,
    image: &str,
    network: &str,
    allowlist: &[String],
    reason_for_close: &str,
) -> Result<Writer> {
    if let Some(old) = state.session.take() {
        let writer = Writer::open(&audit::session_path(&old), &old)?;
        writer.write(EventKind::SessionStop {
            reason: reason_for_close.into(),
        })?;
        writer.close()?;
    }
    let id = new_id();
    let spec = &project.spec;
    let writer = Writer::open(&audit::session_path(&id), &id)?;
    writer.write(EventKind::SessionStart {
        workspace: spec.workspace.display().to_string(),
        config_file: spec.config_file.display().to_string(),
        config_hash: spec.config_hash.clone(),
        image: image.to_string(),
        container: spec.container_name.clone(),
        limits: serde_json::to_value(spec.limits).unwrap_or_default(),
        grants: spec.grants_used.clone(),
        network: network.into(),
        allowlist: allowlist.to_vec(),
        extra_ca: spec.extra_ca.clone(),
    })?;
    state.session = Some(id.clone());
    state.sessions.push(id);
    state.workspace = spec.workspace.display().to_string();
    state.copy = spec.copy.clone();
    Ok(writer)
}

/// The open session's writer, if any.
pub(crate) fn current(state: &WorkspaceState) -> Result<Option<Writer>> {
    match &state.session {
        Some(id) => Ok(Some(Writer::open(&audit::session_path(id), id)?)),
        None => Ok(None),
    }
}

/// Record the open session's end, if one is open, and forget it.
pub(crate) fn close(state: &mut WorkspaceState, reason: &str) -> Result<()> {
    if let Some(writer) = current(state)? {
        writer.write(EventKind::SessionStop {
            reason: reason.into(),
        })?;
        writer.close()?;
    }
    state.session = None;
    Ok(())
}
