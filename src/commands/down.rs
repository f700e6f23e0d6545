//! `yolo down`: stop the container; `--remove` deletes it, `--volumes` its named volumes too.

use super::session;
use crate::audit::EventKind;
use crate::cli::Target;
use crate::error::Result;
use crate::project::Located;
use crate::state::WorkspaceState;

pub async fn execute(target: &Target, remove: bool, volumes: bool) -> Result<i32> {
    let located = Located::find(target)?;
    let engine = super::engine().await?;
    let mut state = WorkspaceState::load(&located.devcontainer_id)?;
    let found = engine
        .find_container(&located.workspace, &located.config_file, "agent")
        .await?;
    let Some(container) = found else {
        eprintln!("yolo: no container for {}", located.workspace.display());
        close_session(&mut state, "down (no container)")?;
        state.save(&located.devcontainer_id)?;
        return Ok(0);
    };
    let id = container.id.clone().unwrap_or_default();
    let mounts = container.mounts.clone().unwrap_or_default();
    if remove {
        engine.remove(&id).await?;
        if volumes {
            for name in mounts
                .iter()
                .filter(|m| m.typ.as_ref().map(|t| t.to_string()).as_deref() == Some("volume"))
                .filter_map(|m| m.name.clone())
            {
                engine.remove_volume(&name).await?;
            }
        }
        state.created_hooks_done_for = None;
        state.post_start_done_for = None;
    } else {
        engine.stop(&id).await?;
    }
    close_session(&mut state, if remove { "down --remove" } else { "down" })?;
    state.save(&located.devcontainer_id)?;
    eprintln!(
        "yolo: {} {}",
        container
            .names
            .unwrap_or_default()
            .join(",")
            .trim_start_matches('/'),
        if remove { "removed" } else { "stopped" }
    );
    Ok(0)
}

fn close_session(state: &mut WorkspaceState, reason: &str) -> Result<()> {
    if let Some(writer) = session::current(state)? {
        writer.write(EventKind::SessionStop {
            reason: reason.into(),
        })?;
    }
    state.session = None;
    Ok(())
}
