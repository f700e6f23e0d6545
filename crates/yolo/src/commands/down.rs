//! `yolo down`: stop the agent container, then its guard; `--remove` deletes both and yolo's
//! network; `--volumes` also the named volumes.

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
    let (ws, cfg) = (&located.workspace, &located.config_file);
    let agent = engine.find_container(ws, cfg, "agent").await?;
    let guard = engine.find_container(ws, cfg, "guard").await?;
    if agent.is_none() && guard.is_none() {
        eprintln!("yolo: no container for {}", located.workspace.display());
    }
    // The agent first: it must never run on without its guard.
    for c in [&agent, &guard].into_iter().flatten() {
        let id = c.id.clone().unwrap_or_default();
        if remove {
            engine.remove(&id).await?;
        } else {
            engine.stop(&id).await?;
        }
    }
    if remove {
        if let Some(a) = &agent {
            if volumes {
                for name in a
                    .mounts
                    .iter()
                    .flatten()
                    .filter(|m| m.typ.as_ref().map(|t| t.to_string()).as_deref() == Some("volume"))
                    .filter_map(|m| m.name.clone())
                {
                    engine.remove_volume(&name).await?;
                }
            }
            // yolo's own network (a network the user named in their config has another name).
            let name = a.names.iter().flatten().next().cloned().unwrap_or_default();
            engine
                .remove_network(&super::network::own_network(name.trim_start_matches('/')))
                .await?;
        }
        state.created_hooks_done_for = None;
        state.post_start_done_for = None;
        state.allowlist = None;
    }
    close_session(&mut state, if remove { "down --remove" } else { "down" })?;
    state.save(&located.devcontainer_id)?;
    if let Some(a) = &agent {
        let name = a.names.iter().flatten().next().cloned().unwrap_or_default();
        let what = if remove { "removed" } else { "stopped" };
        eprintln!("yolo: {} {what}", name.trim_start_matches('/'));
    }
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
