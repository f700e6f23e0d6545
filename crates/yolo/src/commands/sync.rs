//! `yolo sync`: with a remote engine, the agent's work on its copy comes back as the branch
//! `yolo/<name>` of the local repository (`remote_copy::bring_back`, which `yolo down` runs
//! too).

use crate::error::{Error, Result};
use crate::remote_copy::{bring_back, collect_events, Taking};
use crate::session::{Hold, Session};

pub(crate) async fn execute(target: &crate::cli::Target) -> Result<i32> {
    let located = super::locate(target)?;
    super::known(&located)?;
    let taking = Taking::from_config()?;
    let engine = super::engine().await?;
    let session = Session::at(located, Hold::Lock("sync")).await?;
    let located = &session.located;
    let writer = session.record()?;
    collect_events(&engine, located).await?;
    match bring_back(&engine, located, &taking, writer.as_ref()).await? {
        Some(_) => Ok(0),
        None => Err(Error::NotRunning(format!(
            "nothing to sync for {}{}: yolo has no copy of it in a volume (the engine is local and this is the workspace session, or `yolo up` has not run on the copy; a named session's copy: `yolo up --copy NAME`)",
            located.workspace.display(),
            located
                .copy
                .as_ref()
                .map(|name| format!(" (session {name})"))
                .unwrap_or_default()
        ))),
    }
}
