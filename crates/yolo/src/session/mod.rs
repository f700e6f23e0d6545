//! One workspace's session: what yolo keeps for it in the user's data dir (`state`, laid out by
//! `crate::store`), its lock, the session's audit record (`record`) and what the user approved
//! (`approval`). Every command that works on a workspace holds it as one `Session`, taken from
//! `Session::lock` (a command that makes or removes containers: `up`, `down`, `sync`) or
//! `Session::read` (one that only looks or runs in it).

pub(crate) mod approval;
pub(crate) mod firewall;
pub(crate) mod record;
pub(crate) mod runs;
pub(crate) mod state;
pub(crate) mod status;

use crate::audit::Writer;
use crate::error::Result;
use crate::lock::{self, WorkspaceLock};
use state::WorkspaceState;

/// One workspace's stored session, as a command holds it: its state, and its lock while the
/// command may change the workspace's containers.
#[derive(Debug)]
pub(crate) struct Session {
    /// The workspace's devcontainerId: the key of everything stored for it.
    id: String,
    pub(crate) state: WorkspaceState,
    _lock: Option<WorkspaceLock>,
}

impl Session {
    /// For `command` (`up`, `down`, `sync`), which makes, changes or removes the workspace's
    /// containers: wait for the workspace's lock (one such yolo at a time), then load the state.
    pub(crate) async fn lock(devcontainer_id: &str, command: &str) -> Result<Session> {
        let lock = lock::acquire(devcontainer_id, command).await?;
        Ok(Session {
            id: devcontainer_id.to_string(),
            state: WorkspaceState::load(devcontainer_id)?,
            _lock: Some(lock),
        })
    }

    /// `lock`, for a command whose work does not depend on the state (`down --remove` removes
    /// by labels): an unreadable state is a warning, and a fresh one replaces it.
    pub(crate) async fn lock_afresh_if_unreadable(
        devcontainer_id: &str,
        command: &str,
        why: &str,
    ) -> Result<Session> {
        let lock = lock::acquire(devcontainer_id, command).await?;
        let state = WorkspaceState::load(devcontainer_id).unwrap_or_else(|e| {
            eprintln!(
                "{} {e}; {why} and starting yolo's state for this workspace afresh",
                console::style("warning:").yellow().bold()
            );
            WorkspaceState::default()
        });
        Ok(Session {
            id: devcontainer_id.to_string(),
            state,
            _lock: Some(lock),
        })
    }

    /// For a command that reads the state or runs in the workspace's container without making
    /// or removing any (`exec`, `firewall`, `audit`, `kube`): no lock.
    pub(crate) fn read(devcontainer_id: &str) -> Result<Session> {
        Ok(Session {
            id: devcontainer_id.to_string(),
            state: WorkspaceState::load(devcontainer_id)?,
            _lock: None,
        })
    }

    /// The open session's audit log, if a session is open.
    pub(crate) fn record(&self) -> Result<Option<Writer>> {
        record::current(&self.state)
    }

    /// What changed in the files the host runs since yolo last looked, written to the open
    /// session's log and printed (`crate::watched`).
    pub(crate) fn report_watched(&self) -> Result<()> {
        crate::watched::report_and_print(&self.id, self.record()?.as_ref());
        Ok(())
    }

    /// Record the open session's end, if one is open (`record::close`).
    pub(crate) fn close(&mut self, reason: &str) -> Result<()> {
        record::close(&mut self.state, reason)
    }

    pub(crate) fn save(&self) -> Result<()> {
        self.state.save(&self.id)
    }
}
