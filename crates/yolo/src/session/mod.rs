//! One workspace's session: what yolo keeps for it in the user's data dir (`state`, laid out by
//! `crate::store`), its lock, the session's audit record (`record`) and what the user approved
//! (`approval`). Every command that works on a workspace holds it as one `Session`, taken from
//! `Session::open` (or `Session::at` for a workspace located already), locked (`Hold::Lock`) for
//! a command that makes or removes containers (`up`, `down`, `sync`).

pub(crate) mod approval;
pub(crate) mod checkpoints;
pub(crate) mod firewall;
pub(crate) mod record;
pub(crate) mod runs;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod teardown;

use crate::audit::Writer;
use crate::cli::Target;
use crate::error::Result;
use crate::lock::{self, WorkspaceLock};
use crate::project::Located;
use state::WorkspaceState;

/// One workspace's stored session, as a command holds it: the workspace, its state, and its
/// lock while the command may change the workspace's containers.
#[derive(Debug)]
pub(crate) struct Session {
    /// The workspace and its config; its devcontainerId is the key of everything stored for it.
    pub(crate) located: Located,
    pub(crate) state: WorkspaceState,
    _lock: Option<WorkspaceLock>,
}

/// How a command holds its workspace's session.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Hold<'a> {
    /// For a command that reads the state or runs in the workspace's container without making
    /// or removing any (`exec`, `firewall`, `audit`, `kube`): no lock.
    Read,
    /// For `command` (`up`, `down`, `sync`), which makes, changes or removes the workspace's
    /// containers: wait for the workspace's lock (one such yolo at a time).
    Lock(&'a str),
    /// `Lock`, for a command whose work does not depend on the state (`down --remove` removes
    /// by labels): an unreadable state is a warning (`why` says what goes on), and a fresh one
    /// replaces it.
    LockAfresh { command: &'a str, why: &'a str },
}

impl Session {
    /// The session of the workspace `target` names (`--workspace`, `--config`): located, held
    /// as `hold` says, its state loaded. Every workspace command takes its session here.
    pub(crate) async fn open(target: &Target, hold: Hold<'_>) -> Result<Session> {
        let located = Located::find(target.workspace.as_deref(), target.config.as_deref())?
            .named(target.named_copy()?);
        Session::at(located, hold).await
    }

    /// `open`, for a workspace located already (`up`'s project, a run's record).
    pub(crate) async fn at(located: Located, hold: Hold<'_>) -> Result<Session> {
        let id = located.devcontainer_id.as_str();
        let (state, lock) = match hold {
            Hold::Read => (WorkspaceState::load(id)?, None),
            Hold::Lock(command) => {
                let lock = lock::acquire(id, command).await?;
                (WorkspaceState::load(id)?, Some(lock))
            }
            Hold::LockAfresh { command, why } => {
                let lock = lock::acquire(id, command).await?;
                let state = WorkspaceState::load(id).unwrap_or_else(|e| {
                    eprintln!(
                        "{} {e}; {why} and starting yolo's state for this workspace afresh",
                        console::style("warning:").yellow().bold()
                    );
                    WorkspaceState::default()
                });
                (state, Some(lock))
            }
        };
        Ok(Session {
            located,
            state,
            _lock: lock,
        })
    }

    /// The workspace's latest session, open or closed.
    pub(crate) fn latest(&self) -> Result<String> {
        self.state.sessions.last().cloned().ok_or_else(|| {
            crate::error::Error::NotFound(format!(
                "no sessions yet for {}; start one with `yolo up`",
                self.located.workspace.display()
            ))
        })
    }

    /// The open session's audit log, if a session is open.
    pub(crate) fn record(&self) -> Result<Option<Writer>> {
        record::current(&self.state)
    }

    /// What changed in the files the host runs since yolo last looked, written to the open
    /// session's log and printed (`crate::watched`).
    pub(crate) fn report_watched(&self) -> Result<()> {
        crate::watched::report_and_print(&self.located.devcontainer_id, self.record()?.as_ref());
        Ok(())
    }

    /// Record the open session's end, if one is open (`record::close`).
    pub(crate) fn close(&mut self, reason: &str) -> Result<()> {
        record::close(&mut self.state, reason)
    }

    pub(crate) fn save(&self) -> Result<()> {
        self.state.save(&self.located.devcontainer_id)
    }
}
